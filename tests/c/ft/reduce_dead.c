/* reduce_dead: in run-through mode MPI_Reduce goes on without a rank whose failure the
 * application acknowledged, keeping rank order for non-commutative operations.
 * driver: tests/c/ft/run.sh (needs --ft run-through; not run by run-tests.sh)
 *
 *   mpiexec --ft run-through -n 5 ./reduce_dead
 *
 * 1. Fault-free: sums of 8 and 3 000 000 ints (the large one runs in chunks at the root)
 *    and a non-commutative "leftmost" operation, every rank as root.
 * 2. Rank 1 dies; the survivors learn it (a receive from it fails), acknowledge it, and
 *    the same reductions must succeed over the survivors with the right values.
 * Each survivor prints "rank R: ok" or "rank R: FAIL ..." and exits 0 or 1. */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

static void leftmost(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    for (int i = 0; i < *len; i++)
        ((int *)inout)[i] = ((int *)in)[i];
}

static int run(MPI_Comm comm, int rank, int size, const int *alive, MPI_Op left, int phase)
{
    static int big_in[3000000], big_out[3000000];
    for (int root = 0; root < size; root++) {
        if (!alive[root])
            continue;
        int n = 3000000, want = 0, first = -1;
        for (int r = 0; r < size; r++)
            if (alive[r]) {
                want += r + 1;
                if (first < 0)
                    first = r + 1;
            }
        for (int i = 0; i < n; i++)
            big_in[i] = (rank + 1) * (i % 7 + 1);
        int rc = MPI_Reduce(big_in, big_out, n, MPI_INT, MPI_SUM, root, comm);
        if (rc != MPI_SUCCESS) {
            printf("rank %d: FAIL phase %d large reduce to %d returned %d\n", rank, phase, root, rc);
            return 1;
        }
        if (rank == root)
            for (int i = 0; i < n; i++)
                if (big_out[i] != want * (i % 7 + 1)) {
                    printf("rank %d: FAIL phase %d large reduce element %d = %d, want %d\n", rank,
                           phase, i, big_out[i], want * (i % 7 + 1));
                    return 1;
                }
        int v[8], out[8];
        for (int i = 0; i < 8; i++)
            v[i] = rank + 1;
        rc = MPI_Reduce(v, out, 8, MPI_INT, left, root, comm);
        if (rc != MPI_SUCCESS || (rank == root && out[3] != first)) {
            printf("rank %d: FAIL phase %d leftmost reduce to %d: rc %d value %d want %d\n", rank,
                   phase, root, rc, out[3], first);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    int rank, size, bad = 0, x;
    MPI_Comm comm;
    MPI_Op left;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Op_create(leftmost, 0, &left);
    int *alive = malloc(sizeof(int) * size);
    for (int r = 0; r < size; r++)
        alive[r] = 1;
    int victim = 1;
    bad = run(comm, rank, size, alive, left, 1);
    MPI_Barrier(comm);
    if (rank == victim)
        raise(SIGKILL);
    alive[victim] = 0;
    if (!bad) {
        /* Learn of the failure, then acknowledge it. */
        if (MPI_Recv(&x, 1, MPI_INT, victim, 0, comm, MPI_STATUS_IGNORE) == MPI_SUCCESS) {
            printf("rank %d: FAIL receive from the dead rank succeeded\n", rank);
            bad = 1;
        }
        MPIX_Comm_failure_ack(comm);
    }
    if (!bad)
        bad = run(comm, rank, size, alive, left, 2);
    if (!bad)
        printf("rank %d: ok\n", rank);
    fflush(stdout);
    MPI_Finalize();
    return bad;
}
