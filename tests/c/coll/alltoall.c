/* ranks: 1 2 3 4 5 8
 * timeout: 120
 * Alltoall (small blocks: Bruck on 8 ranks; medium; 40000-int blocks: pairwise; 70000-int
 * blocks: linear where the host runs more ranks than CPUs, read with a single copy where
 * that is fast there),
 * Alltoallv with uneven counts and gaps, Alltoallw with byte displacements and mixed
 * types, each with MPI_IN_PLACE, nonblocking, persistent and _c forms.
 */
#include "ct.h"

static int *sb, *rb;

static void alltoall(int n, int form)
{
    int size = ct_size, me = ct_rank;
    for (int in_place = 0; in_place < 2; in_place++) {
        for (long i = 0; i < (long)n * size; i++)
            sb[i] = ct_val(me, i);
        for (long i = 0; i < (long)n * size + 1; i++)
            rb[i] = in_place && i < (long)n * size ? sb[i] : -1;
        const void *s = in_place ? MPI_IN_PLACE : sb;
        MPI_Request rq;
        switch (form) {
        case 0: CT_MPI(MPI_Alltoall(s, n, MPI_INT, rb, n, MPI_INT, MPI_COMM_WORLD)); break;
        case 1: CT_MPI(MPI_Ialltoall(s, n, MPI_INT, rb, n, MPI_INT, MPI_COMM_WORLD, &rq));
                CT_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE)); break;
        case 2: CT_MPI(MPI_Alltoall_init(s, n, MPI_INT, rb, n, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &rq));
                CT_MPI(MPI_Start(&rq)); CT_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
                CT_MPI(MPI_Request_free(&rq)); break;
        default: CT_MPI(MPI_Alltoall_c(s, n, MPI_INT, rb, n, MPI_INT, MPI_COMM_WORLD));
        }
        for (int q = 0; q < size; q++)
            for (int i = 0; i < n; i++)
                if (rb[(long)q * n + i] != ct_val(q, (long)me * n + i)) {
                    CT_ERR("alltoall form %d n %d in_place %d: from %d [%d] = %d", form, n, in_place, q, i,
                           rb[(long)q * n + i]);
                    return;
                }
        CT_CHECK(rb[(long)n * size] == -1, "alltoall wrote past the end");
    }
}

/* rank r sends (r + j) % 4 ints to rank j; blocks are 4 ints apart plus a gap of 1 */
static int cnt(int from, int to) { return (from + to) % 4; }

static void alltoallv(int form)
{
    int size = ct_size, me = ct_rank;
    int sc[8], sd[8], rc[8], rd[8];
    for (int j = 0; j < size; j++) {
        sc[j] = cnt(me, j);
        sd[j] = 5 * j;
        rc[j] = cnt(j, me);
        rd[j] = 5 * j;
    }
    for (int in_place = 0; in_place < 2; in_place++) {
        for (int i = 0; i < 5 * size; i++) {
            sb[i] = ct_val(me, i);
            rb[i] = in_place ? sb[i] : -1;
        }
        MPI_Request rq;
        const void *s = in_place ? MPI_IN_PLACE : sb;
        if (form == 0) {
            CT_MPI(MPI_Alltoallv(s, sc, sd, MPI_INT, rb, rc, rd, MPI_INT, MPI_COMM_WORLD));
        } else if (form == 1) {
            CT_MPI(MPI_Ialltoallv(s, sc, sd, MPI_INT, rb, rc, rd, MPI_INT, MPI_COMM_WORLD, &rq));
            CT_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        } else {
            MPI_Count csc[8], crc[8];
            MPI_Aint csd[8], crd[8];
            for (int j = 0; j < size; j++) { csc[j] = sc[j]; crc[j] = rc[j]; csd[j] = sd[j]; crd[j] = rd[j]; }
            CT_MPI(MPI_Alltoallv_c(s, csc, csd, MPI_INT, rb, crc, crd, MPI_INT, MPI_COMM_WORLD));
        }
        for (int q = 0; q < size; q++) {
            for (int i = 0; i < cnt(q, me); i++)
                CT_CHECK(rb[5 * q + i] == ct_val(q, 5 * me + i), "alltoallv form %d in_place %d from %d [%d] = %d",
                         form, in_place, q, i, rb[5 * q + i]);
            if (!in_place)
                CT_CHECK(rb[5 * q + cnt(q, me)] == -1, "alltoallv wrote into a gap");
        }
    }
}

/* Alltoallw: ints to even ranks, doubles to odd ranks, byte displacements */
static void alltoallw(int form)
{
    int size = ct_size, me = ct_rank;
    int sc[8], sd[8], rc[8], rd[8];
    MPI_Datatype st[8], rt[8];
    char sbytes[8 * 32], rbytes[8 * 32];
    for (int j = 0; j < size; j++) {
        sc[j] = 2; sd[j] = 32 * j; st[j] = j % 2 ? MPI_DOUBLE : MPI_INT;
        rc[j] = 2; rd[j] = 32 * (size - 1 - j); rt[j] = me % 2 ? MPI_DOUBLE : MPI_INT;
        for (int i = 0; i < 2; i++) {
            if (j % 2) ((double *)(sbytes + 32 * j))[i] = ct_val(me, 10 * j + i) + 0.5;
            else ((int *)(sbytes + 32 * j))[i] = ct_val(me, 10 * j + i);
        }
    }
    memset(rbytes, 0xff, sizeof rbytes);
    MPI_Request rq;
    if (form == 0) {
        CT_MPI(MPI_Alltoallw(sbytes, sc, sd, st, rbytes, rc, rd, rt, MPI_COMM_WORLD));
    } else {
        CT_MPI(MPI_Ialltoallw(sbytes, sc, sd, st, rbytes, rc, rd, rt, MPI_COMM_WORLD, &rq));
        CT_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    }
    for (int q = 0; q < size; q++)
        for (int i = 0; i < 2; i++) {
            char *p = rbytes + 32 * (size - 1 - q);
            if (me % 2)
                CT_CHECK(((double *)p)[i] == ct_val(q, 10 * me + i) + 0.5, "alltoallw double from %d", q);
            else
                CT_CHECK(((int *)p)[i] == ct_val(q, 10 * me + i), "alltoallw int from %d", q);
        }
    /* in place */
    for (int j = 0; j < size; j++)
        for (int i = 0; i < 3; i++)
            ((int *)(rbytes + 32 * j))[i] = ct_val(me, 10 * j + i);
    for (int j = 0; j < size; j++) { rc[j] = 3; rd[j] = 32 * j; rt[j] = MPI_INT; }
    CT_MPI(MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, rbytes, rc, rd, rt, MPI_COMM_WORLD));
    for (int q = 0; q < size; q++)
        for (int i = 0; i < 3; i++)
            CT_CHECK(((int *)(rbytes + 32 * q))[i] == ct_val(q, 10 * me + i), "alltoallw in place from %d", q);
}

int main(int argc, char **argv)
{
    ct_init(&argc, &argv, "alltoall");
    sb = malloc(sizeof(int) * 70000 * 8 + 64);
    rb = malloc(sizeof(int) * 70000 * 8 + 64);
    static const int ns[] = {0, 1, 2, 100, 40000, 70000};
    for (int k = 0; k < 6; k++)
        for (int f = 0; f < 4; f++)
            alltoall(ns[k], f);
    for (int f = 0; f < 3; f++)
        alltoallv(f);
    for (int f = 0; f < 2; f++)
        alltoallw(f);
    free(sb);
    free(rb);
    return ct_finish();
}
