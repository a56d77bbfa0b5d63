/* ranks: 2
 * expect: fail
 * MPI_ERRORS_ABORT on a communicator: an invalid call on rank 1 takes the job down (the
 * others wait in a receive that never completes) and stderr names rank 1. */
#include "check.h"

int main(int argc, char **argv)
{
    int rank, x = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_ABORT);
    if (rank == 1)
        MPI_Send(&x, 1, MPI_INT, 99, 0, c);
    else
        MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("rank %d: still running after an error with MPI_ERRORS_ABORT\n", rank);
    MPI_Finalize();
    return 0;
}
