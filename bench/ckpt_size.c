/*
 * ckpt_size: an MPI program with MIB MiB of touched heap per rank that computes for SECS
 * seconds in steps of 10 ms with an MPI_Allreduce after each step (the shape of an
 * iterative solver), for measuring coordinated checkpoints against image size.
 *
 *   mpiexec -n N ./ckpt_size MIB SECS
 *
 * Rank 0 prints the number of steps done and a checksum of the data (which must not change
 * when the job is checkpointed or rolled back).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 64;
    double secs = argc > 2 ? atof(argv[2]) : 10;
    size_t n = mib << 17; /* doubles */
    double *a = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) a[i] = (double)(i % 1000) * 0.001 + rank;
    /* The number of steps is fixed by rank 0's clock at the start, so every run does the same work. */
    double t0 = now();
    long steps = 0, total = (long)(secs * 100);
    uint64_t sum = 0;
    while (steps < total) {
        double t = now();
        while (now() - t < 0.01) {
        }
        size_t k = (size_t)steps * 4099 % n;
        a[k] += 1.0;
        double local = a[k], g = 0;
        MPI_Allreduce(&local, &g, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        sum = sum * 31 + (uint64_t)g;
        steps++;
    }
    if (rank == 0) printf("steps %ld checksum %llu time %.2f\n", steps, (unsigned long long)sum, now() - t0);
    free(a);
    MPI_Finalize();
    return 0;
}
