/* send_dead: in run-through mode a send to a rank that died ends with MPIX_ERR_PROC_FAILED.
 * driver: tests/c/ft/run.sh (needs --ft run-through; not run by run-tests.sh)
 *
 *   mpiexec --ft run-through -n 3 ./send_dead
 *
 * The last rank kills itself (SIGKILL) after a barrier. Each survivor then:
 * 1. MPI_Ssend to it: a synchronous send cannot complete without a matching receive, so it
 *    must end with MPIX_ERR_PROC_FAILED once the failure is detected (it returned
 *    MPI_SUCCESS before: the blocking send dropped the error its request ended with);
 * 2. MPI_Send to it, now that the failure is known: MPIX_ERR_PROC_FAILED too;
 * 3. a ring of messages among the survivors still works.
 * Each survivor prints "rank R: ok" or "rank R: FAIL ..." and exits 0 or 1. */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>

static int class_of(int rc)
{
    int c = -1;
    MPI_Error_class(rc, &c);
    return c;
}

int main(int argc, char **argv)
{
    int rank, size, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int dead = size - 1;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == dead)
        raise(SIGKILL);
    int x = rank, c;
    c = class_of(MPI_Ssend(&x, 1, MPI_INT, dead, 0, MPI_COMM_WORLD));
    if (c != MPIX_ERR_PROC_FAILED) {
        printf("rank %d: FAIL MPI_Ssend to the dead rank: class %d\n", rank, c);
        bad = 1;
    }
    c = class_of(MPI_Send(&x, 1, MPI_INT, dead, 0, MPI_COMM_WORLD));
    if (c != MPIX_ERR_PROC_FAILED) {
        printf("rank %d: FAIL MPI_Send to the known-dead rank: class %d\n", rank, c);
        bad = 1;
    }
    int n = size - 1, to = (rank + 1) % n, from = (rank + n - 1) % n, got = -1;
    int rc = MPI_Sendrecv(&x, 1, MPI_INT, to, 1, &got, 1, MPI_INT, from, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || got != from) {
        printf("rank %d: FAIL ring among survivors: class %d, got %d want %d\n", rank, class_of(rc), got, from);
        bad = 1;
    }
    if (!bad)
        printf("rank %d: ok\n", rank);
    fflush(stdout);
    MPI_Finalize();
    return bad;
}
