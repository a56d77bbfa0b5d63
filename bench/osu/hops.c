/*
 * Pairwise and ring ping-pong (the suite's `pairs` and `ring`) timed two ways: by the wall
 * clock from one barrier to the next, and by each rank's own loop. Where ranks outnumber
 * CPUs the two differ when some ranks run their loops while others wait for a CPU: the wall
 * time is what the whole job took, and the spread of the own loops shows how evenly the
 * ranks progressed.
 *
 *   mpicc -O2 -o hops bench/osu/hops.c && mpiexec -n 8 ./hops [HOPS] [BYTES]
 *
 * Prints, per pattern, the wall time per hop and the fastest and slowest rank's own loop
 * per hop (µs). `pairs`: rank r and r xor 1 ping-pong HOPS times, every pair at once (an odd
 * last rank sits out); `ring`: one message goes round the ranks HOPS / size times.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* `mine` < 0: this rank took no part (it counts in neither the fastest nor the slowest). */
static void report(const char *name, double mine, double wall, double hops, int rank)
{
    double mn, mx, low = mine < 0 ? 1e30 : mine;
    MPI_Reduce(&low, &mn, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s: wall %.3f us/hop, own loops %.3f-%.3f\n", name, wall / hops * 1e6,
               mn / hops * 1e6, mx / hops * 1e6);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int hops = argc > 1 ? atoi(argv[1]) : 100000;
    int bytes = argc > 2 ? atoi(argv[2]) : 4;
    if (hops < size || bytes < 0) {
        if (rank == 0)
            fprintf(stderr, "usage: hops [HOPS >= ranks] [BYTES]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *buf = calloc((size_t)bytes + 1, 1);
    if (size < 2) {
        if (rank == 0)
            printf("hops needs at least 2 ranks\n");
        MPI_Finalize();
        return 0;
    }

    int peer = rank ^ 1;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (peer < size) {
        for (int i = 0; i < hops; i++) {
            if (rank < peer) {
                MPI_Send(buf, bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            }
        }
    }
    double mine = peer < size ? MPI_Wtime() - t0 : -1;
    MPI_Barrier(MPI_COMM_WORLD);
    /* Two messages per iteration: a hop is one of them. */
    report("pairs", mine, MPI_Wtime() - t0, 2.0 * hops, rank);

    int next = (rank + 1) % size, prev = (rank + size - 1) % size, rounds = hops / size;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = 0; i < rounds; i++) {
        if (rank == 0) {
            MPI_Send(buf, bytes, MPI_BYTE, next, 2, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_BYTE, prev, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, bytes, MPI_BYTE, prev, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_BYTE, next, 2, MPI_COMM_WORLD);
        }
    }
    mine = MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
    report("ring", mine, MPI_Wtime() - t0, (double)rounds * size, rank);

    free(buf);
    MPI_Finalize();
    return 0;
}
