/*
 * bcast_loop: MPI_Bcast called back to back (no barrier between calls), the pattern of a
 * program that broadcasts in a loop; it measures the broadcast's throughput, where
 * bench/osu/osu.c's bcast (a barrier between calls) measures each call's latency.
 *
 *   mpiexec -n N ./bcast_loop BYTES ITERATIONS
 *
 * Every rank checks the first byte of every broadcast. Output on rank 0:
 *   loop BYTES us_per_call
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int bytes = argc > 1 ? atoi(argv[1]) : 8;
    int iters = argc > 2 ? atoi(argv[2]) : 10000;
    if (bytes < 1 || iters < 1) {
        if (rank == 0)
            fprintf(stderr, "usage: bcast_loop BYTES ITERATIONS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *buf = calloc((size_t)bytes, 1);
    if (!buf)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (int i = 0; i < iters / 10 + 1; i++)
        MPI_Bcast(buf, bytes, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (rank == 0)
            buf[0] = (char)i;
        MPI_Bcast(buf, bytes, MPI_CHAR, 0, MPI_COMM_WORLD);
        if (buf[0] != (char)i) {
            fprintf(stderr, "rank %d: broadcast %d carried %d\n", rank, i, buf[0]);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    t = MPI_Wtime() - t;
    if (rank == 0)
        printf("loop %d %.3f\n", bytes, t / iters * 1e6);
    free(buf);
    MPI_Finalize();
    return 0;
}
