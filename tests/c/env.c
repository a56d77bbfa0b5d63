/* env: environment management.  Initialized / Finalized before, during and
 * after; Init_thread's provided level, Query_thread, Is_thread_main;
 * Wtime / Wtick; Get_processor_name; Get_version against the header;
 * Get_library_version; Comm_dup keeps messages apart from its parent and
 * Comm_free resets the handle; Barrier; the MPI_TAG_UB attribute.
 * ranks: 1 2 4
 * timeout: 30
 */
#include "tc.h"

int main(int argc, char **argv)
{
    int flag = -1, provided = -1, level = -1, ver = 0, sub = 0, len = -1;

    /* Callable before initialization. */
    TC_MPI(MPI_Initialized(&flag));
    if (flag) { fprintf(stderr, "MPI_Initialized true before init\n"); return 1; }
    TC_MPI(MPI_Finalized(&flag));
    if (flag) { fprintf(stderr, "MPI_Finalized true before init\n"); return 1; }
    TC_MPI(MPI_Get_version(&ver, &sub));
    if (ver != MPI_VERSION || sub != MPI_SUBVERSION) {
        fprintf(stderr, "MPI_Get_version %d.%d before init, header says %d.%d\n", ver, sub,
                MPI_VERSION, MPI_SUBVERSION);
        return 1;
    }

    tc_name = "env";
    TC_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    TC_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &tc_rank));
    TC_MPI(MPI_Comm_size(MPI_COMM_WORLD, &tc_size));
    setvbuf(stdout, NULL, _IOLBF, 0);

    TC_CHECK(MPI_THREAD_SINGLE < MPI_THREAD_FUNNELED && MPI_THREAD_FUNNELED < MPI_THREAD_SERIALIZED &&
             MPI_THREAD_SERIALIZED < MPI_THREAD_MULTIPLE, "thread level constants not ordered");
    TC_CHECK(provided == MPI_THREAD_SINGLE || provided == MPI_THREAD_FUNNELED ||
             provided == MPI_THREAD_SERIALIZED || provided == MPI_THREAD_MULTIPLE,
             "Init_thread provided %d is not a thread level", provided);
    TC_MPI(MPI_Query_thread(&level));
    TC_CHECK(level == provided, "Query_thread %d, Init_thread provided %d", level, provided);
    TC_MPI(MPI_Is_thread_main(&flag));
    TC_CHECK(flag, "Is_thread_main false on the main thread");
    TC_MPI(MPI_Initialized(&flag));
    TC_CHECK(flag, "MPI_Initialized false after init");
    TC_MPI(MPI_Finalized(&flag));
    TC_CHECK(!flag, "MPI_Finalized true before finalize");

    /* Clock. */
    double tick = MPI_Wtick(), t0 = MPI_Wtime();
    TC_CHECK(tick > 0.0 && tick <= 0.01, "Wtick %g", tick);
    tc_sleep_ms(100);
    double t1 = MPI_Wtime();
    TC_CHECK(t1 - t0 >= 0.09 && t1 - t0 < 10.0, "Wtime advanced %.4f s over a 100 ms sleep", t1 - t0);
    for (int i = 0; i < 1000; i++) {
        double t = MPI_Wtime();
        if (t < t1) {
            TC_ERR("Wtime went backwards: %.9f after %.9f", t, t1);
            break;
        }
        t1 = t;
    }

    /* Names and versions. */
    char name[MPI_MAX_PROCESSOR_NAME];
    memset(name, 0, sizeof name);
    TC_MPI(MPI_Get_processor_name(name, &len));
    TC_CHECK(len > 0 && len < MPI_MAX_PROCESSOR_NAME && (int)strlen(name) == len,
             "Get_processor_name: len %d, strlen %zu", len, strlen(name));
    TC_MPI(MPI_Get_version(&ver, &sub));
    TC_CHECK(ver == MPI_VERSION && sub == MPI_SUBVERSION && ver >= 3,
             "Get_version %d.%d, header %d.%d", ver, sub, MPI_VERSION, MPI_SUBVERSION);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    memset(lib, 0, sizeof lib);
    len = -1;
    TC_MPI(MPI_Get_library_version(lib, &len));
    TC_CHECK(len > 0 && len < MPI_MAX_LIBRARY_VERSION_STRING && (int)strlen(lib) == len,
             "Get_library_version: len %d, strlen %zu", len, strlen(lib));

    /* Attributes of MPI_COMM_WORLD. */
    int *tag_ub = NULL;
    TC_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag));
    TC_CHECK(flag && tag_ub && *tag_ub >= 32767, "MPI_TAG_UB missing or < 32767");

    /* Comm_dup: same group, separate message space. */
    MPI_Comm dup = MPI_COMM_NULL;
    int dr = -1, ds = -1, cmp = -1;
    TC_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    TC_MPI(MPI_Comm_rank(dup, &dr));
    TC_MPI(MPI_Comm_size(dup, &ds));
    TC_CHECK(dr == tc_rank && ds == tc_size, "dup rank/size %d/%d", dr, ds);
    TC_MPI(MPI_Comm_compare(MPI_COMM_WORLD, dup, &cmp));
    TC_CHECK(cmp == MPI_CONGRUENT, "compare(world, dup) = %d, want MPI_CONGRUENT", cmp);
    TC_MPI(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &cmp));
    TC_CHECK(cmp == MPI_IDENT, "compare(world, world) = %d, want MPI_IDENT", cmp);
    {
        const int right = (tc_rank + 1) % tc_size, left = (tc_rank + tc_size - 1) % tc_size;
        int a = 1000 + tc_rank, b = 2000 + tc_rank, ra = -1, rb = -1;
        MPI_Request rq[2];
        /* Same source and tag on both communicators; send on dup first.
         * A receive on world must still get the world message. */
        TC_MPI(MPI_Isend(&b, 1, MPI_INT, right, 0, dup, &rq[0]));
        TC_MPI(MPI_Isend(&a, 1, MPI_INT, right, 0, MPI_COMM_WORLD, &rq[1]));
        TC_MPI(MPI_Recv(&ra, 1, MPI_INT, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        TC_MPI(MPI_Recv(&rb, 1, MPI_INT, left, 0, dup, MPI_STATUS_IGNORE));
        TC_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        TC_CHECK(ra == 1000 + left && rb == 2000 + left, "dup crosstalk: world got %d dup got %d", ra, rb);
    }
    /* A dup of a dup, freed in a different order. */
    MPI_Comm dup2 = MPI_COMM_NULL;
    TC_MPI(MPI_Comm_dup(dup, &dup2));
    TC_MPI(MPI_Comm_free(&dup));
    TC_CHECK(dup == MPI_COMM_NULL, "Comm_free did not reset the handle");
    TC_MPI(MPI_Barrier(dup2));
    TC_MPI(MPI_Comm_free(&dup2));

    for (int i = 0; i < 20; i++)
        TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    TC_MPI(MPI_Barrier(MPI_COMM_SELF));

    /* Barrier really waits: after a point-to-point sync, rank 0 enters
     * 0.5 s late; nobody may leave much earlier than that. */
    {
        tc_sync(MPI_COMM_WORLD);
        double before = MPI_Wtime();
        if (tc_rank == 0)
            tc_sleep_ms(500);
        TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
        double waited = MPI_Wtime() - before;
        TC_CHECK(waited >= 0.25, "left the barrier after %.3f s though rank 0 entered 0.5 s late", waited);
    }

    /* Collect the verdict while MPI is up, then check the after-finalize state. */
    long total = tc_errs;
    if (tc_rank == 0) {
        for (int i = 1; i < tc_size; i++) {
            long e = 0;
            TC_MPI(MPI_Recv(&e, 1, MPI_LONG, i, TC_DONE_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            total += e;
        }
    } else {
        TC_MPI(MPI_Send(&total, 1, MPI_LONG, 0, TC_DONE_TAG, MPI_COMM_WORLD));
    }
    TC_MPI(MPI_Finalize());
    int fin = 0, ini = 0;
    MPI_Finalized(&fin);
    MPI_Initialized(&ini);
    if (!fin || !ini) {
        fprintf(stderr, "[env rank %d] after finalize: Finalized %d Initialized %d (want 1 1)\n",
                tc_rank, fin, ini);
        total++;
    }
    if (tc_rank == 0)
    {
        if (total)
            printf(" Found %ld errors\n", total);
        else
            printf(" No Errors\n");
    }
    return total ? 1 : 0;
}
