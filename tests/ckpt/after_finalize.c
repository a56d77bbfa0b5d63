/* A rank that is killed after MPI_Finalize: its communication is over and the others may
 * have ended, so message logging must not start it again (tests/ckpt/logging.sh). Each rank
 * says when it is past MPI_Finalize, then lingers so that it can be killed there. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, sum = 0, one = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    printf("rank %d past MPI_Finalize, sum %d\n", rank, sum);
    fflush(stdout);
    sleep(rank == 1 ? 30 : 0);
    return 0;
}
