/* probe: Probe / Iprobe / Mprobe / Improbe / Mrecv / Imrecv.  Every rank > 0
 * sends a batch to rank 0 (sizes from 0 B to 1 MiB so probes see both eager
 * and rendezvous messages); rank 0 learns each size by probing before it
 * allocates the receive buffer.  Matched probes must hand back exactly the
 * probed message even when another receive could match it, and
 * MPI_PROC_NULL gives MPI_MESSAGE_NO_PROC.
 * ranks: 2 4
 * timeout: 60
 */
#include "tc.h"

#define NMSG 24

static size_t size_of(int src, int i)
{
    static const size_t s[] = { 0, 1, 13, 1024, 65536, 1048576, 4000, 100 };
    return s[(i + src) % 8];
}

static void send_batch(int phase)
{
    unsigned char *buf = tc_malloc(1 << 20);
    for (int i = 0; i < NMSG; i++) {
        size_t n = size_of(tc_rank, i);
        tc_fill(buf, n, tc_seed(tc_rank, 0, i, phase));
        TC_MPI(MPI_Send(buf, (int)n, MPI_BYTE, 0, i, MPI_COMM_WORLD));
    }
    free(buf);
    /* Rank 0 probes with wildcards: send nothing else until it is done. */
    int ack;
    TC_MPI(MPI_Recv(&ack, 1, MPI_INT, 0, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
}

/* Checks a probed status against the message it must describe and
 * returns its size. */
static int probed(const MPI_Status *st, const int *next, const char *how)
{
    int cnt = -1, src = st->MPI_SOURCE;
    if (src < 1 || src >= tc_size)
        tc_die("%s: source %d", how, src);
    TC_MPI(MPI_Get_count(st, MPI_BYTE, &cnt));
    TC_CHECK(st->MPI_TAG == next[src], "%s: from %d tag %d, expected %d (order)", how, src,
             st->MPI_TAG, next[src]);
    TC_CHECK(cnt == (int)size_of(src, st->MPI_TAG), "%s: from %d tag %d count %d, expected %zu",
             how, src, st->MPI_TAG, cnt, size_of(src, st->MPI_TAG));
    return cnt;
}

static void recv_batch(int phase)
{
    const int total = NMSG * (tc_size - 1);
    int next[64] = { 0 };
    for (int m = 0; m < total; m++) {
        MPI_Status st, st2;
        MPI_Message msg = MPI_MESSAGE_NULL;
        MPI_Request rq;
        int flag = 0, cnt, how = (m + phase) % 4;
        const char *hname[] = { "Probe", "Iprobe", "Mprobe", "Improbe" };
        switch (how) {
        case 0: TC_MPI(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st)); break;
        case 1:
            while (!flag)
                TC_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
            break;
        case 2: TC_MPI(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st)); break;
        case 3:
            while (!flag)
                TC_MPI(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg, &st));
            TC_CHECK(msg != MPI_MESSAGE_NULL, "Improbe: flag set but no message");
            break;
        }
        cnt = probed(&st, next, hname[how]);
        int src = st.MPI_SOURCE, tag = st.MPI_TAG;
        unsigned char *buf = tc_malloc((size_t)cnt);
        if (how < 2) {
            /* A second probe for the same source must see the same message. */
            TC_MPI(MPI_Probe(src, MPI_ANY_TAG, MPI_COMM_WORLD, &st2));
            TC_CHECK(st2.MPI_TAG == tag, "re-probe saw tag %d, first probe %d", st2.MPI_TAG, tag);
            TC_MPI(MPI_Recv(buf, cnt, MPI_BYTE, src, tag, MPI_COMM_WORLD, &st2));
        } else {
            /* Once matched, the message is out of the queue: a probe for the
             * same (source, tag) must not see it again. */
            int f2 = 1;
            TC_MPI(MPI_Iprobe(src, tag, MPI_COMM_WORLD, &f2, MPI_STATUS_IGNORE));
            TC_CHECK(!f2, "%s: matched message still visible to Iprobe", hname[how]);
            if (m % 2)
                TC_MPI(MPI_Mrecv(buf, cnt, MPI_BYTE, &msg, &st2));
            else {
                TC_MPI(MPI_Imrecv(buf, cnt, MPI_BYTE, &msg, &rq));
                TC_MPI(MPI_Wait(&rq, &st2));
            }
            TC_CHECK(msg == MPI_MESSAGE_NULL, "%s: message handle not reset after receive", hname[how]);
        }
        int cnt2 = -1;
        TC_MPI(MPI_Get_count(&st2, MPI_BYTE, &cnt2));
        TC_CHECK(st2.MPI_SOURCE == src && st2.MPI_TAG == tag && cnt2 == cnt,
                 "%s: receive status (%d,%d,%d) differs from probe (%d,%d,%d)", hname[how],
                 st2.MPI_SOURCE, st2.MPI_TAG, cnt2, src, tag, cnt);
        tc_verify(buf, (size_t)cnt, tc_seed(src, 0, tag, phase), "%s from %d tag %d", hname[how], src, tag);
        free(buf);
        next[src]++;
    }
    /* Everything has been received: nothing may be left to probe. */
    int flag = 1;
    MPI_Message msg;
    TC_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
    TC_CHECK(!flag, "Iprobe found a message after all were received");
    flag = 1;
    TC_MPI(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg, MPI_STATUS_IGNORE));
    TC_CHECK(!flag, "Improbe found a message after all were received");
    for (int src = 1; src < tc_size; src++)
        TC_MPI(MPI_Send(&flag, 1, MPI_INT, src, 999, MPI_COMM_WORLD));
}

static void proc_null_probes(void)
{
    MPI_Status st;
    MPI_Message msg = MPI_MESSAGE_NULL;
    int flag = 0, cnt = -1;
    char c = 'x';
    TC_MPI(MPI_Probe(MPI_PROC_NULL, 4, MPI_COMM_WORLD, &st));
    TC_CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG,
             "Probe(PROC_NULL): source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
    TC_MPI(MPI_Iprobe(MPI_PROC_NULL, 4, MPI_COMM_WORLD, &flag, &st));
    TC_CHECK(flag && st.MPI_SOURCE == MPI_PROC_NULL, "Iprobe(PROC_NULL): flag %d source %d", flag, st.MPI_SOURCE);
    TC_MPI(MPI_Mprobe(MPI_PROC_NULL, 4, MPI_COMM_WORLD, &msg, &st));
    TC_CHECK(msg == MPI_MESSAGE_NO_PROC, "Mprobe(PROC_NULL): message is not MPI_MESSAGE_NO_PROC");
    TC_MPI(MPI_Mrecv(&c, 1, MPI_CHAR, &msg, &st));
    TC_MPI(MPI_Get_count(&st, MPI_CHAR, &cnt));
    TC_CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && cnt == 0 && c == 'x',
             "Mrecv(NO_PROC): source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, cnt);
    TC_CHECK(msg == MPI_MESSAGE_NULL, "Mrecv(NO_PROC) did not reset the handle");
    flag = 0;
    TC_MPI(MPI_Improbe(MPI_PROC_NULL, 4, MPI_COMM_WORLD, &flag, &msg, &st));
    TC_CHECK(flag && msg == MPI_MESSAGE_NO_PROC, "Improbe(PROC_NULL): flag %d", flag);
    MPI_Request rq;
    TC_MPI(MPI_Imrecv(&c, 1, MPI_CHAR, &msg, &rq));
    TC_MPI(MPI_Wait(&rq, &st));
    TC_CHECK(st.MPI_SOURCE == MPI_PROC_NULL && c == 'x', "Imrecv(NO_PROC): source %d", st.MPI_SOURCE);
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "probe");
    if (tc_size > 64)
        tc_die("at most 64 ranks");
    proc_null_probes();
    for (int phase = 0; phase < 4; phase++) {
        if (tc_rank == 0)
            recv_batch(phase);
        else
            send_batch(phase);
    }
    return tc_finalize();
}
