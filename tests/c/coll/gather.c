/* ranks: 1 2 3 4 5 7 8
 * timeout: 120
 * Gather, Gatherv, Scatter, Scatterv, Allgather, Allgatherv: every root, counts 0, 1, 3 and
 * 20000 ints (ring allgather), MPI_IN_PLACE, the nonblocking and persistent forms, and
 * _c forms with MPI_Count counts and MPI_Aint displacements.
 */
#include "ct.h"

#define MAXC 20000

static int *sbuf, *rbuf;

static void gather_tests(int n, int root, int variant)
{
    int size = ct_size, me = ct_rank;
    MPI_Request rq;
    for (int in_place = 0; in_place < 2; in_place++) {
        for (int i = 0; i < n; i++)
            sbuf[i] = ct_val(me, i);
        for (long i = 0; i < (long)n * size + 1; i++)
            rbuf[i] = -1;
        if (in_place && me == root)
            for (int i = 0; i < n; i++)
                rbuf[(long)root * n + i] = ct_val(me, i);
        const void *sb = in_place && me == root ? MPI_IN_PLACE : sbuf;
        switch (variant) {
        case 0: CT_MPI(MPI_Gather(sb, n, MPI_INT, rbuf, n, MPI_INT, root, MPI_COMM_WORLD)); break;
        case 1: CT_MPI(MPI_Igather(sb, n, MPI_INT, rbuf, n, MPI_INT, root, MPI_COMM_WORLD, &rq));
                CT_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE)); break;
        case 2: CT_MPI(MPI_Gather_c(sb, n, MPI_INT, rbuf, n, MPI_INT, root, MPI_COMM_WORLD)); break;
        default: {
            int counts[8], displs[8];
            for (int r = 0; r < size; r++) { counts[r] = n; displs[r] = r * n; }
            CT_MPI(MPI_Gatherv(sb, n, MPI_INT, rbuf, counts, displs, MPI_INT, root, MPI_COMM_WORLD));
        }
        }
        if (me == root) {
            for (int r = 0; r < size; r++)
                for (int i = 0; i < n; i++)
                    if (rbuf[(long)r * n + i] != ct_val(r, i)) {
                        CT_ERR("gather variant %d n %d root %d in_place %d: block %d [%d] = %d", variant, n,
                               root, in_place, r, i, rbuf[(long)r * n + i]);
                        return;
                    }
            CT_CHECK(rbuf[(long)n * size] == -1, "gather wrote past the end");
        }
    }
}

static void scatter_tests(int n, int root, int variant)
{
    int size = ct_size, me = ct_rank;
    MPI_Request rq;
    for (int in_place = 0; in_place < 2; in_place++) {
        for (long i = 0; i < (long)n * size; i++)
            sbuf[i] = me == root ? ct_val((int)(i / (n ? n : 1)), i % (n ? n : 1)) : -2;
        for (int i = 0; i <= n; i++)
            rbuf[i] = -1;
        void *rb = in_place && me == root ? MPI_IN_PLACE : rbuf;
        switch (variant) {
        case 0: CT_MPI(MPI_Scatter(sbuf, n, MPI_INT, rb, n, MPI_INT, root, MPI_COMM_WORLD)); break;
        case 1: CT_MPI(MPI_Iscatter(sbuf, n, MPI_INT, rb, n, MPI_INT, root, MPI_COMM_WORLD, &rq));
                CT_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE)); break;
        case 2: {
            MPI_Count counts[8]; MPI_Aint displs[8];
            for (int r = 0; r < size; r++) { counts[r] = n; displs[r] = (MPI_Aint)r * n; }
            CT_MPI(MPI_Scatterv_c(sbuf, counts, displs, MPI_INT, rb, n, MPI_INT, root, MPI_COMM_WORLD));
            break;
        }
        default: {
            int counts[8], displs[8];
            for (int r = 0; r < size; r++) { counts[r] = n; displs[r] = r * n; }
            CT_MPI(MPI_Scatterv(sbuf, counts, displs, MPI_INT, rb, n, MPI_INT, root, MPI_COMM_WORLD));
        }
        }
        if (!(in_place && me == root)) {
            for (int i = 0; i < n; i++)
                if (rbuf[i] != ct_val(me, i)) {
                    CT_ERR("scatter variant %d n %d root %d: [%d] = %d", variant, n, root, i, rbuf[i]);
                    return;
                }
            CT_CHECK(rbuf[n] == -1, "scatter wrote past the end");
        }
    }
}

static void allgather_tests(int n, int variant)
{
    int size = ct_size, me = ct_rank;
    for (int in_place = 0; in_place < 2; in_place++) {
        for (int i = 0; i < n; i++)
            sbuf[i] = ct_val(me, i);
        for (long i = 0; i < (long)n * size + 1; i++)
            rbuf[i] = -1;
        if (in_place)
            for (int i = 0; i < n; i++)
                rbuf[(long)me * n + i] = ct_val(me, i);
        const void *sb = in_place ? MPI_IN_PLACE : sbuf;
        MPI_Request rq;
        switch (variant) {
        case 0: CT_MPI(MPI_Allgather(sb, n, MPI_INT, rbuf, n, MPI_INT, MPI_COMM_WORLD)); break;
        case 1: CT_MPI(MPI_Iallgather(sb, n, MPI_INT, rbuf, n, MPI_INT, MPI_COMM_WORLD, &rq));
                CT_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE)); break;
        case 2: CT_MPI(MPI_Allgather_init(sb, n, MPI_INT, rbuf, n, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &rq));
                CT_MPI(MPI_Start(&rq));
                CT_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
                CT_MPI(MPI_Request_free(&rq)); break;
        default: {
            int counts[8], displs[8];
            for (int r = 0; r < size; r++) { counts[r] = n; displs[r] = r * n; }
            CT_MPI(MPI_Allgatherv(sb, n, MPI_INT, rbuf, counts, displs, MPI_INT, MPI_COMM_WORLD));
        }
        }
        for (int r = 0; r < size; r++)
            for (int i = 0; i < n; i++)
                if (rbuf[(long)r * n + i] != ct_val(r, i)) {
                    CT_ERR("allgather variant %d n %d in_place %d: block %d [%d] = %d", variant, n, in_place,
                           r, i, rbuf[(long)r * n + i]);
                    return;
                }
        CT_CHECK(rbuf[(long)n * size] == -1, "allgather wrote past the end");
    }
}

/* Uneven v-forms: rank r contributes r % 3 + (r == 1 ? 5 : 0) ints at a gap of 2. */
static void v_tests(void)
{
    int size = ct_size, me = ct_rank, counts[8] = {0}, displs[8] = {0}, total = 0;
    for (int r = 0; r < size; r++) {
        counts[r] = r % 3 + (r == 1 ? 5 : 0);
        displs[r] = total + 2 * r;
        total += counts[r];
    }
    int span = total + 2 * size;
    for (int root = 0; root < size; root++) {
        for (int i = 0; i < counts[me]; i++)
            sbuf[i] = ct_val(me, i);
        for (int i = 0; i < span; i++)
            rbuf[i] = -1;
        MPI_Request rq;
        CT_MPI(MPI_Igatherv(sbuf, counts[me], MPI_INT, rbuf, counts, displs, MPI_INT, root, MPI_COMM_WORLD, &rq));
        CT_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        if (me == root)
            for (int r = 0; r < size; r++) {
                for (int i = 0; i < counts[r]; i++)
                    CT_CHECK(rbuf[displs[r] + i] == ct_val(r, i), "Igatherv root %d block %d [%d]", root, r, i);
                CT_CHECK(rbuf[displs[r] + counts[r]] == -1, "Igatherv wrote into a gap");
            }
        /* and back out with Scatterv */
        for (int i = 0; i < 10; i++)
            sbuf[i] = -1;
        CT_MPI(MPI_Scatterv(rbuf, counts, displs, MPI_INT, sbuf, counts[me], MPI_INT, root, MPI_COMM_WORLD));
        for (int i = 0; i < counts[me]; i++)
            CT_CHECK(sbuf[i] == ct_val(me, i), "Scatterv root %d [%d] = %d", root, i, sbuf[i]);
    }
    for (int in_place = 0; in_place < 2; in_place++) {
        for (int i = 0; i < span; i++)
            rbuf[i] = -1;
        for (int i = 0; i < counts[me]; i++) {
            sbuf[i] = ct_val(me, i);
            if (in_place)
                rbuf[displs[me] + i] = ct_val(me, i);
        }
        MPI_Count cc[8];
        MPI_Aint dd[8];
        for (int r = 0; r < size; r++) { cc[r] = counts[r]; dd[r] = displs[r]; }
        CT_MPI(MPI_Allgatherv_c(in_place ? MPI_IN_PLACE : sbuf, counts[me], MPI_INT, rbuf, cc, dd, MPI_INT,
                                MPI_COMM_WORLD));
        for (int r = 0; r < size; r++)
            for (int i = 0; i < counts[r]; i++)
                CT_CHECK(rbuf[displs[r] + i] == ct_val(r, i), "Allgatherv_c in_place %d block %d [%d]", in_place, r, i);
    }
}

int main(int argc, char **argv)
{
    ct_init(&argc, &argv, "gather");
    sbuf = malloc(sizeof(int) * (MAXC * 8 + 1));
    rbuf = malloc(sizeof(int) * (MAXC * 8 + 1));
    static const int ns[] = {0, 1, 3, MAXC};
    for (int k = 0; k < 4; k++) {
        for (int v = 0; v < 4; v++) {
            for (int root = 0; root < ct_size; root++) {
                gather_tests(ns[k], root, v);
                scatter_tests(ns[k], root, v);
            }
            allgather_tests(ns[k], v);
        }
    }
    v_tests();
    free(sbuf);
    free(rbuf);
    return ct_finish();
}
