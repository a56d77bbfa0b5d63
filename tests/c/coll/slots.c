/* ranks: 2 3 4 5 8 24
 * timeout: 180
 * The slot exchange (small Barrier, Allreduce, Allgather, Alltoall, Reduce_scatter of ranks
 * sharing memory) under damage: every rank sets STEADFAST_COLL_SLOT_FAULTS=corrupt=0.03
 * before MPI_Init, so about one write in 30 is damaged after its CRC and must be detected
 * and rewritten, never used. Many calls in a row (both slots of every rank reused again and
 * again), on MPI_COMM_WORLD and on split communicators in between, in place and not,
 * non-contiguous receive blocks, a non-commutative user operation (composition of affine
 * maps, whose result depends on the rank order), and contributions on both sides of the
 * 32 KiB above which a writer holds its buffer instead of copying it for repairs.
 * slots_mt.c runs the same in MPI_THREAD_MULTIPLE.
 */
#include "ct.h"

typedef struct {
    unsigned a, b;
} affine;

/* inout = in then inout: x -> inout.a * (in.a * x + in.b) + inout.b (mod 2^32). */
static void compose(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    affine *u = in, *v = inout;
    for (int i = 0; i < *len; i++) {
        affine r = {v[i].a * u[i].a, v[i].a * u[i].b + v[i].b};
        v[i] = r;
    }
}

static affine map_of(int rank, int i, int it)
{
    affine m = {2u * (unsigned)(rank * 7 + i + it) + 1u, (unsigned)(rank * 31 + i * 3 + it)};
    return m;
}

static void round_on(MPI_Comm comm, int it, MPI_Op op, MPI_Datatype aff)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int count = 1 + (it * 37) % 700; /* up to 5.6 KiB of doubles */
    double *s = malloc(sizeof(double) * 1000 * (size_t)n);
    double *r = malloc(sizeof(double) * 1000 * (size_t)n);
    int *ri = malloc(sizeof(int) * (2000 + 4 * (size_t)n * (size_t)n));
    if (!s || !r || !ri)
        MPI_Abort(MPI_COMM_WORLD, 2);

    MPI_Barrier(comm);

    /* Allreduce, sum of integers held in doubles: exact. */
    for (int i = 0; i < count; i++)
        s[i] = me * 1000.0 + i + it;
    MPI_Allreduce(s, r, count, MPI_DOUBLE, MPI_SUM, comm);
    for (int i = 0; i < count; i++)
        if (r[i] != 1000.0 * n * (n - 1) / 2 + (double)n * (i + it)) {
            CT_ERR("it %d allreduce n=%d count=%d: r[%d]=%g", it, n, count, i, r[i]);
            break;
        }

    /* Allreduce in place with the non-commutative composition. */
    int acount = 1 + (it * 13) % 300;
    affine *m = malloc(sizeof(affine) * (size_t)acount);
    for (int i = 0; i < acount; i++)
        m[i] = map_of(me, i, it);
    MPI_Allreduce(MPI_IN_PLACE, m, acount, aff, op, comm);
    for (int i = 0; i < acount; i++) {
        affine want = map_of(0, i, it);
        for (int q = 1; q < n; q++) {
            affine v = map_of(q, i, it);
            int one = 1;
            compose(&want, &v, &one, NULL);
            want = v;
        }
        if (m[i].a != want.a || m[i].b != want.b) {
            CT_ERR("it %d composition n=%d count=%d: m[%d]=(%u,%u) want (%u,%u)", it, n, acount, i, m[i].a, m[i].b, want.a, want.b);
            break;
        }
    }
    free(m);

    /* Allgather: contiguous, then in place, then into every other int (a vector type). */
    int g = 1 + (it * 11) % (1200 / n);
    for (int i = 0; i < g; i++)
        ri[i] = me * 100000 + i + it;
    int *ga = malloc(sizeof(int) * (size_t)g * (size_t)n);
    MPI_Allgather(ri, g, MPI_INT, ga, g, MPI_INT, comm);
    for (int q = 0; q < n; q++)
        for (int i = 0; i < g; i++)
            if (ga[q * g + i] != q * 100000 + i + it) {
                CT_ERR("it %d allgather n=%d g=%d: from %d [%d]=%d", it, n, g, q, i, ga[q * g + i]);
                q = n;
                break;
            }
    for (int q = 0; q < n; q++)
        for (int i = 0; i < g; i++)
            ga[q * g + i] = q == me ? me * 100000 + i + it + 1 : -1;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ga, g, MPI_INT, comm);
    for (int q = 0; q < n; q++)
        for (int i = 0; i < g; i++)
            if (ga[q * g + i] != q * 100000 + i + it + 1) {
                CT_ERR("it %d allgather in place n=%d g=%d: from %d [%d]=%d", it, n, g, q, i, ga[q * g + i]);
                q = n;
                break;
            }
    MPI_Datatype every_other, block;
    MPI_Type_vector(g, 1, 2, MPI_INT, &every_other);
    MPI_Type_create_resized(every_other, 0, (MPI_Aint)(2 * g * sizeof(int)), &block);
    MPI_Type_commit(&block);
    int *sp = malloc(sizeof(int) * 2 * (size_t)g * (size_t)n);
    for (int i = 0; i < 2 * g * n; i++)
        sp[i] = -7;
    MPI_Allgather(ri, g, MPI_INT, sp, 1, block, comm);
    for (int q = 0; q < n; q++)
        for (int i = 0; i < g; i++)
            if (sp[q * 2 * g + 2 * i] != q * 100000 + i + it || sp[q * 2 * g + 2 * i + 1] != -7) {
                CT_ERR("it %d allgather strided n=%d g=%d: from %d [%d]", it, n, g, q, i);
                q = n;
                break;
            }
    MPI_Type_free(&block);
    MPI_Type_free(&every_other);
    free(sp);
    free(ga);

    /* Alltoall, then in place. */
    int b = 1 + (it * 5) % (1100 / (n * n) + 1);
    int *at = malloc(sizeof(int) * (size_t)b * (size_t)n);
    for (int q = 0; q < n; q++)
        for (int i = 0; i < b; i++)
            ri[q * b + i] = me * 10000 + q * 100 + i + it;
    MPI_Alltoall(ri, b, MPI_INT, at, b, MPI_INT, comm);
    for (int q = 0; q < n; q++)
        for (int i = 0; i < b; i++)
            if (at[q * b + i] != q * 10000 + me * 100 + i + it) {
                CT_ERR("it %d alltoall n=%d b=%d: from %d [%d]=%d", it, n, b, q, i, at[q * b + i]);
                q = n;
                break;
            }
    MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ri, b, MPI_INT, comm);
    for (int q = 0; q < n; q++)
        for (int i = 0; i < b; i++)
            if (ri[q * b + i] != q * 10000 + me * 100 + i + it) {
                CT_ERR("it %d alltoall in place n=%d b=%d: from %d [%d]=%d", it, n, b, q, i, ri[q * b + i]);
                q = n;
                break;
            }
    free(at);

    /* Reduce_scatter_block, and Reduce_scatter with uneven counts (one rank gets none). */
    int rb = 1 + (it * 3) % (500 / n);
    for (int i = 0; i < rb * n; i++)
        s[i] = me + i;
    MPI_Reduce_scatter_block(s, r, rb, MPI_DOUBLE, MPI_SUM, comm);
    for (int i = 0; i < rb; i++)
        if (r[i] != (double)n * (n - 1) / 2 + (double)n * (me * rb + i)) {
            CT_ERR("it %d reduce_scatter_block n=%d rb=%d: r[%d]=%g", it, n, rb, i, r[i]);
            break;
        }
    int *counts = malloc(sizeof(int) * (size_t)n), total = 0, before = 0;
    for (int q = 0; q < n; q++) {
        counts[q] = q == 1 ? 0 : 1 + (q + it) % 40;
        if (q < me)
            before += counts[q];
        total += counts[q];
    }
    for (int i = 0; i < total; i++)
        s[i] = 2.0 * me + i;
    MPI_Reduce_scatter(s, r, counts, MPI_DOUBLE, MPI_SUM, comm);
    for (int i = 0; i < counts[me]; i++)
        if (r[i] != (double)n * (n - 1) + (double)n * (before + i)) {
            CT_ERR("it %d reduce_scatter n=%d: r[%d]=%g", it, n, i, r[i]);
            break;
        }
    free(counts);

    /* Every few rounds a contribution past 32 KiB, which its writer does not copy for
     * repairs: it answers from the application's buffer and stays until all are done. */
    if (it % 7 == 0) {
        int big = 12000 + it;
        int *bs = malloc(sizeof(int) * (size_t)big), *br = malloc(sizeof(int) * (size_t)big * (size_t)n);
        for (int i = 0; i < big; i++)
            bs[i] = me * 7 + i;
        MPI_Allgather(bs, big, MPI_INT, br, big, MPI_INT, comm);
        for (int q = 0; q < n; q++)
            for (int i = 0; i < big; i++)
                if (br[q * big + i] != q * 7 + i) {
                    CT_ERR("it %d large allgather n=%d: from %d [%d]=%d", it, n, q, i, br[q * big + i]);
                    q = n;
                    break;
                }
        free(bs);
        free(br);
    }

    /* Every few rounds an Allreduce too large for every rank to reduce every vector: a
     * Reduce_scatter_block and an in-place Allgather through the slots (96000 doubles split
     * into equal blocks on 3, 4, 5 and 8 ranks). */
    if (it % 20 == 3 && n > 2) {
        int big = 96000;
        double *bs = malloc(sizeof(double) * (size_t)big), *br = malloc(sizeof(double) * (size_t)big);
        for (int i = 0; i < big; i++)
            bs[i] = me + (double)i;
        MPI_Allreduce(bs, br, big, MPI_DOUBLE, MPI_SUM, comm);
        for (int i = 0; i < big; i++)
            if (br[i] != (double)n * (n - 1) / 2 + (double)n * i) {
                CT_ERR("it %d large allreduce n=%d: br[%d]=%g", it, n, i, br[i]);
                break;
            }
        for (int i = 0; i < big; i++)
            br[i] = (i % n == me) ? 1000.0 + i : (double)i;
        MPI_Allreduce(MPI_IN_PLACE, br, big, MPI_DOUBLE, MPI_MAX, comm);
        for (int i = 0; i < big; i++)
            if (br[i] != 1000.0 + i) {
                CT_ERR("it %d large allreduce in place n=%d: br[%d]=%g", it, n, i, br[i]);
                break;
            }
        free(bs);
        free(br);
    }
    free(s);
    free(r);
    free(ri);
}

int main(int argc, char **argv)
{
    setenv("STEADFAST_COLL_SLOT_FAULTS", "corrupt=0.03", 1);
#ifdef SLOTS_MULTIPLE
    /* Under MPI_THREAD_MULTIPLE blocking collectives wait with the library lock released,
     * as requests (slots_mt.c). */
    {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided != MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "MPI_THREAD_MULTIPLE not provided\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
#endif
    ct_init(&argc, &argv, "slots");
    MPI_Op op;
    MPI_Op_create(compose, 0, &op);
    MPI_Datatype aff;
    MPI_Type_contiguous(2, MPI_UNSIGNED, &aff);
    MPI_Type_commit(&aff);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, ct_rank % 2, ct_size - ct_rank, &half);
    for (int it = 0; it < 60; it++) {
        round_on(MPI_COMM_WORLD, it, op, aff);
        int hn;
        MPI_Comm_size(half, &hn);
        if (hn > 1)
            round_on(half, it, op, aff);
        if (it % 20 == 0) {
            /* A communicator used for a few calls and freed while others go on. */
            MPI_Comm d;
            MPI_Comm_dup(MPI_COMM_WORLD, &d);
            round_on(d, it + 1, op, aff);
            MPI_Comm_free(&d);
        }
    }
    MPI_Comm_free(&half);
    MPI_Type_free(&aff);
    MPI_Op_free(&op);
    return ct_finish();
}
