/* ranks: 2 4
 * timeout: 120
 * MPI_THREAD_MULTIPLE: NTHREADS threads per rank build communicators from their own
 * duplicate of MPI_COMM_WORLD at the same time, in orders that cross between ranks (thread t
 * of rank r waits ((t - r) mod NTHREADS) steps before each call, so rank 0 starts with
 * thread 0's communicator while rank 1 starts with thread 1's). A call that waits for its
 * peers while keeping other threads of its process out would hang here. Per thread:
 * MPI_Comm_split (with MPI_UNDEFINED for some), MPI_Comm_split_type, MPI_Intercomm_create
 * with leaders that are not rank 0 of their group, MPI_Comm_create and MPI_Comm_split of the
 * intercommunicator,
 * MPI_Intercomm_merge with both orders of `high` and with equal values,
 * MPI_Intercomm_create_from_groups with a string tag per thread; every result's size,
 * rank and group order is checked, and used by an allreduce and a point-to-point exchange. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include "../tc.h"

#define NTHREADS 4
#define ITERS 4

static MPI_Comm comms[NTHREADS];
static atomic_long errs;

#define T_CHECK(cond, ...) do { if (!(cond)) { atomic_fetch_add(&errs, 1); \
    fprintf(stderr, "[constructors rank %d] %s:%d: ", tc_rank, __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } } while (0)

/* Hold thread t of this rank back so the ranks reach their threads' calls in crossing
 * orders. */
static void stagger(int t)
{
    usleep((useconds_t)(((t - tc_rank) % NTHREADS + NTHREADS) % NTHREADS) * 20000);
}

/* Size of `c` (local group), checked by an allreduce over it. */
static void check_intra(MPI_Comm c, int want_size, int want_rank, const char *what)
{
    int size = -1, rank = -1, inter = 1;
    MPI_Comm_size(c, &size);
    MPI_Comm_rank(c, &rank);
    MPI_Comm_test_inter(c, &inter);
    T_CHECK(!inter && size == want_size && rank == want_rank, "%s: size %d rank %d inter %d, want size %d rank %d", what, size, rank, inter,
            want_size, want_rank);
    long one = 1, sum = 0;
    TC_MPI(MPI_Allreduce(&one, &sum, 1, MPI_LONG, MPI_SUM, c));
    T_CHECK(sum == size, "%s: allreduce %ld over %d ranks", what, sum, size);
}

/* An intercommunicator between the low half [0, size/2) and the high half of the world:
 * sizes, and every rank's world rank received from each remote rank. */
static void check_inter(MPI_Comm ic, int rank, int size, const char *what)
{
    int low = rank < size / 2;
    int lsize = -1, rsize = -1, lrank = -1, inter = 0;
    MPI_Comm_test_inter(ic, &inter);
    MPI_Comm_size(ic, &lsize);
    MPI_Comm_remote_size(ic, &rsize);
    MPI_Comm_rank(ic, &lrank);
    int wl = low ? size / 2 : size - size / 2, wr = size - wl;
    T_CHECK(inter && lsize == wl && rsize == wr && lrank == (low ? rank : rank - size / 2), "%s: inter %d local %d remote %d rank %d", what,
            inter, lsize, rsize, lrank);
    if (!inter || rsize != wr)
        return;
    /* The remote rank j of a low rank is world rank size/2 + j, and the other way round. */
    int sent[64], got[64];
    MPI_Request reqs[128];
    for (int j = 0; j < rsize; j++) {
        sent[j] = rank;
        TC_MPI(MPI_Isend(&sent[j], 1, MPI_INT, j, 7, ic, &reqs[j]));
        TC_MPI(MPI_Irecv(&got[j], 1, MPI_INT, j, 7, ic, &reqs[rsize + j]));
    }
    TC_MPI(MPI_Waitall(2 * rsize, reqs, MPI_STATUSES_IGNORE));
    for (int j = 0; j < rsize; j++)
        T_CHECK(got[j] == (low ? size / 2 + j : j), "%s: remote rank %d is world rank %d", what, j, got[j]);
    /* Over an intercommunicator the allreduce sums the remote group's values. */
    long mine = rank, sum = 0, want = 0;
    for (int j = 0; j < rsize; j++)
        want += low ? size / 2 + j : j;
    TC_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, ic));
    T_CHECK(sum == want, "%s: allreduce %ld, want %ld", what, sum, want);
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    int rank = tc_rank, size = tc_size;
    MPI_Comm c = comms[t];

    for (int it = 0; it < ITERS; it++) {
        /* Split by parity, ordered by descending world rank. */
        stagger(t);
        MPI_Comm s;
        TC_MPI(MPI_Comm_split(c, rank % 2, size - rank, &s));
        int same = 0, above = 0;
        for (int r = 0; r < size; r++)
            if (r % 2 == rank % 2) {
                same++;
                above += r > rank;
            }
        check_intra(s, same, above, "split");
        TC_MPI(MPI_Comm_free(&s));

        /* Odd ranks take no part in the result. */
        stagger(t);
        TC_MPI(MPI_Comm_split(c, rank % 2 ? MPI_UNDEFINED : 3, rank, &s));
        if (rank % 2) {
            T_CHECK(s == MPI_COMM_NULL, "split undefined: got a communicator");
        } else {
            check_intra(s, (size + 1) / 2, rank / 2, "split even");
            TC_MPI(MPI_Comm_free(&s));
        }

        stagger(t);
        TC_MPI(MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &s));
        T_CHECK(s != MPI_COMM_NULL, "split_type: no communicator");
        if (s != MPI_COMM_NULL) {
            long one = 1, sum = 0;
            int ssize = 0;
            MPI_Comm_size(s, &ssize);
            TC_MPI(MPI_Allreduce(&one, &sum, 1, MPI_LONG, MPI_SUM, s));
            T_CHECK(sum == ssize && ssize >= 1, "split_type: allreduce %ld over %d", sum, ssize);
            TC_MPI(MPI_Comm_free(&s));
        }

        /* Intercommunicator between the halves; each leader is its half's last rank. */
        int low = rank < size / 2;
        MPI_Comm half, ic;
        stagger(t);
        TC_MPI(MPI_Comm_split(c, low, rank, &half));
        int hsize = 0;
        MPI_Comm_size(half, &hsize);
        int rleader = low ? size - 1 : size / 2 - 1;
        stagger(t);
        TC_MPI(MPI_Intercomm_create(half, hsize - 1, c, rleader, 10 + t, &ic));
        check_inter(ic, rank, size, "intercomm_create");

        /* MPI_Comm_create of the intercommunicator with each side's group reversed: ranks
         * follow the groups' order on both sides. Then one side passing the empty group:
         * nobody gets a communicator. */
        MPI_Group lg, rev;
        MPI_Comm_group(ic, &lg);
        int lsize = 0, lrank = -1, rsize = 0;
        MPI_Group_size(lg, &lsize);
        MPI_Comm_rank(ic, &lrank);
        MPI_Comm_remote_size(ic, &rsize);
        int back[1][3] = {{lsize - 1, 0, -1}};
        MPI_Group_range_incl(lg, 1, back, &rev);
        MPI_Comm cr;
        stagger(t);
        TC_MPI(MPI_Comm_create(ic, rev, &cr));
        T_CHECK(cr != MPI_COMM_NULL, "intercomm create: no communicator");
        if (cr != MPI_COMM_NULL) {
            int nsize = -1, nrank = -1, nrsize = -1;
            MPI_Comm_size(cr, &nsize);
            MPI_Comm_rank(cr, &nrank);
            MPI_Comm_remote_size(cr, &nrsize);
            T_CHECK(nsize == lsize && nrank == lsize - 1 - lrank && nrsize == rsize, "intercomm create: size %d rank %d remote %d", nsize, nrank,
                    nrsize);
            int sent = rank, got[64];
            MPI_Request rq[128];
            for (int j = 0; j < rsize && j < 64; j++) {
                TC_MPI(MPI_Isend(&sent, 1, MPI_INT, j, 8, cr, &rq[j]));
                TC_MPI(MPI_Irecv(&got[j], 1, MPI_INT, j, 8, cr, &rq[rsize + j]));
            }
            TC_MPI(MPI_Waitall(2 * rsize, rq, MPI_STATUSES_IGNORE));
            for (int j = 0; j < rsize; j++) {
                int want = low ? size - 1 - j : size / 2 - 1 - j;
                T_CHECK(got[j] == want, "intercomm create: remote rank %d is world rank %d, want %d", j, got[j], want);
            }
            TC_MPI(MPI_Comm_free(&cr));
        }
        stagger(t);
        TC_MPI(MPI_Comm_create(ic, low ? lg : MPI_GROUP_EMPTY, &cr));
        T_CHECK(cr == MPI_COMM_NULL, "intercomm create with an empty side: got a communicator");
        MPI_Group_free(&rev);
        MPI_Group_free(&lg);

        /* Split of the intercommunicator, one color: the same shape. */
        MPI_Comm ics;
        stagger(t);
        TC_MPI(MPI_Comm_split(ic, 0, rank, &ics));
        check_inter(ics, rank, size, "intercomm split");
        TC_MPI(MPI_Comm_free(&ics));

        /* Merge: `high` on the low half puts the high half first (odd iterations); equal
         * values put first the half whose leader has the smaller rank, the low half. */
        int high = (it % 2) ? low : 0;
        int high_first = (it % 2) == 1;
        MPI_Comm m;
        stagger(t);
        TC_MPI(MPI_Intercomm_merge(ic, high, &m));
        int want = high_first ? (low ? rank + (size - size / 2) : rank - size / 2) : rank;
        check_intra(m, size, want, high_first ? "merge (high first)" : "merge (low first)");
        TC_MPI(MPI_Comm_free(&m));
        TC_MPI(MPI_Comm_free(&ic));
        TC_MPI(MPI_Comm_free(&half));

        /* The same intercommunicator from groups, tagged by thread (tags whose hashes
         * differ), leaders the last of each half. */
        MPI_Group world, lo, hi;
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        int rlo[1][3] = {{0, size / 2 - 1, 1}}, rhi[1][3] = {{size / 2, size - 1, 1}};
        MPI_Group_range_incl(world, 1, rlo, &lo);
        MPI_Group_range_incl(world, 1, rhi, &hi);
        char stag[64];
        snprintf(stag, sizeof stag, "steadfast.constructors.%d", t);
        int nlo = size / 2, nhi = size - size / 2;
        stagger(t);
        TC_MPI(MPI_Intercomm_create_from_groups(low ? lo : hi, (low ? nlo : nhi) - 1, low ? hi : lo, (low ? nhi : nlo) - 1, stag,
                                                MPI_INFO_NULL, MPI_ERRORS_RETURN, &ic));
        check_inter(ic, rank, size, "intercomm_create_from_groups");
        TC_MPI(MPI_Comm_free(&ic));
        MPI_Group_free(&lo);
        MPI_Group_free(&hi);
        MPI_Group_free(&world);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = -1;
    tc_name = "constructors";
    TC_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    TC_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &tc_rank));
    TC_MPI(MPI_Comm_size(MPI_COMM_WORLD, &tc_size));
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (provided != MPI_THREAD_MULTIPLE)
        tc_die("MPI_Init_thread provided %d, not MPI_THREAD_MULTIPLE", provided);
    if (tc_size < 2 || tc_size > 64)
        tc_die("needs 2 to 64 ranks");
    for (int t = 0; t < NTHREADS; t++)
        TC_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]));
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++)
        if (pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) != 0)
            tc_die("pthread_create failed");
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < NTHREADS; t++)
        TC_MPI(MPI_Comm_free(&comms[t]));
    tc_errs += atomic_load(&errs);
    return tc_finalize();
}
