/* oversub: 8 ranks (on a machine with fewer cores) do all-pairs exchanges
 * with nonblocking and blocking calls, a stream of large messages that arrive
 * before their receives, then a ring; ranks that wait must yield the CPU so
 * that the job finishes in seconds. Where ranks outnumber CPUs a message above
 * the eager limit goes eagerly while the ring has room for it, and by the
 * handshake once it does not: the stream mixes both, in order.
 * ranks: 8
 * timeout: 30
 */
#include "tc.h"

static const size_t sizes[] = { 8, 4096, 262144 };
#define NS (sizeof sizes / sizeof sizes[0])

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "oversub");
    double t0 = MPI_Wtime();
    const size_t max = sizes[NS - 1];
    unsigned char *sb = tc_malloc(max * (size_t)tc_size), *rb = tc_malloc(max * (size_t)tc_size);
    MPI_Request *rq = tc_malloc(sizeof(MPI_Request) * 2 * (size_t)tc_size);

    /* All pairs at once, nonblocking. */
    for (int round = 0; round < 6; round++) {
        size_t n = sizes[round % NS];
        int k = 0;
        for (int p = 0; p < tc_size; p++)
            TC_MPI(MPI_Irecv(rb + max * (size_t)p, (int)n, MPI_BYTE, p, round, MPI_COMM_WORLD, &rq[k++]));
        for (int i = 1; i <= tc_size; i++) {
            int p = (tc_rank + i) % tc_size; /* stagger the destinations */
            tc_fill(sb + max * (size_t)p, n, tc_seed(tc_rank, p, round, 0));
            TC_MPI(MPI_Isend(sb + max * (size_t)p, (int)n, MPI_BYTE, p, round, MPI_COMM_WORLD, &rq[k++]));
        }
        TC_MPI(MPI_Waitall(k, rq, MPI_STATUSES_IGNORE));
        for (int p = 0; p < tc_size; p++)
            tc_verify(rb + max * (size_t)p, n, tc_seed(p, tc_rank, round, 0), "all-pairs round %d from %d", round, p);
    }

    /* All pairs, blocking. With a power-of-two size, step s pairs rank r
     * with r ^ s and the lower rank sends first (plain Send / Recv);
     * otherwise, and additionally, a shifted Sendrecv. */
    const int pow2 = (tc_size & (tc_size - 1)) == 0;
    for (int step = 1; step < tc_size; step++) {
        for (size_t s = 0; s < NS; s++) {
            size_t n = sizes[s];
            if (pow2) {
                int p = tc_rank ^ step;
                tc_fill(sb, n, tc_seed(tc_rank, p, 100 + step, (long)s));
                if (tc_rank < p) {
                    TC_MPI(MPI_Send(sb, (int)n, MPI_BYTE, p, 100 + step, MPI_COMM_WORLD));
                    TC_MPI(MPI_Recv(rb, (int)n, MPI_BYTE, p, 100 + step, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                } else {
                    TC_MPI(MPI_Recv(rb, (int)n, MPI_BYTE, p, 100 + step, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                    TC_MPI(MPI_Send(sb, (int)n, MPI_BYTE, p, 100 + step, MPI_COMM_WORLD));
                }
                tc_verify(rb, n, tc_seed(p, tc_rank, 100 + step, (long)s), "pairwise step %d size %zu", step, n);
            }
            int to = (tc_rank + step) % tc_size, from = (tc_rank + tc_size - step) % tc_size;
            tc_fill(sb, n, tc_seed(tc_rank, to, 150 + step, (long)s));
            TC_MPI(MPI_Sendrecv(sb, (int)n, MPI_BYTE, to, 150 + step, rb, (int)n, MPI_BYTE, from,
                                150 + step, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            tc_verify(rb, n, tc_seed(from, tc_rank, 150 + step, (long)s), "shift step %d size %zu", step, n);
        }
    }

    /* A window of large messages to the right neighbour, sent before the
     * neighbour posts its receives (they arrive unexpected); more than the ring
     * holds, of sizes around the eager limits, with one tag so that only their
     * order matches them. */
    {
        enum { W = 48 };
        static const size_t stream[] = { 20000, 65536, 40000, 65536, 16384, 70000 };
        const int right = (tc_rank + 1) % tc_size, left = (tc_rank + tc_size - 1) % tc_size;
        const size_t ns = sizeof stream / sizeof stream[0];
        unsigned char *ssb = tc_malloc(70000 * (size_t)W), *srb = tc_malloc(70000 * (size_t)W);
        MPI_Request *srq = tc_malloc(sizeof(MPI_Request) * 2 * W);
        for (int w = 0; w < W; w++) {
            size_t n = stream[w % ns];
            tc_fill(ssb + 70000 * (size_t)w, n, tc_seed(tc_rank, right, 300, w));
            TC_MPI(MPI_Isend(ssb + 70000 * (size_t)w, (int)n, MPI_BYTE, right, 300, MPI_COMM_WORLD, &srq[w]));
        }
        TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (int w = 0; w < W; w++)
            TC_MPI(MPI_Irecv(srb + 70000 * (size_t)w, (int)stream[w % ns], MPI_BYTE, left, 300, MPI_COMM_WORLD, &srq[W + w]));
        TC_MPI(MPI_Waitall(2 * W, srq, MPI_STATUSES_IGNORE));
        for (int w = 0; w < W; w++)
            tc_verify(srb + 70000 * (size_t)w, stream[w % ns], tc_seed(left, tc_rank, 300, w), "stream message %d", w);
        free(ssb);
        free(srb);
        free(srq);
    }

    /* Token ring, many laps: each hop needs the previous rank to run. */
    {
        const int right = (tc_rank + 1) % tc_size, left = (tc_rank + tc_size - 1) % tc_size;
        long token = 0;
        for (int lap = 0; lap < 50; lap++) {
            if (tc_rank == 0) {
                token = lap * 1000L;
                TC_MPI(MPI_Send(&token, 1, MPI_LONG, right, 200, MPI_COMM_WORLD));
                TC_MPI(MPI_Recv(&token, 1, MPI_LONG, left, 200, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                TC_CHECK(token == lap * 1000L + tc_size - 1, "lap %d: token %ld", lap, token);
            } else {
                TC_MPI(MPI_Recv(&token, 1, MPI_LONG, left, 200, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                TC_CHECK(token == lap * 1000L + tc_rank - 1, "lap %d: token %ld", lap, token);
                token++;
                TC_MPI(MPI_Send(&token, 1, MPI_LONG, right, 200, MPI_COMM_WORLD));
            }
        }
    }
    double dt = MPI_Wtime() - t0;
    TC_CHECK(dt < 20.0, "took %.1f s; waiting ranks do not yield the CPU?", dt);
    if (tc_rank == 0)
        printf("oversub: %d ranks, %.2f s\n", tc_size, dt);
    free(sb);
    free(rb);
    free(rq);
    return tc_finalize();
}
