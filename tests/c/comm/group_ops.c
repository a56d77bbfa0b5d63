/* ranks: 1 2 4 8
 * Group algebra: sizes, ranks, translation, comparison, set operations, (range) incl/excl,
 * MPI_GROUP_EMPTY, argument errors with their classes. */
#include "check.h"

static int gsize(MPI_Group g)
{
    int s = -1;
    MPI_Group_size(g, &s);
    return s;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    MPI_Group world, self, g;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Comm_group(MPI_COMM_SELF, &self);
    CHECK(gsize(world) == size, "world group size %d", gsize(world));
    int r = -1;
    MPI_Group_rank(world, &r);
    CHECK(r == rank, "world group rank %d", r);
    MPI_Group_rank(self, &r);
    CHECK(r == 0, "self group rank %d", r);

    /* Reverse order: similar to world, rank mirrored. */
    int *ranks = malloc(sizeof(int) * size), *out = malloc(sizeof(int) * size);
    for (int i = 0; i < size; i++)
        ranks[i] = size - 1 - i;
    MPI_Group rev;
    MPI_Group_incl(world, size, ranks, &rev);
    MPI_Group_rank(rev, &r);
    CHECK(r == size - 1 - rank, "reversed rank %d", r);
    int cmp;
    MPI_Group_compare(world, rev, &cmp);
    CHECK(cmp == (size == 1 ? MPI_IDENT : MPI_SIMILAR), "compare world/rev %d", cmp);
    MPI_Group_compare(world, world, &cmp);
    CHECK(cmp == MPI_IDENT, "compare world/world %d", cmp);

    /* Translate: rank i of world is rank size-1-i of rev; PROC_NULL passes through. */
    for (int i = 0; i < size; i++)
        ranks[i] = i;
    MPI_Group_translate_ranks(world, size, ranks, rev, out);
    for (int i = 0; i < size; i++)
        CHECK(out[i] == size - 1 - i, "translate %d -> %d", i, out[i]);
    int pn = MPI_PROC_NULL, pout = 0;
    MPI_Group_translate_ranks(world, 1, &pn, rev, &pout);
    CHECK(pout == MPI_PROC_NULL, "translate PROC_NULL -> %d", pout);

    /* Evens and odds via range_incl; union, intersection, difference. */
    MPI_Group evens, odds, u, in, diff;
    int rng[1][3] = {{0, size - 1, 2}};
    MPI_Group_range_incl(world, 1, rng, &evens);
    MPI_Group_range_excl(world, 1, rng, &odds);
    CHECK(gsize(evens) == (size + 1) / 2, "evens size %d", gsize(evens));
    CHECK(gsize(odds) == size / 2, "odds size %d", gsize(odds));
    MPI_Group_union(odds, evens, &u);
    CHECK(gsize(u) == size, "union size %d", gsize(u));
    MPI_Group_compare(u, world, &cmp);
    CHECK(cmp == (size <= 1 ? MPI_IDENT : MPI_SIMILAR), "union vs world %d", cmp);
    /* Union keeps the first group's order: odds first. */
    if (size > 1) {
        int zero = 0, t = -1;
        MPI_Group_translate_ranks(u, 1, &zero, world, &t);
        CHECK(t == 1, "first member of odds∪evens is world rank %d", t);
    }
    MPI_Group_intersection(evens, odds, &in);
    CHECK(in == MPI_GROUP_EMPTY, "evens∩odds is not MPI_GROUP_EMPTY");
    MPI_Group_difference(world, odds, &diff);
    MPI_Group_compare(diff, evens, &cmp);
    CHECK(cmp == MPI_IDENT, "world-odds vs evens %d", cmp);
    MPI_Group_rank(evens, &r);
    CHECK(r == (rank % 2 == 0 ? rank / 2 : MPI_UNDEFINED), "rank in evens %d", r);

    /* Strided descending range. */
    int rng2[1][3] = {{size - 1, 0, -3}};
    MPI_Group_range_incl(world, 1, rng2, &g);
    CHECK(gsize(g) == (size - 1) / 3 + 1, "descending range size %d", gsize(g));
    int first = 0, w = -1;
    MPI_Group_translate_ranks(g, 1, &first, world, &w);
    CHECK(w == size - 1, "descending range starts at %d", w);
    MPI_Group_free(&g);

    /* Excl everything: empty. Incl nothing: MPI_GROUP_EMPTY. */
    for (int i = 0; i < size; i++)
        ranks[i] = i;
    MPI_Group_excl(world, size, ranks, &g);
    CHECK(gsize(g) == 0, "excl all size %d", gsize(g));
    MPI_Group_free(&g);
    CHECK(g == MPI_GROUP_NULL, "freed group is not MPI_GROUP_NULL");
    MPI_Group_incl(world, 0, NULL, &g);
    CHECK(g == MPI_GROUP_EMPTY, "incl of nothing is not MPI_GROUP_EMPTY");
    MPI_Group_rank(MPI_GROUP_EMPTY, &r);
    CHECK(r == MPI_UNDEFINED, "rank in empty group %d", r);
    MPI_Group_compare(g, MPI_GROUP_EMPTY, &cmp);
    CHECK(cmp == MPI_IDENT, "empty vs empty %d", cmp);
    MPI_Group_free(&g);

    /* Translating into a group that lacks the process gives MPI_UNDEFINED. */
    if (size > 1) {
        int one = 1, t = 0;
        MPI_Group_translate_ranks(world, 1, &one, evens, &t);
        CHECK(t == MPI_UNDEFINED, "world rank 1 in evens is %d", t);
    }

    /* Argument errors come back with the right class. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int bad = size, cls = 0, rc;
    rc = MPI_Group_incl(world, 1, &bad, &g);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RANK, "incl of rank %d: class %d", bad, cls);
    int dup2[2] = {0, 0};
    rc = MPI_Group_excl(world, 2, dup2, &g);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RANK, "excl with a repeated rank: class %d", cls);
    int zr[1][3] = {{0, 0, 0}};
    rc = MPI_Group_range_incl(world, 1, zr, &g);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_ARG, "range with stride 0: class %d", cls);
    rc = MPI_Group_size(MPI_GROUP_NULL, &r);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_GROUP, "size of MPI_GROUP_NULL: class %d", cls);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

    MPI_Group_free(&world);
    MPI_Group_free(&self);
    MPI_Group_free(&rev);
    MPI_Group_free(&evens);
    MPI_Group_free(&odds);
    MPI_Group_free(&u);
    MPI_Group_free(&in);
    MPI_Group_free(&diff);
    free(ranks);
    free(out);
    return finish();
}
