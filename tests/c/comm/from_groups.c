/* from_groups: MPI 4.0 constructors without a parent communicator.
 * Comm_create_from_group of the world group and of the even ranks (rank,
 * size, group, the given error handler, messages); Intercomm_create_from_groups
 * between even and odd ranks (sizes, Comm_test_inter, messages both ways
 * between matching ranks, remote group), two at once with different string
 * tags; a process outside the group gets MPI_ERR_GROUP, bad leaders
 * MPI_ERR_RANK, a NULL string tag MPI_ERR_ARG.
 * ranks: 2 4
 * timeout: 30
 */
#include "../tc.h"

static int eclass(int rc)
{
    int c = -1;
    MPI_Error_class(rc, &c);
    return c;
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "from_groups");
    MPI_Group world, evens, odds, mine, other;
    int r = -1, s = -1, flag = -1, cmp = -1;
    MPI_Comm c;
    MPI_Errhandler eh;

    TC_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    int ne = (tc_size + 1) / 2, no = tc_size / 2, range_e[1][3] = { { 0, tc_size - 1, 2 } },
        range_o[1][3] = { { 1, tc_size - 1, 2 } };
    TC_MPI(MPI_Group_range_incl(world, 1, range_e, &evens));
    TC_MPI(MPI_Group_range_incl(world, 1, range_o, &odds));
    mine = tc_rank % 2 ? odds : evens;
    other = tc_rank % 2 ? evens : odds;

    /* The whole world, with MPI_ERRORS_RETURN. */
    TC_MPI(MPI_Comm_create_from_group(world, "steadfast.test.world", MPI_INFO_NULL, MPI_ERRORS_RETURN, &c));
    TC_MPI(MPI_Comm_rank(c, &r));
    TC_MPI(MPI_Comm_size(c, &s));
    TC_CHECK(r == tc_rank && s == tc_size, "world from group: rank %d size %d", r, s);
    TC_MPI(MPI_Comm_get_errhandler(c, &eh));
    TC_CHECK(eh == MPI_ERRORS_RETURN, "error handler not MPI_ERRORS_RETURN");
    TC_MPI(MPI_Errhandler_free(&eh));
    int sum = 0;
    TC_MPI(MPI_Allreduce(&tc_rank, &sum, 1, MPI_INT, MPI_SUM, c));
    TC_CHECK(sum == tc_size * (tc_size - 1) / 2, "allreduce on the new communicator: %d", sum);
    TC_MPI(MPI_Comm_free(&c));

    /* My parity's group only. */
    TC_MPI(MPI_Comm_create_from_group(mine, "steadfast.test.parity", MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &c));
    TC_MPI(MPI_Comm_rank(c, &r));
    TC_MPI(MPI_Comm_size(c, &s));
    TC_CHECK(r == tc_rank / 2 && s == (tc_rank % 2 ? no : ne), "parity comm: rank %d size %d", r, s);
    MPI_Group cg;
    TC_MPI(MPI_Comm_group(c, &cg));
    TC_MPI(MPI_Group_compare(cg, mine, &cmp));
    TC_CHECK(cmp == MPI_IDENT, "parity comm group compare %d", cmp);
    TC_MPI(MPI_Group_free(&cg));
    TC_MPI(MPI_Comm_free(&c));

    /* Intercommunicators between evens and odds, two with different tags. */
    if (tc_size >= 2) {
        MPI_Comm ic[2];
        const char *tags[2] = { "steadfast.test.ic.a", "steadfast.test.ic.b" };
        for (int k = 0; k < 2; k++)
            /* The second one with the last rank of each side as leader. */
            TC_MPI(MPI_Intercomm_create_from_groups(mine, k == 0 ? 0 : (tc_rank % 2 ? no : ne) - 1, other,
                                                    k == 0 ? 0 : (tc_rank % 2 ? ne : no) - 1, tags[k],
                                                    MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &ic[k]));
        for (int k = 0; k < 2; k++) {
            int rs = -1;
            TC_MPI(MPI_Comm_test_inter(ic[k], &flag));
            TC_MPI(MPI_Comm_rank(ic[k], &r));
            TC_MPI(MPI_Comm_size(ic[k], &s));
            TC_MPI(MPI_Comm_remote_size(ic[k], &rs));
            TC_CHECK(flag && r == tc_rank / 2 && s == (tc_rank % 2 ? no : ne) && rs == (tc_rank % 2 ? ne : no),
                     "intercomm %d: inter %d rank %d size %d remote %d", k, flag, r, s, rs);
            MPI_Group rg;
            TC_MPI(MPI_Comm_remote_group(ic[k], &rg));
            TC_MPI(MPI_Group_compare(rg, other, &cmp));
            TC_CHECK(cmp == MPI_IDENT, "intercomm %d remote group compare %d", k, cmp);
            TC_MPI(MPI_Group_free(&rg));
            /* Rank i of one side talks to rank i of the other, where both exist. */
            int peer = tc_rank / 2;
            if (peer < rs) {
                int out = 1000 * k + tc_rank, in = -1;
                TC_MPI(MPI_Sendrecv(&out, 1, MPI_INT, peer, k, &in, 1, MPI_INT, peer, k, ic[k], MPI_STATUS_IGNORE));
                int want = 1000 * k + (tc_rank % 2 ? 2 * peer : 2 * peer + 1);
                TC_CHECK(in == want, "intercomm %d: got %d want %d", k, in, want);
            }
        }
        TC_MPI(MPI_Comm_free(&ic[0]));
        TC_MPI(MPI_Comm_free(&ic[1]));
    }

    /* Errors. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Comm_create_from_group(other, "steadfast.test.bad", MPI_INFO_NULL, MPI_ERRORS_RETURN, &c);
    TC_CHECK(eclass(rc) == MPI_ERR_GROUP, "not a member: class %d", eclass(rc));
    rc = MPI_Comm_create_from_group(mine, NULL, MPI_INFO_NULL, MPI_ERRORS_RETURN, &c);
    TC_CHECK(eclass(rc) == MPI_ERR_ARG, "NULL stringtag: class %d", eclass(rc));
    rc = MPI_Intercomm_create_from_groups(mine, 0, other, tc_size, "steadfast.test.bad", MPI_INFO_NULL,
                                          MPI_ERRORS_RETURN, &c);
    TC_CHECK(eclass(rc) == MPI_ERR_RANK, "bad remote leader: class %d", eclass(rc));
    rc = MPI_Intercomm_create_from_groups(mine, -1, other, 0, "steadfast.test.bad", MPI_INFO_NULL,
                                          MPI_ERRORS_RETURN, &c);
    TC_CHECK(eclass(rc) == MPI_ERR_RANK, "bad local leader: class %d", eclass(rc));

    TC_MPI(MPI_Group_free(&evens));
    TC_MPI(MPI_Group_free(&odds));
    TC_MPI(MPI_Group_free(&world));
    return tc_finalize();
}
