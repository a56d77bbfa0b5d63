/* ranks: 1 2 4
 * With MPI_ERRORS_RETURN, bad collective arguments return the right error class and leave
 * the communicator usable: MPI_ERR_ROOT, MPI_ERR_COUNT, MPI_ERR_TYPE, MPI_ERR_OP (null op,
 * op not defined for the type, freeing a predefined op), MPI_ERR_BUFFER (aliased buffers,
 * MPI_IN_PLACE where not allowed, NULL data), MPI_ERR_COMM, MPI_ERR_ARG (NULL request).
 * Every rank makes the same mistakes, so no rank waits for another; except one broadcast whose
 * non-roots pass a smaller count than the root: no rank may hang.
 */
#include "ct.h"

static void expect(int rc, int cls, const char *what)
{
    int c = -1;
    if (rc == MPI_SUCCESS) {
        CT_ERR("%s: succeeded, expected class %d", what, cls);
        return;
    }
    MPI_Error_class(rc, &c);
    char s[MPI_MAX_ERROR_STRING];
    int l = 0;
    MPI_Error_string(rc, s, &l);
    CT_CHECK(c == cls, "%s: class %d, expected %d (%s)", what, c, cls, s);
    CT_CHECK(l > 0, "%s: empty error string", what);
}

int main(int argc, char **argv)
{
    ct_init(&argc, &argv, "errors");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int a[4] = {1, 2, 3, 4}, b[4], n = ct_size;
    MPI_Request rq;
    expect(MPI_Bcast(a, 1, MPI_INT, n, MPI_COMM_WORLD), MPI_ERR_ROOT, "Bcast root = size");
    expect(MPI_Bcast(a, 1, MPI_INT, -1, MPI_COMM_WORLD), MPI_ERR_ROOT, "Bcast root = -1");
    expect(MPI_Reduce(a, b, 1, MPI_INT, MPI_SUM, n + 3, MPI_COMM_WORLD), MPI_ERR_ROOT, "Reduce bad root");
    expect(MPI_Gather(a, 1, MPI_INT, b, 1, MPI_INT, n, MPI_COMM_WORLD), MPI_ERR_ROOT, "Gather bad root");
    expect(MPI_Ibcast(a, 1, MPI_INT, -7, MPI_COMM_WORLD, &rq), MPI_ERR_ROOT, "Ibcast bad root");
    expect(MPI_Bcast(a, -1, MPI_INT, 0, MPI_COMM_WORLD), MPI_ERR_COUNT, "Bcast count -1");
    expect(MPI_Allreduce(a, b, -2, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_COUNT, "Allreduce count -2");
    expect(MPI_Allgather(a, -1, MPI_INT, b, 1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_COUNT, "Allgather count -1");
    expect(MPI_Bcast(a, 1, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD), MPI_ERR_TYPE, "Bcast null type");
    expect(MPI_Allreduce(a, b, 1, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_TYPE, "Allreduce null type");
    expect(MPI_Allreduce(a, b, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD), MPI_ERR_OP, "Allreduce MPI_OP_NULL");
    float f[2] = {1, 2}, g[2];
    expect(MPI_Allreduce(f, g, 2, MPI_FLOAT, MPI_BAND, MPI_COMM_WORLD), MPI_ERR_OP, "BAND on MPI_FLOAT");
    expect(MPI_Allreduce(a, b, 1, MPI_INT, MPI_MAXLOC, MPI_COMM_WORLD), MPI_ERR_OP, "MAXLOC on MPI_INT");
    expect(MPI_Reduce_local(f, g, 2, MPI_FLOAT, MPI_BXOR), MPI_ERR_OP, "Reduce_local BXOR on float");
    expect(MPI_Iallreduce(a, b, 1, MPI_C_DOUBLE_COMPLEX, MPI_MAX, MPI_COMM_WORLD, &rq), MPI_ERR_OP,
           "MAX on complex");
    expect(MPI_Allreduce(a, b, 1, MPI_PACKED, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_OP, "SUM on MPI_PACKED");
    MPI_Op sum = MPI_SUM;
    expect(MPI_Op_free(&sum), MPI_ERR_OP, "Op_free(MPI_SUM)");
    expect(MPI_Allreduce(a, a, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_BUFFER, "Allreduce aliased");
    expect(MPI_Allgather(a, 1, MPI_INT, a, 1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_BUFFER, "Allgather aliased");
    expect(MPI_Alltoall(a, 1, MPI_INT, a, 1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_BUFFER, "Alltoall aliased");
    expect(MPI_Scan(a, a, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_BUFFER, "Scan aliased");
    expect(MPI_Allreduce(NULL, b, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_BUFFER, "Allreduce NULL sendbuf");
    expect(MPI_Bcast(NULL, 3, MPI_INT, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER, "Bcast NULL buffer");
    expect(MPI_Reduce_local(a, a, 1, MPI_INT, MPI_SUM), MPI_ERR_BUFFER, "Reduce_local aliased");
    /* MPI_IN_PLACE at a non-root is erroneous; the root fails its own check (a negative
     * count) so nobody waits */
    if (ct_rank == 0)
        expect(MPI_Gather(a, -1, MPI_INT, b, 1, MPI_INT, 0, MPI_COMM_WORLD), MPI_ERR_COUNT, "Gather count -1 at root");
    else
        expect(MPI_Gather(MPI_IN_PLACE, 1, MPI_INT, b, 1, MPI_INT, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER,
               "Gather MPI_IN_PLACE at a non-root");
    if (ct_rank == 0)
        expect(MPI_Reduce(a, b, -1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD), MPI_ERR_COUNT, "Reduce count -1");
    else
        expect(MPI_Reduce(MPI_IN_PLACE, b, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER,
               "Reduce MPI_IN_PLACE at a non-root");
    expect(MPI_Bcast(a, 1, MPI_INT, 0, MPI_COMM_NULL), MPI_ERR_COMM, "Bcast MPI_COMM_NULL");
    expect(MPI_Ibarrier(MPI_COMM_WORLD, NULL), MPI_ERR_ARG, "Ibarrier NULL request");
    expect(MPI_Op_create(NULL, 1, &sum), MPI_ERR_ARG, "Op_create NULL function");
    /* A broadcast whose non-roots pass a smaller count than the root (erroneous; MPICH's
     * errors/coll/bcastlength): no rank hangs, the root's children report MPI_ERR_TRUNCATE
     * (a rank passes on what it holds before it returns the error; its subtree waited
     * forever before), and all still agree afterwards. */
    if (n > 1) {
        int rc = MPI_Bcast(a, ct_rank == 0 ? 4 : 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (ct_rank == 1)
            expect(rc, MPI_ERR_TRUNCATE, "Bcast of 4 ints into 1 at the root's first child");
        CT_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    /* still usable */
    a[0] = ct_rank;
    CT_MPI(MPI_Allreduce(a, b, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CT_CHECK(b[0] == n * (n - 1) / 2, "Allreduce after errors = %d", b[0]);
    return ct_finish();
}
