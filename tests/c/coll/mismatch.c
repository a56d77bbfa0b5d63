/* ranks: 2 3 4 8 24
 * Collectives whose ranks disagree on the amount of data (erroneous programs, MPICH's
 * errors/coll length tests): no rank hangs, every rank the standard's wording lets notice
 * it reports an error (MPI_ERR_TRUNCATE where it got more than its count, MPI_ERR_COUNT
 * where it got less or its own send and receive sizes differ), and the communicator works
 * afterwards. Over shared memory the small calls use the slot exchange (sizes compared in the
 * slots), over tcp the message algorithms (short and long messages noticed, and the ranks
 * downstream told by an empty message).
 */
#include "ct.h"

static int failed(int rc, const char *what)
{
    if (rc == MPI_SUCCESS)
        return 0;
    int c = -1;
    MPI_Error_class(rc, &c);
    CT_CHECK(c == MPI_ERR_TRUNCATE || c == MPI_ERR_COUNT, "%s: class %d, expected MPI_ERR_TRUNCATE or MPI_ERR_COUNT",
             what, c);
    return 1;
}

static void must_fail(int rc, const char *what)
{
    CT_CHECK(failed(rc, what), "%s: rank %d did not notice the mismatch", what, ct_rank);
}

/* The communicator still computes right. */
static void still_works(const char *after)
{
    int one = ct_rank + 1, sum = 0;
    CT_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CT_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CT_CHECK(sum == ct_size * (ct_size + 1) / 2, "after %s: Allreduce gave %d", after, sum);
}

int main(int argc, char **argv)
{
    ct_init(&argc, &argv, "mismatch");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int n = ct_size, r = ct_rank;
    int *a = calloc(16 * (size_t)n, sizeof(int)), *b = calloc(16 * (size_t)n, sizeof(int));
    MPI_Request rq;

    /* Broadcast: the root sends 1, the others expect 10 (short), then the reverse (long). */
    int rc = MPI_Bcast(a, r == 0 ? 1 : 10, MPI_INT, 0, MPI_COMM_WORLD);
    if (r != 0)
        must_fail(rc, "Bcast short");
    still_works("Bcast short");
    rc = MPI_Bcast(a, r == 0 ? 10 : 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (r != 0)
        must_fail(rc, "Bcast long");
    still_works("Bcast long");
    rc = MPI_Ibcast(a, r == 0 ? 1 : 10, MPI_INT, 0, MPI_COMM_WORLD, &rq);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&rq, MPI_STATUS_IGNORE);
    if (r != 0)
        must_fail(rc, "Ibcast short");
    still_works("Ibcast short");

    /* Allreduce: rank 0 reduces 1 element, the others 10; then the reverse. */
    rc = MPI_Allreduce(a, b, r == 0 ? 1 : 10, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (r != 0)
        must_fail(rc, "Allreduce, rank 0 short");
    still_works("Allreduce short");
    rc = MPI_Allreduce(a, b, r == 0 ? 10 : 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (r != 0)
        must_fail(rc, "Allreduce, rank 0 long");
    still_works("Allreduce long");
    rc = MPI_Iallreduce(a, b, r == 0 ? 1 : 10, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&rq, MPI_STATUS_IGNORE);
    if (r != 0)
        must_fail(rc, "Iallreduce, rank 0 short");
    still_works("Iallreduce");

    /* Reduce: the root expects 10, the others send 1. */
    rc = MPI_Reduce(a, b, r == 0 ? 10 : 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (r == 0)
        must_fail(rc, "Reduce, root long");
    still_works("Reduce");

    /* Scatter: the root sends blocks of 1, the others expect 10. */
    rc = MPI_Scatter(a, 1, MPI_INT, b, r == 0 ? 1 : 10, MPI_INT, 0, MPI_COMM_WORLD);
    if (r != 0)
        must_fail(rc, "Scatter short");
    still_works("Scatter");

    /* Allgather, Alltoall: rank 0's send and receive blocks differ (its own arguments are
     * wrong); the others are consistent among themselves. */
    rc = MPI_Allgather(a, r == 0 ? 1 : 10, MPI_INT, b, 10, MPI_INT, MPI_COMM_WORLD);
    if (r == 0)
        must_fail(rc, "Allgather, rank 0 sends less than a block");
    else
        must_fail(rc, "Allgather, rank 0's block short");
    still_works("Allgather");
    rc = MPI_Iallgather(a, r == 0 ? 1 : 10, MPI_INT, b, 10, MPI_INT, MPI_COMM_WORLD, &rq);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&rq, MPI_STATUS_IGNORE);
    if (r == 0)
        must_fail(rc, "Iallgather, rank 0 sends less than a block");
    still_works("Iallgather");
    rc = MPI_Alltoall(a, r == 0 ? 2 : 1, MPI_INT, b, 1, MPI_INT, MPI_COMM_WORLD);
    if (r == 0)
        must_fail(rc, "Alltoall, rank 0 sends more than a block");
    still_works("Alltoall");

    /* A send block inside the receive buffer is an alias (MPI_IN_PLACE is the way). */
    int *x = calloc((size_t)n, sizeof(int));
    rc = MPI_Allgather(&x[r], 1, MPI_INT, x, 1, MPI_INT, MPI_COMM_WORLD);
    int c = -1;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &c);
    CT_CHECK(c == MPI_ERR_BUFFER, "Allgather, send block inside the receive buffer: class %d", c);
    still_works("Allgather overlap");

    /* The consistent calls still give the right answers. */
    for (int i = 0; i < 10; i++)
        a[i] = r + i;
    CT_MPI(MPI_Allreduce(a, b, 10, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i < 10; i++)
        CT_CHECK(b[i] == n * (n - 1) / 2 + n * i, "Allreduce[%d] = %d", i, b[i]);
    CT_MPI(MPI_Bcast(a, 10, MPI_INT, n - 1, MPI_COMM_WORLD));
    CT_CHECK(a[9] == n - 1 + 9, "Bcast gave %d", a[9]);
    free(a);
    free(b);
    free(x);
    return ct_finish();
}
