/* ranks: 2
 * Error classes of one-sided calls (MPICH's errors/rma): a put to a rank outside the window
 * is MPI_ERR_RANK even outside an epoch (the rank is checked first), compare-and-swap takes
 * integer, logical and byte types but not floating-point or derived ones (MPI_ERR_TYPE), and
 * MPI_Win_lock inside an MPI_Win_start access epoch is MPI_ERR_RMA_SYNC, with
 * MPI_MODE_NOCHECK too. */
#include "../tc.h"

static int class_of(int rc)
{
    int c = -1;
    MPI_Error_class(rc, &c);
    return c;
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "rma_errors");
    int buf[4] = {0};
    MPI_Win win;
    TC_MPI(MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    TC_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int v = 1, c;

    c = class_of(MPI_Put(&v, 1, MPI_INT, -5, 0, 1, MPI_INT, win));
    TC_CHECK(c == MPI_ERR_RANK, "put to rank -5 outside an epoch: class %d, want MPI_ERR_RANK", c);
    c = class_of(MPI_Put(&v, 1, MPI_INT, tc_size, 0, 1, MPI_INT, win));
    TC_CHECK(c == MPI_ERR_RANK, "put to rank %d outside an epoch: class %d, want MPI_ERR_RANK", tc_size, c);

    TC_MPI(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    long l = 0, lc = 0, lr;
    float f = 0, fc = 0, fr;
    char b = 0, bc = 0, br;
    MPI_Datatype my_int;
    TC_MPI(MPI_Type_contiguous(sizeof(int), MPI_BYTE, &my_int));
    TC_MPI(MPI_Type_commit(&my_int));
    int t = (tc_rank + 1) % tc_size;
    TC_CHECK(MPI_Compare_and_swap(&l, &lc, &lr, MPI_LONG, t, 0, win) == MPI_SUCCESS, "CAS of MPI_LONG failed");
    TC_CHECK(MPI_Compare_and_swap(&b, &bc, &br, MPI_BYTE, t, 0, win) == MPI_SUCCESS, "CAS of MPI_BYTE failed");
    TC_CHECK(MPI_Compare_and_swap(&b, &bc, &br, MPI_C_BOOL, t, 0, win) == MPI_SUCCESS, "CAS of MPI_C_BOOL failed");
    c = class_of(MPI_Compare_and_swap(&f, &fc, &fr, MPI_FLOAT, t, 0, win));
    TC_CHECK(c == MPI_ERR_TYPE, "CAS of MPI_FLOAT: class %d, want MPI_ERR_TYPE", c);
    c = class_of(MPI_Compare_and_swap(&v, &v, &lr, my_int, t, 0, win));
    TC_CHECK(c == MPI_ERR_TYPE, "CAS of a derived type: class %d, want MPI_ERR_TYPE", c);
    TC_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    TC_MPI(MPI_Type_free(&my_int));

    MPI_Group world;
    TC_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    TC_MPI(MPI_Win_post(world, 0, win));
    TC_MPI(MPI_Win_start(world, 0, win));
    c = class_of(MPI_Win_lock(MPI_LOCK_SHARED, 0, MPI_MODE_NOCHECK, win));
    TC_CHECK(c == MPI_ERR_RMA_SYNC, "lock (nocheck) inside a start epoch: class %d, want MPI_ERR_RMA_SYNC", c);
    c = class_of(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win));
    TC_CHECK(c == MPI_ERR_RMA_SYNC, "lock inside a start epoch: class %d, want MPI_ERR_RMA_SYNC", c);
    TC_MPI(MPI_Win_complete(win));
    TC_MPI(MPI_Win_wait(win));
    TC_MPI(MPI_Group_free(&world));
    /* Locks work again after the epoch. */
    TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win));
    TC_MPI(MPI_Put(&v, 1, MPI_INT, t, 0, 1, MPI_INT, win));
    TC_MPI(MPI_Win_unlock(t, win));
    TC_MPI(MPI_Win_free(&win));
    return tc_finalize();
}
