/* ranks: 1 2 3 4 8
 * Comm_split (colors, keys, MPI_UNDEFINED), Comm_split_type, Comm_create (one group and
 * disjoint groups), Comm_create_group (disjoint and overlapping groups, tags), and that
 * traffic on the new communicators stays on them. */
#include "check.h"

/* Ring exchange on c: every rank must see its left neighbour's value. */
static void ring(MPI_Comm c, int base)
{
    int r, s, got = -1;
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &s);
    MPI_Sendrecv(&(int){base + r}, 1, MPI_INT, (r + 1) % s, 7, &got, 1, MPI_INT, (r - 1 + s) % s, 7, c,
                 MPI_STATUS_IGNORE);
    CHECK(got == base + (r - 1 + s) % s, "ring on comm: got %d expected %d", got, base + (r - 1 + s) % s);
}

int main(int argc, char **argv)
{
    int rank, size, r, s, cmp;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Even / odd with reversed keys. */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &half);
    MPI_Comm_size(half, &s);
    MPI_Comm_rank(half, &r);
    int expect_size = rank % 2 == 0 ? (size + 1) / 2 : size / 2;
    CHECK(s == expect_size, "split size %d expected %d", s, expect_size);
    CHECK(r == s - 1 - rank / 2, "split rank %d expected %d", r, s - 1 - rank / 2);
    ring(half, 100 * (rank % 2));

    /* Equal keys: order by old rank. MPI_UNDEFINED: no communicator. */
    MPI_Comm some;
    int color = rank == size - 1 && size > 1 ? MPI_UNDEFINED : 3;
    MPI_Comm_split(MPI_COMM_WORLD, color, 0, &some);
    if (color == MPI_UNDEFINED) {
        CHECK(some == MPI_COMM_NULL, "MPI_UNDEFINED color gave a communicator");
    } else {
        MPI_Comm_rank(some, &r);
        CHECK(r == rank, "equal keys: rank %d expected %d", r, rank);
        ring(some, 1000);
        MPI_Comm_free(&some);
    }

    /* Split of a split, and messages with the same tag on parent and child stay apart. */
    MPI_Comm quarter;
    MPI_Comm_rank(half, &r);
    MPI_Comm_size(half, &s);
    MPI_Comm_split(half, r % 2, r, &quarter);
    int qr, qs;
    MPI_Comm_rank(quarter, &qr);
    MPI_Comm_size(quarter, &qs);
    if (s > 1) {
        int hr = r, hs = s;
        int a = -1, b = -1;
        MPI_Request rq[2];
        MPI_Irecv(&a, 1, MPI_INT, (hr - 1 + hs) % hs, 5, half, &rq[0]);
        MPI_Irecv(&b, 1, MPI_INT, (qr - 1 + qs) % qs, 5, quarter, &rq[1]);
        MPI_Send(&(int){qr}, 1, MPI_INT, (qr + 1) % qs, 5, quarter);
        MPI_Send(&(int){hr + 500}, 1, MPI_INT, (hr + 1) % hs, 5, half);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        CHECK(a == (hr - 1 + hs) % hs + 500, "half got %d", a);
        CHECK(b == (qr - 1 + qs) % qs, "quarter got %d", b);
    }
    MPI_Comm_free(&quarter);
    MPI_Comm_free(&half);

    /* Split type shared: one host, so everybody; MPI_UNDEFINED gives nothing. */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, -rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &s);
    MPI_Comm_rank(node, &r);
    CHECK(s == size, "shared split size %d", s);
    CHECK(r == size - 1 - rank, "shared split rank %d (keys reversed)", r);
    MPI_Comm_free(&node);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, 0, MPI_INFO_NULL, &node);
    CHECK(node == MPI_COMM_NULL, "MPI_UNDEFINED split type gave a communicator");

    /* Comm_create with the reversed world group. */
    MPI_Group world, g;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int *ranks = malloc(sizeof(int) * size);
    for (int i = 0; i < size; i++)
        ranks[i] = size - 1 - i;
    MPI_Group_incl(world, size, ranks, &g);
    MPI_Comm rev;
    MPI_Comm_create(MPI_COMM_WORLD, g, &rev);
    MPI_Comm_rank(rev, &r);
    CHECK(r == size - 1 - rank, "created rank %d", r);
    MPI_Comm_compare(MPI_COMM_WORLD, rev, &cmp);
    CHECK(cmp == (size == 1 ? MPI_CONGRUENT : MPI_SIMILAR), "compare world/rev %d", cmp);
    ring(rev, 7);
    MPI_Comm_free(&rev);
    MPI_Group_free(&g);

    /* Comm_create with disjoint groups (MPI 2.2): first half and second half. */
    int h = (size + 1) / 2, lo = rank < h;
    int rng[1][3] = {{lo ? 0 : h, lo ? h - 1 : size - 1, 1}};
    MPI_Group_range_incl(world, 1, rng, &g);
    MPI_Comm part;
    MPI_Comm_create(MPI_COMM_WORLD, g, &part);
    CHECK(part != MPI_COMM_NULL, "disjoint Comm_create gave MPI_COMM_NULL");
    MPI_Comm_size(part, &s);
    CHECK(s == (lo ? h : size - h), "disjoint part size %d", s);
    ring(part, 300);
    MPI_Comm_free(&part);
    MPI_Group_free(&g);

    /* Comm_create where some processes are not in the group. */
    int one = 0;
    MPI_Group_incl(world, 1, &one, &g);
    MPI_Comm_create(MPI_COMM_WORLD, g, &part);
    CHECK((rank == 0) == (part != MPI_COMM_NULL), "membership of {0}");
    if (part != MPI_COMM_NULL)
        MPI_Comm_free(&part);
    MPI_Group_free(&g);

    /* Comm_create_group: only the members call. Even ranks build one, odd ranks another, at
     * the same time and with the same tag; then overlapping groups with different tags. */
    MPI_Group par;
    int prng[1][3] = {{rank % 2, size - 1, 2}};
    if (prng[0][0] <= prng[0][1]) {
        MPI_Group_range_incl(world, 1, prng, &par);
        MPI_Comm pc;
        MPI_Comm_create_group(MPI_COMM_WORLD, par, 42, &pc);
        MPI_Comm_rank(pc, &r);
        CHECK(r == rank / 2, "create_group rank %d", r);
        ring(pc, 900);
        MPI_Comm_free(&pc);
        MPI_Group_free(&par);
    }
    if (size >= 3) {
        /* {0,1} with tag 1, then {1,2} with tag 2: rank 1 is in both. */
        MPI_Group a, b;
        int ra[2] = {0, 1}, rb[2] = {1, 2};
        MPI_Group_incl(world, 2, ra, &a);
        MPI_Group_incl(world, 2, rb, &b);
        MPI_Comm ca = MPI_COMM_NULL, cb = MPI_COMM_NULL;
        if (rank <= 1)
            MPI_Comm_create_group(MPI_COMM_WORLD, a, 1, &ca);
        if (rank == 1 || rank == 2)
            MPI_Comm_create_group(MPI_COMM_WORLD, b, 2, &cb);
        if (ca != MPI_COMM_NULL) {
            ring(ca, 11);
            MPI_Comm_free(&ca);
        }
        if (cb != MPI_COMM_NULL) {
            ring(cb, 22);
            MPI_Comm_free(&cb);
        }
        MPI_Group_free(&a);
        MPI_Group_free(&b);
    }

    /* Many splits in a row: context ids keep being agreed. */
    for (int i = 0; i < 20; i++) {
        MPI_Comm c;
        MPI_Comm_split(MPI_COMM_WORLD, (rank + i) % 3, rank, &c);
        if (i % 5 == 0)
            ring(c, i);
        MPI_Comm_free(&c);
    }

    /* A bad split type is an MPI_ERR_ARG error. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Comm_split_type(MPI_COMM_WORLD, 12345, 0, MPI_INFO_NULL, &node), cls = 0;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_ARG, "invalid split type: class %d", cls);
    rc = MPI_Comm_split(MPI_COMM_WORLD, -5, 0, &node);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_ARG, "negative color: class %d", cls);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

    MPI_Group_free(&world);
    free(ranks);
    return finish();
}
