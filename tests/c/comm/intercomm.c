/* ranks: 2 3 4 8
 * Intercommunicators: Intercomm_create over a peer communicator with a tag, remote size and
 * group, point-to-point (specific and any source, probe), Intercomm_merge with both high
 * orderings, dup, split and create on an intercommunicator, compare. */
#include "check.h"

/* Every local rank sends base + its local rank to remote rank (r % rsize) and receives
 * rbase + q from every remote rank q that targets it. */
static void exchange(MPI_Comm ic, int base, int rbase)
{
    int r, s, rs;
    MPI_Comm_rank(ic, &r);
    MPI_Comm_size(ic, &s);
    MPI_Comm_remote_size(ic, &rs);
    MPI_Request req;
    int v = base + r;
    MPI_Isend(&v, 1, MPI_INT, r % rs, 3, ic, &req);
    /* Remote ranks q with q % s == r send to me. */
    for (int q = r; q < rs; q += s) {
        int got = -1;
        MPI_Status st;
        MPI_Recv(&got, 1, MPI_INT, q, 3, ic, &st);
        CHECK(got == rbase + q, "intercomm recv from remote %d: %d", q, got);
        CHECK(st.MPI_SOURCE == q, "status source %d expected %d", st.MPI_SOURCE, q);
    }
    MPI_Wait(&req, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv)
{
    int rank, size, r, s, rs, flag, cmp;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Groups: low = first ceil(size/2) ranks, high = the rest. Leaders: local rank 0,
     * world ranks 0 and h. */
    int h = (size + 1) / 2, low = rank < h;
    MPI_Comm local, ic;
    MPI_Comm_split(MPI_COMM_WORLD, !low, rank, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, low ? h : 0, 77, &ic);
    MPI_Comm_test_inter(ic, &flag);
    CHECK(flag, "Comm_test_inter says intra");
    MPI_Comm_test_inter(local, &flag);
    CHECK(!flag, "Comm_test_inter says inter for an intracommunicator");
    MPI_Comm_size(ic, &s);
    MPI_Comm_rank(ic, &r);
    MPI_Comm_remote_size(ic, &rs);
    CHECK(s == (low ? h : size - h), "local size %d", s);
    CHECK(rs == (low ? size - h : h), "remote size %d", rs);
    CHECK(r == (low ? rank : rank - h), "local rank %d", r);

    MPI_Group rg, wg;
    MPI_Comm_remote_group(ic, &rg);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int zero = 0, w = -1;
    MPI_Group_translate_ranks(rg, 1, &zero, wg, &w);
    CHECK(w == (low ? h : 0), "remote rank 0 is world rank %d", w);
    MPI_Group_free(&rg);

    exchange(ic, 1000 * low, 1000 * !low);

    /* Any-source receives and probe see remote ranks. */
    MPI_Request sreq;
    int v9 = r * 10;
    MPI_Isend(&v9, 1, MPI_INT, 0, 9, ic, &sreq);
    if (r == 0) {
        for (int i = 0; i < rs; i++) {
            MPI_Status st;
            int got;
            MPI_Probe(MPI_ANY_SOURCE, 9, ic, &st);
            CHECK(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < rs, "probe source %d", st.MPI_SOURCE);
            MPI_Recv(&got, 1, MPI_INT, st.MPI_SOURCE, 9, ic, MPI_STATUS_IGNORE);
            CHECK(got == st.MPI_SOURCE * 10, "any-source value %d from %d", got, st.MPI_SOURCE);
        }
    }
    MPI_Wait(&sreq, MPI_STATUS_IGNORE);

    /* Merge: low group asks to go first (high = 0), then the reverse, then equal flags. */
    MPI_Comm m;
    MPI_Intercomm_merge(ic, !low, &m);
    MPI_Comm_rank(m, &r);
    MPI_Comm_size(m, &s);
    CHECK(s == size, "merged size %d", s);
    CHECK(r == rank, "merged (low first) rank %d expected %d", r, rank);
    MPI_Comm_test_inter(m, &flag);
    CHECK(!flag, "merged communicator is inter");
    MPI_Comm_compare(m, MPI_COMM_WORLD, &cmp);
    CHECK(cmp == MPI_CONGRUENT, "merged vs world %d", cmp);
    MPI_Comm_free(&m);
    MPI_Intercomm_merge(ic, low, &m);
    MPI_Comm_rank(m, &r);
    int expect = low ? (size - h) + rank : rank - h;
    CHECK(r == expect, "merged (high first) rank %d expected %d", r, expect);
    MPI_Comm_free(&m);
    MPI_Intercomm_merge(ic, 1, &m);
    MPI_Comm_size(m, &s);
    CHECK(s == size, "merged (equal flags) size %d", s);
    {
        /* Traffic on the merged communicator works. */
        int mr, got = -1;
        MPI_Comm_rank(m, &mr);
        MPI_Sendrecv(&mr, 1, MPI_INT, (mr + 1) % s, 1, &got, 1, MPI_INT, (mr - 1 + s) % s, 1, m,
                     MPI_STATUS_IGNORE);
        CHECK(got == (mr - 1 + s) % s, "merged ring got %d", got);
    }
    MPI_Comm_free(&m);

    /* Dup: congruent, own context. */
    MPI_Comm icd;
    MPI_Comm_dup(ic, &icd);
    MPI_Comm_compare(ic, icd, &cmp);
    CHECK(cmp == MPI_CONGRUENT, "inter dup compare %d", cmp);
    MPI_Comm_compare(ic, local, &cmp);
    CHECK(cmp == MPI_UNEQUAL, "inter vs intra compare %d", cmp);
    MPI_Comm_rank(ic, &r);
    {
        /* Same tag on ic and icd: messages stay on their communicator. */
        int a = -1, b = -1;
        MPI_Request q[2];
        MPI_Comm_remote_size(ic, &rs);
        MPI_Comm_size(ic, &s);
        if (r < rs) {
            MPI_Irecv(&a, 1, MPI_INT, r, 4, ic, &q[0]);
            MPI_Irecv(&b, 1, MPI_INT, r, 4, icd, &q[1]);
        }
        if (r < rs) {
            MPI_Send(&(int){2}, 1, MPI_INT, r, 4, icd);
            MPI_Send(&(int){1}, 1, MPI_INT, r, 4, ic);
            MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
            CHECK(a == 1 && b == 2, "dup isolation: a %d b %d", a, b);
        }
    }
    exchange(icd, 50, 50);
    MPI_Comm_free(&icd);

    /* Split of an intercommunicator: color by local rank parity. */
    MPI_Comm_rank(ic, &r);
    MPI_Comm ics;
    MPI_Comm_split(ic, r % 2, -r, &ics);
    MPI_Comm_size(ic, &s);
    MPI_Comm_remote_size(ic, &rs);
    int peers = r % 2 == 0 ? (rs + 1) / 2 : rs / 2;
    if (peers == 0) {
        CHECK(ics == MPI_COMM_NULL, "split with empty remote side gave a communicator");
    } else {
        int ls, lr, rr;
        MPI_Comm_size(ics, &ls);
        MPI_Comm_rank(ics, &lr);
        MPI_Comm_remote_size(ics, &rr);
        int mine = r % 2 == 0 ? (s + 1) / 2 : s / 2;
        CHECK(ls == mine, "inter split local size %d expected %d", ls, mine);
        CHECK(rr == peers, "inter split remote size %d expected %d", rr, peers);
        CHECK(lr == mine - 1 - r / 2, "inter split rank %d (keys reversed)", lr);
        exchange(ics, 70, 70);
        MPI_Comm_free(&ics);
    }

    /* Comm_create on an intercommunicator: local rank 0 only on each side. */
    MPI_Group lg, g0;
    MPI_Comm_group(ic, &lg);
    MPI_Group_incl(lg, 1, &zero, &g0);
    MPI_Comm icc;
    MPI_Comm_create(ic, g0, &icc);
    if (r == 0) {
        CHECK(icc != MPI_COMM_NULL, "Comm_create on inter gave MPI_COMM_NULL at rank 0");
        MPI_Comm_remote_size(icc, &rs);
        CHECK(rs == 1, "created inter remote size %d", rs);
        int v = -1;
        MPI_Sendrecv(&rank, 1, MPI_INT, 0, 2, &v, 1, MPI_INT, 0, 2, icc, MPI_STATUS_IGNORE);
        CHECK(v == (low ? h : 0), "created inter got %d", v);
        MPI_Comm_free(&icc);
    } else {
        CHECK(icc == MPI_COMM_NULL, "Comm_create on inter gave a communicator outside the group");
    }
    MPI_Group_free(&g0);
    MPI_Group_free(&lg);
    MPI_Group_free(&wg);

    /* A second intercommunicator between even and odd world ranks, built with a different
     * tag, in the same order on both sides. */
    if (size >= 2) {
        MPI_Comm par, ic2;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &par);
        MPI_Intercomm_create(par, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 1234, &ic2);
        exchange(ic2, 5 + rank % 2, 5 + !(rank % 2));
        MPI_Comm_free(&ic2);
        MPI_Comm_free(&par);
    }

    MPI_Comm_free(&ic);
    MPI_Comm_free(&local);
    return finish();
}
