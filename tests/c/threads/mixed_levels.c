/* ranks: 2 4
 * timeout: 60
 * Processes of one job asking for different thread levels: even ranks call
 * MPI_Init_thread(MPI_THREAD_MULTIPLE), odd ranks MPI_Init (the rank comes from the
 * launcher's environment, read before MPI is initialised). Every communicator constructor
 * must still meet across them: MPI_Comm_dup, MPI_Comm_idup, MPI_Comm_split (with
 * MPI_UNDEFINED on one rank), MPI_Comm_split_type, MPI_Comm_create, MPI_Comm_create_group,
 * MPI_Intercomm_create, MPI_Intercomm_merge, MPI_Comm_create_from_group,
 * MPI_Intercomm_create_from_groups, MPI_Cart_create and MPI_Comm_spawn (the parents'
 * agreement). These hung when a constructor chose
 * its messages by the caller's thread level. Each result's size and rank are checked and
 * used by an allreduce; the collectives on MPI_COMM_WORLD are checked too. */
#include <stdlib.h>
#include "../tc.h"

/* An allreduce of 1 over `c` must give its size. */
static void check_comm(MPI_Comm c, int want_size, int want_rank, const char *what)
{
    int n, r, sum = 0, one = 1;
    TC_MPI(MPI_Comm_size(c, &n));
    TC_MPI(MPI_Comm_rank(c, &r));
    TC_CHECK(n == want_size, "%s: size %d, expected %d", what, n, want_size);
    if (want_rank >= 0)
        TC_CHECK(r == want_rank, "%s: rank %d, expected %d", what, r, want_rank);
    TC_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c));
    TC_CHECK(sum == n, "%s: allreduce gave %d, expected %d", what, sum, n);
}

int main(int argc, char **argv)
{
    tc_name = "mixed_levels";
    int provided = MPI_THREAD_SINGLE;
    if (tc_launcher_rank() % 2 == 0)
        TC_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    else
        TC_MPI(MPI_Init(&argc, &argv));
    TC_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &tc_rank));
    TC_MPI(MPI_Comm_size(MPI_COMM_WORLD, &tc_size));
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Comm parent;
    TC_MPI(MPI_Comm_get_parent(&parent));
    if (parent != MPI_COMM_NULL) {
        /* A child of the spawn below: meet the parents once, then go. */
        TC_MPI(MPI_Barrier(parent));
        TC_MPI(MPI_Comm_disconnect(&parent));
        TC_MPI(MPI_Finalize());
        return tc_errs ? 1 : 0;
    }
    const int me = tc_rank, n = tc_size, half = n / 2;
    MPI_Comm w = MPI_COMM_WORLD, c;
    MPI_Group wg;
    TC_MPI(MPI_Comm_group(w, &wg));

    check_comm(w, n, me, "MPI_COMM_WORLD");
    {
        int v = me, b = me == 0 ? 42 : 0, all[64];
        TC_MPI(MPI_Bcast(&b, 1, MPI_INT, 0, w));
        TC_CHECK(b == 42, "bcast gave %d", b);
        TC_MPI(MPI_Allgather(&v, 1, MPI_INT, all, 1, MPI_INT, w));
        for (int i = 0; i < n; i++)
            TC_CHECK(all[i] == i, "allgather[%d] = %d", i, all[i]);
        TC_MPI(MPI_Barrier(w));
    }

    TC_MPI(MPI_Comm_dup(w, &c));
    check_comm(c, n, me, "MPI_Comm_dup");
    TC_MPI(MPI_Comm_free(&c));

    {
        MPI_Request rq;
        TC_MPI(MPI_Comm_idup(w, &c, &rq));
        TC_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        check_comm(c, n, me, "MPI_Comm_idup");
        TC_MPI(MPI_Comm_free(&c));
    }

    /* Reversed order within each parity; the last rank takes no part. */
    {
        int color = me == n - 1 ? MPI_UNDEFINED : me % 2;
        TC_MPI(MPI_Comm_split(w, color, n - me, &c));
        if (color == MPI_UNDEFINED) {
            TC_CHECK(c == MPI_COMM_NULL, "MPI_Comm_split with MPI_UNDEFINED gave a communicator");
        } else {
            int size = 0, rank = 0;
            for (int r = 0; r < n - 1; r++)
                if (r % 2 == color) {
                    size++;
                    if (r > me)
                        rank++;
                }
            check_comm(c, size, rank, "MPI_Comm_split");
            TC_MPI(MPI_Comm_free(&c));
        }
    }

    TC_MPI(MPI_Comm_split_type(w, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &c));
    check_comm(c, n, me, "MPI_Comm_split_type");
    TC_MPI(MPI_Comm_free(&c));

    /* The lower half. */
    {
        MPI_Group lower;
        int range[1][3] = {{0, half - 1, 1}};
        TC_MPI(MPI_Group_range_incl(wg, 1, range, &lower));
        TC_MPI(MPI_Comm_create(w, lower, &c));
        if (me < half) {
            check_comm(c, half, me, "MPI_Comm_create");
            TC_MPI(MPI_Comm_free(&c));
        } else {
            TC_CHECK(c == MPI_COMM_NULL, "MPI_Comm_create: a non-member got a communicator");
        }
        if (me < half) {
            TC_MPI(MPI_Comm_create_group(w, lower, 7, &c));
            check_comm(c, half, me, "MPI_Comm_create_group");
            TC_MPI(MPI_Comm_free(&c));
            TC_MPI(MPI_Comm_create_from_group(lower, "steadfast.test.mixed", MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &c));
            check_comm(c, half, me, "MPI_Comm_create_from_group");
            TC_MPI(MPI_Comm_free(&c));
        }
        TC_MPI(MPI_Group_free(&lower));
    }

    /* The two halves, joined: an intercommunicator, merged with the upper half first. */
    {
        MPI_Comm side, inter, merged;
        int upper = me >= half;
        TC_MPI(MPI_Comm_split(w, upper, me, &side));
        TC_MPI(MPI_Intercomm_create(side, 0, w, upper ? 0 : half, 11, &inter));
        int rsize = 0;
        TC_MPI(MPI_Comm_remote_size(inter, &rsize));
        TC_CHECK(rsize == (upper ? half : n - half), "MPI_Intercomm_create: remote size %d", rsize);
        TC_MPI(MPI_Intercomm_merge(inter, !upper, &merged));
        check_comm(merged, n, upper ? me - half : me + (n - half), "MPI_Intercomm_merge");
        TC_MPI(MPI_Comm_free(&merged));
        TC_MPI(MPI_Comm_free(&inter));

        MPI_Group mine, theirs;
        int lo[1][3] = {{0, half - 1, 1}}, hi[1][3] = {{half, n - 1, 1}};
        TC_MPI(MPI_Group_range_incl(wg, 1, upper ? hi : lo, &mine));
        TC_MPI(MPI_Group_range_incl(wg, 1, upper ? lo : hi, &theirs));
        TC_MPI(MPI_Intercomm_create_from_groups(mine, 0, theirs, 0, "steadfast.test.mixed.inter", MPI_INFO_NULL,
                                                MPI_ERRORS_ARE_FATAL, &inter));
        TC_MPI(MPI_Comm_remote_size(inter, &rsize));
        TC_CHECK(rsize == (upper ? half : n - half), "MPI_Intercomm_create_from_groups: remote size %d", rsize);
        TC_MPI(MPI_Comm_free(&inter));
        TC_MPI(MPI_Group_free(&mine));
        TC_MPI(MPI_Group_free(&theirs));
        TC_MPI(MPI_Comm_free(&side));
    }

    {
        int dims[1] = {n}, periods[1] = {1};
        TC_MPI(MPI_Cart_create(w, 1, dims, periods, 0, &c));
        check_comm(c, n, me, "MPI_Cart_create");
        TC_MPI(MPI_Comm_free(&c));
    }

    /* The parents agree on the children's intercommunicator and pass the root's outcome
     * on among themselves. */
    {
        MPI_Comm inter;
        int codes[2], rsize = 0;
        char *cargs[] = {"child", NULL};
        TC_MPI(MPI_Comm_spawn(argv[0], cargs, 2, MPI_INFO_NULL, 0, w, &inter, codes));
        TC_CHECK(codes[0] == MPI_SUCCESS && codes[1] == MPI_SUCCESS, "MPI_Comm_spawn: codes %d %d", codes[0], codes[1]);
        TC_MPI(MPI_Comm_remote_size(inter, &rsize));
        TC_CHECK(rsize == 2, "MPI_Comm_spawn: %d children", rsize);
        TC_MPI(MPI_Barrier(inter));
        TC_MPI(MPI_Comm_disconnect(&inter));
    }

    TC_MPI(MPI_Group_free(&wg));
    return tc_finalize();
}
