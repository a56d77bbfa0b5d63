/* waitany: floods of nonblocking requests between all pairs, completed
 * with Waitany, Waitsome, Testany, Testsome and Testall; each index must be
 * reported exactly once with the right status, and the degenerate cases
 * (all requests null, count 0) must give MPI_UNDEFINED / flag = true.
 * ranks: 2 4
 * timeout: 60
 */
#include "tc.h"

#define PER_PEER 32

static size_t size_of(int k) { static const size_t s[] = { 8, 0, 1500, 70000, 33 }; return s[k % 5]; }

enum { USE_WAITANY, USE_WAITSOME, USE_TESTANY, USE_TESTSOME, USE_TESTALL, NMETHODS };
static const char *mname[] = { "Waitany", "Waitsome", "Testany", "Testsome", "Testall" };

/* Completes all n requests with the given method; marks done[idx]. */
static void complete_all(int method, int n, MPI_Request *rq, MPI_Status *st_out)
{
    int left = n;
    int *idx = tc_malloc(sizeof(int) * (size_t)n);
    MPI_Status *sts = tc_malloc(sizeof(MPI_Status) * (size_t)n);
    unsigned char *done = calloc((size_t)n, 1);
    long spins = 0;
    while (left > 0) {
        int outcount = 0, flag = 0, index = -1;
        switch (method) {
        case USE_WAITANY:
            TC_MPI(MPI_Waitany(n, rq, &index, &sts[0]));
            if (index == MPI_UNDEFINED) { TC_ERR("Waitany: MPI_UNDEFINED with %d active", left); goto out; }
            idx[0] = index; outcount = 1;
            break;
        case USE_WAITSOME:
            TC_MPI(MPI_Waitsome(n, rq, &outcount, idx, sts));
            if (outcount == MPI_UNDEFINED || outcount < 1) { TC_ERR("Waitsome: outcount %d with %d active", outcount, left); goto out; }
            break;
        case USE_TESTANY:
            TC_MPI(MPI_Testany(n, rq, &index, &flag, &sts[0]));
            if (flag) {
                if (index == MPI_UNDEFINED) { TC_ERR("Testany: flag with MPI_UNDEFINED, %d active", left); goto out; }
                idx[0] = index; outcount = 1;
            } else if (index != MPI_UNDEFINED) {
                TC_ERR("Testany: flag false but index %d", index);
            }
            break;
        case USE_TESTSOME:
            TC_MPI(MPI_Testsome(n, rq, &outcount, idx, sts));
            if (outcount == MPI_UNDEFINED) { TC_ERR("Testsome: MPI_UNDEFINED with %d active", left); goto out; }
            break;
        case USE_TESTALL:
            TC_MPI(MPI_Testall(n, rq, &flag, sts));
            if (flag) {
                for (int i = 0; i < n; i++) {
                    if (!done[i]) { idx[outcount] = i; sts[outcount] = sts[i]; outcount++; }
                }
                /* sts[i] was already placed at position outcount <= i */
            }
            break;
        }
        for (int k = 0; k < outcount; k++) {
            int i = idx[k];
            if (i < 0 || i >= n) { TC_ERR("%s: index %d out of range", mname[method], i); goto out; }
            if (done[i]) { TC_ERR("%s: index %d completed twice", mname[method], i); continue; }
            if (method != USE_TESTALL && rq[i] != MPI_REQUEST_NULL)
                TC_ERR("%s: completed request %d not set to MPI_REQUEST_NULL", mname[method], i);
            done[i] = 1;
            st_out[i] = sts[k];
            left--;
        }
        if (method == USE_TESTALL && flag) {
            for (int i = 0; i < n; i++)
                if (rq[i] != MPI_REQUEST_NULL)
                    TC_ERR("Testall: request %d not freed", i);
        }
        if (++spins > 200000000L)
            tc_die("%s: no progress", mname[method]);
    }
out:
    free(idx);
    free(sts);
    free(done);
}

static void degenerate(void)
{
    MPI_Request rq[3] = { MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL };
    MPI_Status st;
    int index = 5, flag = 0, outcount = 5, idx[3];
    TC_MPI(MPI_Waitany(3, rq, &index, &st));
    TC_CHECK(index == MPI_UNDEFINED, "Waitany on null requests: index %d", index);
    index = 5;
    TC_MPI(MPI_Testany(3, rq, &index, &flag, &st));
    TC_CHECK(flag && index == MPI_UNDEFINED, "Testany on null requests: flag %d index %d", flag, index);
    TC_MPI(MPI_Waitsome(3, rq, &outcount, idx, MPI_STATUSES_IGNORE));
    TC_CHECK(outcount == MPI_UNDEFINED, "Waitsome on null requests: outcount %d", outcount);
    outcount = 5;
    TC_MPI(MPI_Testsome(3, rq, &outcount, idx, MPI_STATUSES_IGNORE));
    TC_CHECK(outcount == MPI_UNDEFINED, "Testsome on null requests: outcount %d", outcount);
    flag = 0;
    TC_MPI(MPI_Testall(3, rq, &flag, MPI_STATUSES_IGNORE));
    TC_CHECK(flag, "Testall on null requests: flag %d", flag);
    TC_MPI(MPI_Waitall(3, rq, MPI_STATUSES_IGNORE));
    TC_MPI(MPI_Waitall(0, NULL, MPI_STATUSES_IGNORE));
    index = 5;
    TC_MPI(MPI_Waitany(0, NULL, &index, MPI_STATUS_IGNORE));
    TC_CHECK(index == MPI_UNDEFINED, "Waitany count 0: index %d", index);
    flag = 0;
    TC_MPI(MPI_Testall(0, NULL, &flag, MPI_STATUSES_IGNORE));
    TC_CHECK(flag, "Testall count 0: flag %d", flag);
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "waitany");
    degenerate();
    const int npeer = tc_size - 1;
    const int n = npeer * PER_PEER;
    const size_t slot = 70000;
    unsigned char *sbuf = tc_malloc(slot * (size_t)(n ? n : 1));
    unsigned char *rbuf = tc_malloc(slot * (size_t)(n ? n : 1));
    MPI_Request *rrq = tc_malloc(sizeof(MPI_Request) * (size_t)(n + 1));
    MPI_Request *srq = tc_malloc(sizeof(MPI_Request) * (size_t)(n + 1));
    MPI_Status *rst = tc_malloc(sizeof(MPI_Status) * (size_t)(n + 1));
    MPI_Status *sst = tc_malloc(sizeof(MPI_Status) * (size_t)(n + 1));

    for (int round = 0; round < 2 * NMETHODS; round++) {
        int rmethod = round % NMETHODS, smethod = (round + 2) % NMETHODS;
        /* Request i: peer p = i / PER_PEER (skipping self), k = i % PER_PEER,
         * tag = k so the matching order within a peer is checkable. */
        for (int i = 0; i < n; i++) {
            int p = i / PER_PEER, k = i % PER_PEER;
            int peer = p >= tc_rank ? p + 1 : p;
            TC_MPI(MPI_Irecv(rbuf + slot * (size_t)i, (int)slot, MPI_BYTE, peer, k,
                             MPI_COMM_WORLD, &rrq[i]));
        }
        for (int i = 0; i < n; i++) {
            int p = i / PER_PEER, k = i % PER_PEER;
            int peer = p >= tc_rank ? p + 1 : p;
            size_t sz = size_of(k + round);
            tc_fill(sbuf + slot * (size_t)i, sz, tc_seed(tc_rank, peer, k, round));
            TC_MPI(MPI_Isend(sbuf + slot * (size_t)i, (int)sz, MPI_BYTE, peer, k,
                             MPI_COMM_WORLD, &srq[i]));
        }
        complete_all(rmethod, n, rrq, rst);
        complete_all(smethod, n, srq, sst);
        for (int i = 0; i < n; i++) {
            int p = i / PER_PEER, k = i % PER_PEER;
            int peer = p >= tc_rank ? p + 1 : p;
            size_t sz = size_of(k + round);
            int cnt = -1;
            TC_CHECK(rst[i].MPI_SOURCE == peer && rst[i].MPI_TAG == k,
                     "%s req %d: source %d tag %d, want %d %d", mname[rmethod], i,
                     rst[i].MPI_SOURCE, rst[i].MPI_TAG, peer, k);
            TC_MPI(MPI_Get_count(&rst[i], MPI_BYTE, &cnt));
            if (cnt != (int)sz)
                TC_ERR("%s req %d: count %d want %zu", mname[rmethod], i, cnt, sz);
            else
                tc_verify(rbuf + slot * (size_t)i, sz, tc_seed(peer, tc_rank, k, round),
                          "%s req %d round %d", mname[rmethod], i, round);
        }
        tc_sync(MPI_COMM_WORLD);
    }
    free(sbuf); free(rbuf); free(rrq); free(srq); free(rst); free(sst);
    return tc_finalize();
}
