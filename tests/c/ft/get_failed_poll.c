/* get_failed_poll: a failure must become visible to a rank that only polls.
 * driver: tests/c/ft/run.sh (needs --ft run-through; not run by run-tests.sh)
 *
 *   mpiexec --ft run-through -n 3 ./get_failed_poll
 *
 * The last rank dies (SIGKILL) after a barrier. Every survivor then, without ever
 * blocking in an MPI call:
 *   1. polls MPIX_Comm_get_failed (with usleep between calls) until it lists the victim;
 *   2. posts MPI_Irecv from the victim and polls MPI_Test until the request completes
 *      with an error.
 * Each step has 5 s; MPIX_Steadfast_failed is printed to show the membership view knew.
 * Each survivor prints "rank R: ok" or "rank R: FAIL ..." and exits 0 or 1.
 *
 * Seen on 2026-11-22 (ft-example branch, shm and tcp): both steps time out although
 * MPIX_Steadfast_failed reports the failure within 0.5 s. Engine::progress (called by
 * MPIX_Comm_get_failed and MPI_Test) never calls poll_failures(); only block_until does,
 * so a program that polls never learns of the failure.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size, x = 0, bad = 0;
    MPI_Comm comm;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int victim = size - 1;
    MPI_Barrier(comm);
    if (rank == victim)
        raise(SIGKILL);

    /* 1. MPIX_Comm_get_failed alone */
    double t0 = MPI_Wtime();
    int nf = 0, view = 0;
    while (nf == 0 && MPI_Wtime() - t0 < 5) {
        MPI_Group g;
        if (MPIX_Comm_get_failed(comm, &g) != MPI_SUCCESS)
            break;
        MPI_Group_size(g, &nf);
        MPI_Group_free(&g);
        if (nf == 0)
            usleep(1000);
    }
    MPIX_Steadfast_failed(&view, NULL, 0);
    if (nf == 0) {
        printf("rank %d: FAIL MPIX_Comm_get_failed lists no failure after %.1f s "
               "(MPIX_Steadfast_failed: %d failed)\n", rank, MPI_Wtime() - t0, view);
        bad = 1;
    }

    /* 2. MPI_Test on a receive from the dead rank */
    MPI_Request req;
    int flag = 0, rc = MPI_SUCCESS;
    MPI_Irecv(&x, 1, MPI_INT, victim, 0, comm, &req);
    t0 = MPI_Wtime();
    while (!flag && MPI_Wtime() - t0 < 5) {
        rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            break;
        if (!flag)
            usleep(1000);
    }
    if (rc == MPI_SUCCESS) {
        printf("rank %d: FAIL MPI_Test of a receive from dead rank %d: flag %d, no error after %.1f s\n",
               rank, victim, flag, MPI_Wtime() - t0);
        bad = 1;
    }
    if (!bad)
        printf("rank %d: ok\n", rank);
    fflush(stdout);
    MPI_Finalize();
    return bad;
}
