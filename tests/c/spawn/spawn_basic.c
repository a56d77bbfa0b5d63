/* MPI_Comm_spawn: the parents start 3 children of this same program, exchange data both
 * ways over the intercommunicator (point-to-point, Bcast, Allreduce, Barrier), merge it
 * into one intracommunicator and disconnect. Prints " No Errors" at the parents' rank 0.
 *
 * ranks: 1 2 4
 * timeout: 60
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define NCHILD 3

static int fail(const char *what, int got, int want)
{
    fprintf(stderr, "spawn_basic: %s: got %d, want %d\n", what, got, want);
    return 1;
}

int main(int argc, char **argv)
{
    int errs = 0, rank, size;
    MPI_Comm parent, inter, merged;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_parent(&parent);
    if (parent == MPI_COMM_NULL) {
        int codes[NCHILD], rsize, v, sum, msize, mrank;
        char *cargs[] = {"child", NULL};
        MPI_Comm_spawn(argv[0], cargs, NCHILD, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, codes);
        for (int i = 0; i < NCHILD; i++)
            if (codes[i] != MPI_SUCCESS) errs += fail("errcode", codes[i], MPI_SUCCESS);
        MPI_Comm_remote_size(inter, &rsize);
        if (rsize != NCHILD) errs += fail("remote size", rsize, NCHILD);
        if (rank == 0) {
            for (int c = 0; c < NCHILD; c++) {
                v = 100 + c;
                MPI_Send(&v, 1, MPI_INT, c, 7, inter);
            }
            for (int c = 0; c < NCHILD; c++) {
                MPI_Recv(&v, 1, MPI_INT, c, 8, inter, MPI_STATUS_IGNORE);
                if (v != 2 * (100 + c)) errs += fail("child's answer", v, 2 * (100 + c));
            }
        }
        v = 42;
        MPI_Bcast(&v, 1, MPI_INT, rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter);
        v = rank + 1;
        MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, inter);
        /* children contribute 1000 + their rank */
        if (sum != 3 * 1000 + 0 + 1 + 2) errs += fail("allreduce from the children", sum, 3003);
        MPI_Barrier(inter);
        MPI_Intercomm_merge(inter, 0, &merged);
        MPI_Comm_size(merged, &msize);
        MPI_Comm_rank(merged, &mrank);
        if (msize != size + NCHILD) errs += fail("merged size", msize, size + NCHILD);
        if (mrank != rank) errs += fail("merged rank", mrank, rank);
        v = 1;
        MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, merged);
        if (v != msize) errs += fail("merged allreduce", v, msize);
        MPI_Comm_free(&merged);
        MPI_Comm_disconnect(&inter);
        MPI_Allreduce(MPI_IN_PLACE, &errs, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0 && errs == 0) printf(" No Errors\n");
    } else {
        int v, rsize, psize, sum, msize, mrank;
        if (size != NCHILD) errs += fail("children's world size", size, NCHILD);
        if (argc < 2 || strcmp(argv[1], "child") != 0) errs += fail("argv reached the child", argc, 2);
        MPI_Comm_remote_size(parent, &psize);
        MPI_Recv(&v, 1, MPI_INT, 0, 7, parent, MPI_STATUS_IGNORE);
        if (v != 100 + rank) errs += fail("parent's message", v, 100 + rank);
        v *= 2;
        MPI_Send(&v, 1, MPI_INT, 0, 8, parent);
        MPI_Bcast(&v, 1, MPI_INT, 0, parent);
        if (v != 42) errs += fail("bcast from the parents", v, 42);
        v = 1000 + rank;
        MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, parent);
        if (sum != psize * (psize + 1) / 2) errs += fail("allreduce from the parents", sum, psize * (psize + 1) / 2);
        MPI_Barrier(parent);
        MPI_Intercomm_merge(parent, 1, &merged);
        MPI_Comm_size(merged, &msize);
        MPI_Comm_rank(merged, &mrank);
        if (mrank != psize + rank) errs += fail("merged rank", mrank, psize + rank);
        v = 1;
        MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, merged);
        if (v != msize) errs += fail("merged allreduce", v, msize);
        MPI_Comm_free(&merged);
        (void)rsize;
        MPI_Comm_disconnect(&parent);
        MPI_Comm_get_parent(&parent);
        if (parent != MPI_COMM_NULL) errs += fail("parent after disconnect", 1, 0);
        if (errs) fprintf(stderr, "spawn_basic: child %d: %d errors\n", rank, errs);
    }
    MPI_Finalize();
    return errs != 0;
}
