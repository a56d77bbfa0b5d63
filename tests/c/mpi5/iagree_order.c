/* ranks: 2 3 4
 * A nonblocking agreement started by one rank while the others are still in an MPI_Barrier
 * that the starting rank enters only after it (mpi4py's TestULFMWorld.testIAgree): the
 * request must not complete before every member contributed, the flag must not change before
 * completion, the result is the AND of all flags, and the barriers around it still match.
 * Run twice: with MPIX_Comm_iagree, and with MPI_Iallreduce(MPI_BAND), which is what mpi4py
 * calls for Comm.Iagree when it does not know the library's ULFM extension (so blocking and
 * nonblocking collectives started in different orders on different ranks must each find
 * their own messages). Each rank in turn is the early one, on a duplicate of a freed one. */
#include <mpi-ext.h>
#include "../tc.h"

static void start(int mode, MPI_Comm comm, int *in, int *flag, MPI_Request *req)
{
    if (mode == 0) {
        TC_MPI(MPIX_Comm_iagree(comm, flag, req));
    } else {
        *in = *flag;
        TC_MPI(MPI_Iallreduce(in, flag, 1, MPI_INT, MPI_BAND, comm, req));
    }
}

static void rounds(int mode)
{
    const char *what = mode == 0 ? "MPIX_Comm_iagree" : "MPI_Iallreduce";
    MPI_Comm comm;
    TC_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    for (int i = 0; i < 5; i++) {
        int f = i, in;
        MPI_Request r;
        start(mode, comm, &in, &f, &r);
        TC_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        TC_CHECK(f == i, "%s %d gave %d", what, i, f);
    }
    for (int round = 0; round < 2; round++) {
        for (int root = 0; root < tc_size; root++) {
            int flag, in, done = 0;
            MPI_Request req = MPI_REQUEST_NULL;
            TC_MPI(MPI_Barrier(comm));
            if (tc_rank == root) {
                flag = 0xB; /* 1011 */
                start(mode, comm, &in, &flag, &req);
                TC_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
                TC_CHECK(!done, "%s root %d: complete before the others started", what, root);
                TC_CHECK(done || flag == 0xB, "%s root %d: flag changed to %#x before completion", what, root, flag);
                TC_MPI(MPI_Barrier(comm));
            } else {
                flag = 0xD; /* 1101 */
                TC_MPI(MPI_Barrier(comm));
                start(mode, comm, &in, &flag, &req);
            }
            if (!done)
                TC_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
            TC_CHECK(flag == 0x9, "%s round %d root %d: agreed %#x, want 0x9", what, round, root, flag);
        }
    }
    TC_MPI(MPI_Comm_free(&comm));
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "iagree_order");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rounds(0);
    rounds(1);
    /* Blocking agree still works afterwards, and a plain collective matches. */
    int f = tc_rank == 0 ? 0x3 : 0x7;
    TC_MPI(MPIX_Comm_agree(MPI_COMM_WORLD, &f));
    TC_CHECK(f == 0x3, "agree after the rounds: %#x", f);
    int sum = 0, one = 1;
    TC_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    TC_CHECK(sum == tc_size, "allreduce %d", sum);
    return tc_finalize();
}
