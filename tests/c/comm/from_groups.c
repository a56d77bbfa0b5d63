/* ranks: 2 4 */
/* MPI_Comm_create_from_group and MPI_Intercomm_create_from_groups over groups of
 * MPI_COMM_WORLD: the even and odd ranks form two communicators and an intercommunicator. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, errs = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    MPI_Group world, evens, odds;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int range_e[1][3] = {{0, size - 1, 2}}, range_o[1][3] = {{1, size - 1, 2}};
    MPI_Group_range_incl(world, 1, range_e, &evens);
    MPI_Group_range_incl(world, 1, range_o, &odds);
    MPI_Group mine = rank % 2 ? odds : evens, other = rank % 2 ? evens : odds;

    MPI_Comm half;
    if (MPI_Comm_create_from_group(mine, "org.steadfast.test.half", MPI_INFO_NULL,
                                   MPI_ERRORS_RETURN, &half) != MPI_SUCCESS) {
        printf("Comm_create_from_group failed\n");
        errs++;
    } else {
        int hsize, sum = 0, one = 1;
        MPI_Comm_size(half, &hsize);
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, half);
        if (sum != hsize || hsize != (rank % 2 ? size / 2 : (size + 1) / 2)) {
            printf("[%d] half communicator: size %d sum %d\n", rank, hsize, sum);
            errs++;
        }
        MPI_Errhandler eh;
        MPI_Comm_get_errhandler(half, &eh);
        if (eh != MPI_ERRORS_RETURN) {
            printf("[%d] error handler not installed\n", rank);
            errs++;
        }
        MPI_Errhandler_free(&eh);
        MPI_Comm_free(&half);
    }

    MPI_Comm inter;
    if (MPI_Intercomm_create_from_groups(mine, 0, other, 0, "org.steadfast.test.inter",
                                         MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &inter) != MPI_SUCCESS) {
        printf("Intercomm_create_from_groups failed\n");
        errs++;
    } else {
        int flag, rsize, peer = -1;
        MPI_Comm_test_inter(inter, &flag);
        MPI_Comm_remote_size(inter, &rsize);
        if (!flag || rsize != (rank % 2 ? (size + 1) / 2 : size / 2)) {
            printf("[%d] intercommunicator: inter %d remote size %d\n", rank, flag, rsize);
            errs++;
        }
        /* Rank 0 of each side swaps world ranks over the intercommunicator. */
        int lrank;
        MPI_Comm_rank(inter, &lrank);
        if (lrank == 0)
            MPI_Sendrecv(&rank, 1, MPI_INT, 0, 7, &peer, 1, MPI_INT, 0, 7, inter, MPI_STATUS_IGNORE);
        if (lrank == 0 && peer != (rank % 2 ? 0 : 1)) {
            printf("[%d] leader exchange got %d\n", rank, peer);
            errs++;
        }
        MPI_Comm_free(&inter);
    }

    MPI_Group_free(&evens);
    MPI_Group_free(&odds);
    MPI_Group_free(&world);
    int all = 0;
    MPI_Allreduce(&errs, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && all == 0)
        printf(" No Errors\n");
    MPI_Finalize();
    return all != 0;
}
