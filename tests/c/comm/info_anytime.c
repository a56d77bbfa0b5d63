/* ranks: 1 2
 * Info calls work before MPI_Init and after MPI_Finalize (MPI 4.0), on the same objects. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int errs = 0, flag = 0, rank = 0, buflen;
    char val[MPI_MAX_INFO_VAL];
    MPI_Info a, b;
    if (MPI_Info_create(&a) != MPI_SUCCESS)
        errs++;
    MPI_Info_set(a, "before", "init");
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    buflen = sizeof val;
    MPI_Info_get_string(a, "before", &buflen, val, &flag);
    if (!flag || strcmp(val, "init") != 0)
        errs++;
    MPI_Info_dup(a, &b);
    MPI_Info_set(b, "during", "run");
    MPI_Finalize();
    buflen = sizeof val;
    MPI_Info_get_string(b, "during", &buflen, val, &flag);
    if (!flag || strcmp(val, "run") != 0)
        errs++;
    if (MPI_Info_delete(b, "missing") != MPI_ERR_INFO_NOKEY)
        errs++;
    MPI_Info_free(&a);
    MPI_Info_free(&b);
    if (a != MPI_INFO_NULL || b != MPI_INFO_NULL)
        errs++;
    if (errs)
        printf("rank %d: %d errors\n", rank, errs);
    else if (rank == 0)
        printf(" No Errors\n");
    return errs != 0;
}
