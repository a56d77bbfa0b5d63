/* bigxfer: verified bulk transfer from rank 0 to rank 1, for the reliability
 * tests (fault injection, route failover).  Every byte of every message is
 * checked; rank 1 prints progress lines and the longest stall between two
 * consecutive message completions (the failover time when a route goes down
 * mid-transfer).
 *
 *   bigxfer [-m MIB] [-s KIB] [-f STOPFILE] [-p MIB] [-w MS] [-r]
 *
 *   -m MIB      transfer at least this much (default 256)
 *   -s KIB      message size (default 1024)
 *   -f FILE     after -m MiB, keep going until FILE exists (the test script
 *               creates it when it has seen what it wanted: failover, fail-back)
 *   -p MIB      print a progress line every MIB received (default 32)
 *   -w MS       rank 0 pauses MS milliseconds between messages (default 0)
 *   -r          rank 1 keeps RWIN receives posted with MPI_Irecv (instead of one
 *               MPI_Recv at a time), so messages arrive into receives posted
 *               before them
 *
 * Output of rank 1 (one line each, stdout):
 *   progress MIB SECONDS
 *   done MIB SECONDS MBPS stall_ms STALL at_s WHEN
 * Ranks other than 0 and 1 only take part in the final error count.
 * ranks: 2
 */
#include "../tc.h"
#include <unistd.h>
#include <sys/time.h>

#define DATA_TAG 1
#define STOP_TAG 2
#define RWIN 4

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Word i of message k: a hash of (k, i), so a shifted, stale or foreign
 * buffer never passes. */
static void fill(uint64_t *w, size_t nw, long k)
{
    uint64_t s = mix((uint64_t)k * 0x100000001B3ull);
    for (size_t i = 0; i < nw; i++)
        w[i] = mix(s ^ i);
}

static long check(const uint64_t *w, size_t nw, long k)
{
    uint64_t s = mix((uint64_t)k * 0x100000001B3ull);
    long bad = 0;
    for (size_t i = 0; i < nw; i++)
        if (w[i] != mix(s ^ i))
            bad++;
    return bad;
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "bigxfer");
    long mib = 256, kib = 1024, every = 32, pause_ms = 0;
    int posted = 0;
    const char *stopfile = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "m:s:f:p:w:r")) != -1) {
        switch (opt) {
        case 'm': mib = atol(optarg); break;
        case 's': kib = atol(optarg); break;
        case 'f': stopfile = optarg; break;
        case 'p': every = atol(optarg); break;
        case 'w': pause_ms = atol(optarg); break;
        case 'r': posted = 1; break;
        default: tc_die("usage: bigxfer [-m MIB] [-s KIB] [-f STOPFILE] [-p MIB] [-w MS] [-r]");
        }
    }
    if (tc_size < 2)
        tc_die("needs 2 ranks");
    size_t len = (size_t)kib << 10, nw = len / 8;
    if (nw == 0)
        tc_die("message size too small");
    uint64_t *buf = tc_malloc(len);
    uint64_t *win[RWIN];
    MPI_Request wreq[RWIN];
    for (int i = 0; i < RWIN; i++)
        win[i] = posted && tc_rank == 1 ? tc_malloc(len) : NULL;
    if (posted && tc_rank == 1)
        for (int i = 0; i < RWIN; i++)
            TC_MPI(MPI_Irecv(win[i], (int)len, MPI_BYTE, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &wreq[i]));
    long want = (mib << 20) / (long)len;
    if (want < 1)
        want = 1;

    if (tc_rank == 0) {
        for (long k = 0;; k++) {
            if (k >= want && (!stopfile || access(stopfile, F_OK) == 0))
                break;
            fill(buf, nw, k);
            TC_MPI(MPI_Send(buf, (int)len, MPI_BYTE, 1, DATA_TAG, MPI_COMM_WORLD));
            if (pause_ms)
                tc_sleep_ms((int)pause_ms);
        }
        TC_MPI(MPI_Send(NULL, 0, MPI_BYTE, 1, STOP_TAG, MPI_COMM_WORLD));
    } else if (tc_rank == 1) {
        double t0 = now_s(), last = t0, stall = 0, stall_at = 0;
        long next_report = every, k = 0;
        for (;; k++) {
            MPI_Status st;
            const uint64_t *got = buf;
            if (posted) {
                /* Messages complete the receives in the order they were posted. */
                int i = (int)(k % RWIN);
                TC_MPI(MPI_Wait(&wreq[i], &st));
                got = win[i];
            } else {
                TC_MPI(MPI_Recv(buf, (int)len, MPI_BYTE, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            }
            double t = now_s();
            if (st.MPI_TAG == STOP_TAG) {
                for (int i = 1; posted && i < RWIN; i++) {
                    MPI_Request *r = &wreq[(k + i) % RWIN];
                    TC_MPI(MPI_Cancel(r));
                    TC_MPI(MPI_Wait(r, MPI_STATUS_IGNORE));
                }
                break;
            }
            int cnt = -1;
            TC_MPI(MPI_Get_count(&st, MPI_BYTE, &cnt));
            TC_CHECK(cnt == (int)len, "message %ld: %d bytes, want %zu", k, cnt, len);
            long bad = check(got, nw, k);
            TC_CHECK(bad == 0, "message %ld: %ld of %zu words wrong", k, bad, nw);
            if (t - last > stall) {
                stall = t - last;
                stall_at = last - t0;
            }
            last = t;
            if (posted)
                TC_MPI(MPI_Irecv(win[k % RWIN], (int)len, MPI_BYTE, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &wreq[k % RWIN]));
            long got_mib = (long)(((k + 1) * (long)len) >> 20);
            if (got_mib >= next_report) {
                printf("progress %ld %.3f\n", got_mib, t - t0);
                next_report += every;
            }
        }
        double dt = now_s() - t0;
        double total = (double)k * (double)len;
        printf("done %.0f %.3f %.1f stall_ms %.1f at_s %.3f\n", total / 1048576.0, dt,
               dt > 0 ? total / dt / 1e6 : 0.0, stall * 1e3, stall_at);
    }
    free(buf);
    for (int i = 0; i < RWIN; i++)
        free(win[i]);
    return tc_finalize();
}
