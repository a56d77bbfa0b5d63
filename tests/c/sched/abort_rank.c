/* abort_rank: rank 1 calls MPI_Abort(MPI_COMM_WORLD, 7) while the others block in a receive
 * from it. The process manager (srun, mpiexec.hydra, steadfast run) must end the whole job
 * with a non-zero status within seconds. Run by scripts/slurm-tests.sh and run-tests.sh.
 * ranks: 2 3
 * expect: fail
 * timeout: 20
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, v = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        fprintf(stderr, "abort_rank: needs at least 2 ranks\n");
        return 2;
    }
    if (rank == 1)
        MPI_Abort(MPI_COMM_WORLD, 7);
    MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("rank %d: receive from the aborted rank completed\n", rank);
    MPI_Finalize();
    return 0;
}
