/* An unmodified MPI program for the coordinated-checkpoint tests: a token ring with
 * MPI_ANY_SOURCE receives plus a neighbour exchange, for a few seconds of work. Every rank
 * folds what it receives into a checksum; rank 0 prints one line per round and the final
 * checksums, so any lost, duplicated or reordered message changes the output.
 * Arguments: rounds, microseconds of computation per round, doubles exchanged with each
 * neighbour per round, and a file rank 0 writes its lines to. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void spin_us(long us) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    long work_us = argc > 2 ? atol(argv[2]) : 10000;
    size_t big = argc > 3 ? (size_t)atol(argv[3]) : 100000;
    uint64_t sum = 1469598103934665603ULL;
    double *out = malloc(big * sizeof(double)), *in = malloc(big * sizeof(double));
    /* Rank 0 also writes its lines to a file (a descriptor that must survive a rollback). */
    FILE *log = (rank == 0 && argc > 4) ? fopen(argv[4], "w") : NULL;
    for (int r = 0; r < rounds; r++) {
        /* The token goes round; everyone but 0 receives from any source. */
        uint64_t tok = 0;
        if (rank == 0) {
            tok = (uint64_t)r * 1000003u;
            MPI_Send(&tok, 1, MPI_UINT64_T, 1 % size, r, MPI_COMM_WORLD);
            MPI_Recv(&tok, 1, MPI_UINT64_T, MPI_ANY_SOURCE, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Status st;
            MPI_Recv(&tok, 1, MPI_UINT64_T, MPI_ANY_SOURCE, r, MPI_COMM_WORLD, &st);
            tok = tok * 31 + (uint64_t)rank + (uint64_t)st.MPI_SOURCE;
            MPI_Send(&tok, 1, MPI_UINT64_T, (rank + 1) % size, r, MPI_COMM_WORLD);
        }
        sum = (sum ^ tok) * 1099511628211ULL;
        /* A large exchange with both neighbours (rendezvous sizes). */
        for (size_t i = 0; i < big; i++) out[i] = (double)(rank * 7 + r) + (double)i * 0.5;
        MPI_Request rq[2];
        MPI_Irecv(in, (int)big, MPI_DOUBLE, (rank + size - 1) % size, 1000 + r, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(out, (int)big, MPI_DOUBLE, (rank + 1) % size, 1000 + r, MPI_COMM_WORLD, &rq[1]);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        for (size_t i = 0; i < big; i += 997) sum = (sum ^ (uint64_t)in[i]) * 1099511628211ULL;
        double local = (double)(sum % 1000003), total = 0;
        MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("round %d token %llu total %.0f\n", r, (unsigned long long)tok, total);
            fflush(stdout);
            if (log) {
                fprintf(log, "round %d %llu\n", r, (unsigned long long)sum);
                fflush(log);
            }
        }
        spin_us(work_us);
    }
    uint64_t all = 0;
    MPI_Reduce(&sum, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("final %llu\n", (unsigned long long)all);
    if (log) fclose(log);
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}
