/* ranks: 2 3 4 8
 * timeout: 120
 * MPI_Barrier keeps every rank in until the last one has entered, whichever algorithm runs
 * it (the slot exchange's barrier rooted at rank 0 on one host, the message barriers over
 * tcp). In each round one rank, a different one each time, enters late; every rank reads
 * the host's monotonic clock on entry and on exit, and no exit may come before the latest
 * entry. Also on a split communicator, whose barrier has its own segment.
 */
#include "ct.h"
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void rounds(MPI_Comm comm, int count)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    double *all = malloc(sizeof(double) * 2 * (size_t)n);
    if (!all)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (int it = 0; it < count; it++) {
        int late = it % n;
        if (me == late) {
            /* Long enough that an early exit shows: the others are in the barrier by then. */
            double until = now() + (it % 7 == 0 ? 2e-3 : 2e-4);
            while (now() < until)
                ;
        }
        double t[2];
        t[0] = now();
        CT_MPI(MPI_Barrier(comm));
        t[1] = now();
        CT_MPI(MPI_Allgather(t, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, comm));
        double last_in = all[0], first_out = all[1];
        int who_in = 0, who_out = 0;
        for (int r = 1; r < n; r++) {
            if (all[2 * r] > last_in) {
                last_in = all[2 * r];
                who_in = r;
            }
            if (all[2 * r + 1] < first_out) {
                first_out = all[2 * r + 1];
                who_out = r;
            }
        }
        CT_CHECK(first_out >= last_in, "round %d (%d ranks): rank %d left at %.9f, before rank %d entered at %.9f", it, n, who_out,
                 first_out, who_in, last_in);
    }
    free(all);
}

int main(int argc, char **argv)
{
    ct_init(&argc, &argv, "barrier");
    rounds(MPI_COMM_WORLD, 300);
    MPI_Comm half;
    CT_MPI(MPI_Comm_split(MPI_COMM_WORLD, ct_rank % 2, ct_rank, &half));
    rounds(half, 100);
    MPI_Comm_free(&half);
    return ct_finish();
}
