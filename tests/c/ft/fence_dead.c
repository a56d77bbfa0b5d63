/* fence_dead: in run-through mode a fence on a window within one host (a barrier in the
 * window's shared control segment, not a barrier of messages) must end with
 * MPIX_ERR_PROC_FAILED when a member dies, not hang.
 * driver: tests/c/ft/run.sh (needs --ft run-through; not run by run-tests.sh)
 *
 *   mpiexec --ft run-through -n 3 ./fence_dead
 *
 * 1. 200 fence epochs of puts around a ring on an MPI_Win_allocate window, checked.
 * 2. The last rank dies (SIGKILL) after a fence; every survivor's next fence must return
 *    MPIX_ERR_PROC_FAILED (the job's timeout catches a hang).
 * Each survivor prints "rank R: ok" or "rank R: FAIL ..." and exits 0 or 1. */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *mem;
    MPI_Win win;
    /* two slots, alternate epochs: a neighbour's put of the next epoch never lands on the
     * slot this rank is still reading */
    MPI_Win_allocate(2 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    mem[0] = mem[1] = -1;
    int victim = size - 1, left = (rank + size - 1) % size;
    MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
    for (int it = 0; it < 200 && !bad; it++) {
        int v = rank * 1000 + it;
        MPI_Put(&v, 1, MPI_INT, (rank + 1) % size, it % 2, 1, MPI_INT, win);
        int rc = MPI_Win_fence(0, win);
        if (rc != MPI_SUCCESS || mem[it % 2] != left * 1000 + it) {
            printf("rank %d: FAIL epoch %d: rc %d, value %d, want %d\n", rank, it, rc, mem[it % 2], left * 1000 + it);
            bad = 1;
        }
    }
    if (!bad) {
        if (rank == victim)
            raise(SIGKILL);
        int rc = MPI_Win_fence(0, win), ec = 0;
        MPI_Error_class(rc, &ec);
        if (ec != MPIX_ERR_PROC_FAILED) {
            printf("rank %d: FAIL fence after the death of rank %d returned class %d\n", rank, victim, ec);
            bad = 1;
        }
    }
    if (!bad)
        printf("rank %d: ok\n", rank);
    fflush(stdout);
    MPI_Finalize();
    return bad;
}
