/* ranks: 2 4
 * timeout: 120
 * MPI_THREAD_MULTIPLE: NTHREADS threads per rank call MPI at the same time.
 * Each thread, on its own tags of MPI_COMM_WORLD: blocking send/recv with a neighbour
 * (eager and rendezvous sizes, receive first on odd ranks), MPI_Probe then MPI_Recv,
 * messages from every rank received with MPI_ANY_SOURCE, a synchronous send to itself that
 * a sibling thread receives (it only completes if the sibling's blocking receive lets other
 * threads in), and on its own duplicate of MPI_COMM_WORLD: MPI_Allreduce, MPI_Bcast,
 * MPI_Barrier, a blocking MPI_Comm_dup, MPI_Comm_create and MPI_Comm_create_group of it,
 * and fence epochs on its own window.
 * Every byte is checked. */
#include <pthread.h>
#include <stdatomic.h>
#include "../tc.h"

#define NTHREADS 4
#define ITERS 20
#define BIG (256 * 1024)

static MPI_Comm comms[NTHREADS];
static MPI_Win wins[NTHREADS];
static int *winbuf[NTHREADS];
static atomic_long errs;

#define T_CHECK(cond, ...) do { if (!(cond)) { atomic_fetch_add(&errs, 1); \
    fprintf(stderr, "[multiple rank %d] %s:%d: ", tc_rank, __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } } while (0)

static void check_bytes(const unsigned char *b, size_t n, uint64_t seed, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != tc_pat(seed, i)) {
            T_CHECK(0, "%s: byte %zu differs", what, i);
            return;
        }
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    int rank = tc_rank, size = tc_size;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    unsigned char *sbuf = tc_malloc(BIG), *rbuf = tc_malloc(BIG);
    MPI_Status st;

    for (long it = 0; it < ITERS; it++) {
        /* Ring exchange on this thread's tag; every other iteration is a rendezvous size. */
        size_t n = (it % 2) ? BIG : 100 + (size_t)t;
        int tag = t;
        tc_fill(sbuf, n, tc_seed(rank, right, tag, it));
        if (rank % 2 == 0) {
            TC_MPI(MPI_Send(sbuf, (int)n, MPI_BYTE, right, tag, MPI_COMM_WORLD));
            TC_MPI(MPI_Recv(rbuf, BIG, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st));
        } else {
            TC_MPI(MPI_Recv(rbuf, BIG, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st));
            TC_MPI(MPI_Send(sbuf, (int)n, MPI_BYTE, right, tag, MPI_COMM_WORLD));
        }
        int got = 0;
        MPI_Get_count(&st, MPI_BYTE, &got);
        T_CHECK(got == (int)n && st.MPI_SOURCE == left && st.MPI_TAG == tag, "ring: count %d source %d tag %d", got, st.MPI_SOURCE, st.MPI_TAG);
        check_bytes(rbuf, n, tc_seed(left, rank, tag, it), "ring");

        /* Probe, then receive what it found. */
        tag = 100 + t;
        tc_fill(sbuf, 64, tc_seed(rank, right, tag, it));
        MPI_Request r;
        TC_MPI(MPI_Isend(sbuf, 64, MPI_BYTE, right, tag, MPI_COMM_WORLD, &r));
        TC_MPI(MPI_Probe(left, tag, MPI_COMM_WORLD, &st));
        MPI_Get_count(&st, MPI_BYTE, &got);
        T_CHECK(got == 64 && st.MPI_SOURCE == left, "probe: count %d source %d", got, st.MPI_SOURCE);
        TC_MPI(MPI_Recv(rbuf, 64, MPI_BYTE, left, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        check_bytes(rbuf, 64, tc_seed(left, rank, tag, it), "probe");
        TC_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));

        /* One message from every rank, taken with MPI_ANY_SOURCE. */
        tag = 200 + t;
        MPI_Request reqs[64];
        unsigned char small[64][8];
        for (int p = 0; p < size; p++) {
            tc_fill(small[p], 8, tc_seed(rank, p, tag, it));
            TC_MPI(MPI_Isend(small[p], 8, MPI_BYTE, p, tag, MPI_COMM_WORLD, &reqs[p]));
        }
        int seen[64] = {0};
        for (int k = 0; k < size; k++) {
            unsigned char m[8];
            TC_MPI(MPI_Recv(m, 8, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st));
            T_CHECK(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < size && !seen[st.MPI_SOURCE], "any source: source %d again", st.MPI_SOURCE);
            if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < size) {
                seen[st.MPI_SOURCE] = 1;
                check_bytes(m, 8, tc_seed(st.MPI_SOURCE, rank, tag, it), "any source");
            }
        }
        TC_MPI(MPI_Waitall(size, reqs, MPI_STATUSES_IGNORE));

        /* Thread pairs on this rank: even thread receives (blocking) then answers with a
         * synchronous send; its odd sibling sends synchronously first. */
        int sib = t ^ 1;
        int x = (int)(rank * 1000 + t * 10 + it), y = -1;
        if (t % 2 == 0) {
            TC_MPI(MPI_Recv(&y, 1, MPI_INT, rank, 300 + t, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            TC_MPI(MPI_Ssend(&x, 1, MPI_INT, rank, 300 + sib, MPI_COMM_WORLD));
        } else {
            TC_MPI(MPI_Ssend(&x, 1, MPI_INT, rank, 300 + sib, MPI_COMM_WORLD));
            TC_MPI(MPI_Recv(&y, 1, MPI_INT, rank, 300 + t, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        }
        T_CHECK(y == (int)(rank * 1000 + sib * 10 + it), "self: got %d", y);

        /* Collectives on this thread's communicator. */
        long v = rank + t + it, sum = 0;
        TC_MPI(MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, comms[t]));
        long want = (long)size * (t + it) + (long)size * (size - 1) / 2;
        T_CHECK(sum == want, "allreduce: %ld, want %ld", sum, want);
        int root = (int)(it % size);
        if (rank == root)
            tc_fill(sbuf, 4096, tc_seed(root, t, 400, it));
        TC_MPI(MPI_Bcast(sbuf, 4096, MPI_BYTE, root, comms[t]));
        check_bytes(sbuf, 4096, tc_seed(root, t, 400, it), "bcast");
        TC_MPI(MPI_Barrier(comms[t]));

        /* One-sided: put into the right neighbour's window between fences. */
        int val = rank * 100 + t + (int)it;
        TC_MPI(MPI_Win_fence(0, wins[t]));
        TC_MPI(MPI_Put(&val, 1, MPI_INT, right, 0, 1, MPI_INT, wins[t]));
        TC_MPI(MPI_Win_fence(0, wins[t]));
        T_CHECK(winbuf[t][0] == left * 100 + t + (int)it, "put: %d", winbuf[t][0]);
    }

    /* A blocking dup while the other threads dup their own communicators. */
    MPI_Comm d;
    TC_MPI(MPI_Comm_dup(comms[t], &d));
    int dsize = 0;
    MPI_Comm_size(d, &dsize);
    long one = 1, all = 0;
    TC_MPI(MPI_Allreduce(&one, &all, 1, MPI_LONG, MPI_SUM, d));
    T_CHECK(dsize == size && all == size, "dup: size %d sum %ld", dsize, all);
    TC_MPI(MPI_Comm_free(&d));

    /* MPI_Comm_create on this thread's communicator, of every rank but rank 0. */
    MPI_Group wg, tail;
    MPI_Comm_group(comms[t], &wg);
    int zero = 0;
    MPI_Group_excl(wg, 1, &zero, &tail);
    MPI_Comm cr;
    TC_MPI(MPI_Comm_create(comms[t], tail, &cr));
    if (rank == 0) {
        T_CHECK(cr == MPI_COMM_NULL, "create: rank 0 got a communicator");
    } else {
        int csize = 0, crank = -1;
        MPI_Comm_size(cr, &csize);
        MPI_Comm_rank(cr, &crank);
        long sum2 = 0, r1 = 1;
        TC_MPI(MPI_Allreduce(&r1, &sum2, 1, MPI_LONG, MPI_SUM, cr));
        T_CHECK(csize == size - 1 && crank == rank - 1 && sum2 == size - 1, "create: size %d rank %d sum %ld", csize, crank, sum2);
        TC_MPI(MPI_Comm_free(&cr));
    }

    /* MPI_Comm_create_group of the same group, called by its members only, tagged by
     * thread: the others' threads run other calls meanwhile. */
    if (rank != 0) {
        MPI_Comm cg;
        TC_MPI(MPI_Comm_create_group(comms[t], tail, 100 + t, &cg));
        int csize = 0, crank = -1;
        MPI_Comm_size(cg, &csize);
        MPI_Comm_rank(cg, &crank);
        long sum3 = 0, r1 = 1;
        TC_MPI(MPI_Allreduce(&r1, &sum3, 1, MPI_LONG, MPI_SUM, cg));
        T_CHECK(csize == size - 1 && crank == rank - 1 && sum3 == size - 1, "create_group: size %d rank %d sum %ld", csize, crank, sum3);
        TC_MPI(MPI_Comm_free(&cg));
    }
    MPI_Group_free(&tail);
    MPI_Group_free(&wg);

    free(sbuf);
    free(rbuf);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = -1;
    tc_name = "multiple";
    TC_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    TC_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &tc_rank));
    TC_MPI(MPI_Comm_size(MPI_COMM_WORLD, &tc_size));
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (provided != MPI_THREAD_MULTIPLE)
        tc_die("MPI_Init_thread provided %d, not MPI_THREAD_MULTIPLE", provided);
    int q = -1;
    MPI_Query_thread(&q);
    TC_CHECK(q == MPI_THREAD_MULTIPLE, "MPI_Query_thread: %d", q);

    for (int t = 0; t < NTHREADS; t++) {
        TC_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]));
        TC_MPI(MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, comms[t], &winbuf[t], &wins[t]));
        winbuf[t][0] = -1;
    }
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++)
        if (pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) != 0)
            tc_die("pthread_create failed");
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < NTHREADS; t++) {
        TC_MPI(MPI_Win_free(&wins[t]));
        TC_MPI(MPI_Comm_free(&comms[t]));
    }
    tc_errs += atomic_load(&errs);
    return tc_finalize();
}
