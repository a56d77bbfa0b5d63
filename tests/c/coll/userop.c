/* ranks: 1 2 3 4 5 6 7 8
 * timeout: 120
 * User-defined ops. A non-commutative op (2x2 matrix product) must combine contributions
 * in rank order in Reduce (every root), Allreduce, Reduce_scatter(_block), Scan and Exscan,
 * blocking and nonblocking; a commutative user op, Op_create_c, Op_commutative, Op_free,
 * and Reduce_local with user ops.
 */
#include "ct.h"

typedef struct { long long a, b, c, d; } mat;

static mat mul(mat x, mat y)
{
    mat r = {x.a * y.a + x.b * y.c, x.a * y.b + x.b * y.d, x.c * y.a + x.d * y.c, x.c * y.b + x.d * y.d};
    return r;
}

static int calls;

/* inout = in * inout: the standard's argument order, in is the earlier ranks' part */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    mat *a = in, *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = mul(a[i], b[i]);
    calls++;
}

static void matmul_c(void *in, void *inout, MPI_Count *len, MPI_Datatype *dt)
{
    (void)dt;
    mat *a = in, *b = inout;
    for (MPI_Count i = 0; i < *len; i++)
        b[i] = mul(a[i], b[i]);
}

/* commutative: element-wise max of |x| */
static void absmax(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int *a = in, *b = inout;
    if (*dt != MPI_INT) {
        fprintf(stderr, "absmax: wrong datatype handle\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < *len; i++) {
        int x = a[i] < 0 ? -a[i] : a[i], y = b[i] < 0 ? -b[i] : b[i];
        b[i] = x > y ? x : y;
    }
}

static mat m_of(int rank, int i)
{
    mat m = {rank + 2, 1 + i, 1, (rank * 3 + i) % 5};
    return m;
}

static mat prod(int lo, int hi, int i)
{
    mat m = {1, 0, 0, 1};
    for (int r = lo; r < hi; r++)
        m = mul(m, m_of(r, i));
    return m;
}

static int eq(mat x, mat y)
{
    return x.a == y.a && x.b == y.b && x.c == y.c && x.d == y.d;
}

#define K 5

int main(int argc, char **argv)
{
    ct_init(&argc, &argv, "userop");
    /* A matrix is 32 bytes; a predefined 32-byte type carries it (the op ignores what the
     * type says it holds), so this test needs no derived-type constructors. */
    MPI_Datatype mt = MPI_C_LONG_DOUBLE_COMPLEX;
    _Static_assert(sizeof(mat) == 32, "mat is 32 bytes");
    MPI_Op op, op_c, amax;
    CT_MPI(MPI_Op_create(matmul, 0, &op));
    CT_MPI(MPI_Op_create_c(matmul_c, 0, &op_c));
    CT_MPI(MPI_Op_create(absmax, 1, &amax));
    int commute = -1;
    CT_MPI(MPI_Op_commutative(op, &commute));
    CT_CHECK(commute == 0, "matmul reported commutative");
    CT_MPI(MPI_Op_commutative(amax, &commute));
    CT_CHECK(commute == 1, "absmax reported non-commutative");
    CT_MPI(MPI_Op_commutative(MPI_SUM, &commute));
    CT_CHECK(commute == 1, "MPI_SUM reported non-commutative");

    mat in[K * 8], out[K * 8];
    for (int i = 0; i < K * ct_size; i++)
        in[i] = m_of(ct_rank, i);
    MPI_Op ops[2] = {op, op_c};
    for (int o = 0; o < 2; o++) {
        CT_MPI(MPI_Allreduce(in, out, K, mt, ops[o], MPI_COMM_WORLD));
        for (int i = 0; i < K; i++)
            CT_CHECK(eq(out[i], prod(0, ct_size, i)), "Allreduce element %d out of rank order", i);
        for (int root = 0; root < ct_size; root++) {
            memset(out, 0, sizeof out);
            CT_MPI(MPI_Reduce(in, out, K, mt, ops[o], root, MPI_COMM_WORLD));
            if (ct_rank == root)
                for (int i = 0; i < K; i++)
                    CT_CHECK(eq(out[i], prod(0, ct_size, i)), "Reduce root %d element %d out of order", root, i);
            /* in place at the root */
            if (ct_rank == root) {
                memcpy(out, in, sizeof(mat) * K);
                CT_MPI(MPI_Reduce(MPI_IN_PLACE, out, K, mt, ops[o], root, MPI_COMM_WORLD));
                for (int i = 0; i < K; i++)
                    CT_CHECK(eq(out[i], prod(0, ct_size, i)), "Reduce in place root %d element %d", root, i);
            } else {
                CT_MPI(MPI_Reduce(in, NULL, K, mt, ops[o], root, MPI_COMM_WORLD));
            }
        }
        MPI_Request rq;
        CT_MPI(MPI_Iscan(in, out, K, mt, ops[o], MPI_COMM_WORLD, &rq));
        CT_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        for (int i = 0; i < K; i++)
            CT_CHECK(eq(out[i], prod(0, ct_rank + 1, i)), "Iscan element %d", i);
        memcpy(out, in, sizeof(mat) * K);
        CT_MPI(MPI_Scan(MPI_IN_PLACE, out, K, mt, ops[o], MPI_COMM_WORLD));
        for (int i = 0; i < K; i++)
            CT_CHECK(eq(out[i], prod(0, ct_rank + 1, i)), "Scan in place element %d", i);
        memset(out, 0, sizeof out);
        CT_MPI(MPI_Exscan(in, out, K, mt, ops[o], MPI_COMM_WORLD));
        if (ct_rank > 0)
            for (int i = 0; i < K; i++)
                CT_CHECK(eq(out[i], prod(0, ct_rank, i)), "Exscan element %d", i);
        /* Reduce_scatter_block: rank r gets elements [rK, rK+K) of the product */
        CT_MPI(MPI_Reduce_scatter_block(in, out, K, mt, ops[o], MPI_COMM_WORLD));
        for (int i = 0; i < K; i++)
            CT_CHECK(eq(out[i], prod(0, ct_size, ct_rank * K + i)), "Reduce_scatter_block element %d", i);
        /* Reduce_scatter with uneven counts, in place */
        int counts[8];
        for (int r = 0; r < ct_size; r++)
            counts[r] = (r % 3) + 1;
        int off = 0;
        for (int r = 0; r < ct_rank; r++)
            off += counts[r];
        mat io[K * 8];
        for (int i = 0; i < K * ct_size; i++)
            io[i] = m_of(ct_rank, i);
        CT_MPI(MPI_Reduce_scatter(MPI_IN_PLACE, io, counts, mt, ops[o], MPI_COMM_WORLD));
        for (int i = 0; i < counts[ct_rank]; i++)
            CT_CHECK(eq(io[i], prod(0, ct_size, off + i)), "Reduce_scatter in place element %d", i);
    }
    /* commutative user op */
    int v[K], w[K];
    for (int i = 0; i < K; i++)
        v[i] = (ct_rank % 2 ? -1 : 1) * (ct_rank * 3 + i);
    CT_MPI(MPI_Allreduce(v, w, K, MPI_INT, amax, MPI_COMM_WORLD));
    for (int i = 0; i < K; i++)
        CT_CHECK(w[i] == (ct_size - 1) * 3 + i, "absmax element %d = %d", i, w[i]);
    /* Reduce_local with a user op: inout = in * inout */
    mat a = m_of(1, 0), b = m_of(2, 0);
    calls = 0;
    CT_MPI(MPI_Reduce_local(&a, &b, 1, mt, op));
    CT_CHECK(eq(b, mul(m_of(1, 0), m_of(2, 0))) && calls == 1, "Reduce_local order");
    CT_MPI(MPI_Op_free(&op));
    CT_CHECK(op == MPI_OP_NULL, "Op_free did not reset the handle");
    CT_MPI(MPI_Op_free(&op_c));
    CT_MPI(MPI_Op_free(&amax));
    return ct_finish();
}
