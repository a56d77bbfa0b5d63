/* bcast_dead: in run-through mode MPI_Bcast is a corrected tree, so every live rank gets the
 * data although a rank of the tree died, without waiting for the failure detector.
 * driver: tests/c/ft/run.sh (needs --ft run-through; not run by run-tests.sh)
 *
 *   mpiexec --ft run-through -n 6 ./bcast_dead
 *
 * 1. 300 broadcasts from rotating roots, sizes 8 B .. 8000 B, checked everywhere.
 * 2. The last rank dies (SIGKILL) after a barrier; at once, 300 more broadcasts from the
 *    survivors must all succeed with the right data.
 * 3. A broadcast from the dead rank must fail with MPIX_ERR_PROC_FAILED, not hang.
 * Each survivor prints "rank R: ok" or "rank R: FAIL ..." and exits 0 or 1. */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static int check(const unsigned char *b, int n, int root, int iter)
{
    for (int i = 0; i < n; i++)
        if (b[i] != (unsigned char)(root * 31 + iter * 7 + i))
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    static unsigned char buf[8000];
    static const int sizes[] = {8, 100, 1000, 8000};
    int rank, size, bad = 0;
    MPI_Comm comm;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int victim = size - 1;

    for (int phase = 1; phase <= 2 && !bad; phase++) {
        if (phase == 2) {
            MPI_Barrier(comm);
            if (rank == victim)
                raise(SIGKILL);
        }
        int live = phase == 1 ? size : size - 1;
        for (int it = 0; it < 300; it++) {
            int root = it % live, n = sizes[it % 4];
            for (int i = 0; i < n; i++)
                buf[i] = rank == root ? (unsigned char)(root * 31 + it * 7 + i) : 0;
            int rc = MPI_Bcast(buf, n, MPI_BYTE, root, comm);
            if (rc != MPI_SUCCESS || !check(buf, n, root, it)) {
                int ec = 0;
                MPI_Error_class(rc, &ec);
                printf("rank %d: FAIL phase %d broadcast %d (root %d, %d B): error class %d, data %s\n",
                       rank, phase, it, root, n, ec, rc == MPI_SUCCESS ? "wrong" : "-");
                bad = 1;
                break;
            }
        }
    }
    if (!bad) {
        int rc = MPI_Bcast(buf, 8, MPI_BYTE, victim, comm), ec = 0;
        MPI_Error_class(rc, &ec);
        if (ec != MPIX_ERR_PROC_FAILED) {
            printf("rank %d: FAIL broadcast from the dead rank returned class %d\n", rank, ec);
            bad = 1;
        }
    }
    if (!bad)
        printf("rank %d: ok\n", rank);
    fflush(stdout);
    MPI_Finalize();
    return bad;
}
