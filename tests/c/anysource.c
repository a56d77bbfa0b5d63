/* anysource: every rank > 0 floods rank 0, which receives with
 * MPI_ANY_SOURCE / MPI_ANY_TAG (unexpected queue), by specific tag in
 * reverse tag order (searching the unexpected queue), and with wildcard
 * receives posted before the senders start (posted queue).  Per sender,
 * the matching order must follow the send order (non-overtaking).
 * ranks: 2 4 8
 * timeout: 60
 */
#include "tc.h"

#define NMSG 120
#define NTAG 5
#define GO_TAG 100
#define ACK_TAG 101

static size_t msg_size(int src, int seq)
{
    static const size_t s[] = { 0, 4, 100, 2000, 40000, 3, 17 };
    if (seq % 29 == 28)
        return 300000 + (size_t)src; /* an occasional rendezvous-size message */
    return s[(seq + src) % 7];
}

static int msg_tag(int src, int seq) { return (seq * 7 + src) % NTAG; }

static void sender(int phase)
{
    /* Phase 1 receives by tag out of send order, so a blocking send of a
     * large message could wait forever for its receive: use Isend there
     * (and in phase 2), blocking Send in phase 0. */
    size_t max = 300000 + (size_t)tc_size;
    unsigned char *buf = tc_malloc(max * NMSG);
    MPI_Request rq[NMSG];
    int go;
    if (phase == 2)
        TC_MPI(MPI_Recv(&go, 1, MPI_INT, 0, GO_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (int seq = 0; seq < NMSG; seq++) {
        size_t n = msg_size(tc_rank, seq);
        int tag = msg_tag(tc_rank, seq);
        unsigned char *b = buf + max * (size_t)seq;
        tc_fill(b, n, tc_seed(tc_rank, 0, tag, seq + phase * 1000));
        if (phase == 0) {
            TC_MPI(MPI_Send(b, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD));
            rq[seq] = MPI_REQUEST_NULL;
        } else {
            TC_MPI(MPI_Isend(b, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &rq[seq]));
        }
    }
    TC_MPI(MPI_Waitall(NMSG, rq, MPI_STATUSES_IGNORE));
    free(buf);
    /* Wait until rank 0 has everything: only then may this rank send
     * anything else to rank 0 that a wildcard receive could match. */
    TC_MPI(MPI_Recv(&go, 1, MPI_INT, 0, ACK_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
}

static void ack_all(void)
{
    int ack = 1;
    for (int src = 1; src < tc_size; src++)
        TC_MPI(MPI_Send(&ack, 1, MPI_INT, src, ACK_TAG, MPI_COMM_WORLD));
}

/* got[src][seq] marks received messages; find_seq() identifies which
 * message arrived: it must be the first not-yet-received message from src
 * that the receive could match. */
static unsigned char got[8][NMSG];

static int find_seq(int src, int tag_wanted)
{
    for (int seq = 0; seq < NMSG; seq++)
        if (!got[src][seq] && (tag_wanted == MPI_ANY_TAG || msg_tag(src, seq) == tag_wanted))
            return seq;
    return -1;
}

static void check_msg(const unsigned char *buf, const MPI_Status *st, int tag_wanted, int phase)
{
    int src = st->MPI_SOURCE, tag = st->MPI_TAG, cnt = -1;
    if (src < 1 || src >= tc_size) {
        TC_ERR("phase %d: status source %d out of range", phase, src);
        return;
    }
    if (tag_wanted != MPI_ANY_TAG && tag != tag_wanted)
        TC_ERR("phase %d: asked tag %d got tag %d", phase, tag_wanted, tag);
    int seq = find_seq(src, tag_wanted);
    if (seq < 0) {
        TC_ERR("phase %d: unexpected extra message from %d tag %d", phase, src, tag);
        return;
    }
    got[src][seq] = 1;
    TC_MPI(MPI_Get_count(st, MPI_BYTE, &cnt));
    TC_CHECK(tag == msg_tag(src, seq), "phase %d: from %d seq %d: tag %d, expected %d "
             "(message order broken)", phase, src, seq, tag, msg_tag(src, seq));
    TC_CHECK(cnt == (int)msg_size(src, seq), "phase %d: from %d seq %d: count %d, expected %zu",
             phase, src, seq, cnt, msg_size(src, seq));
    if (cnt == (int)msg_size(src, seq))
        tc_verify(buf, (size_t)cnt, tc_seed(src, 0, tag, seq + phase * 1000),
                  "phase %d from %d seq %d", phase, src, seq);
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "anysource");
    if (tc_size > 8)
        tc_die("at most 8 ranks");
    const size_t max = 300000 + (size_t)tc_size;
    const int total = NMSG * (tc_size - 1);

    /* Phase 0: all wildcards, received after the senders flooded. */
    if (tc_rank == 0) {
        unsigned char *buf = tc_malloc(max);
        memset(got, 0, sizeof got);
        tc_sleep_ms(50);
        for (int i = 0; i < total; i++) {
            MPI_Status st;
            TC_MPI(MPI_Recv(buf, (int)max, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            check_msg(buf, &st, MPI_ANY_TAG, 0);
        }
        free(buf);
        ack_all();
    } else {
        sender(0);
    }

    /* Phase 1: by tag, highest tag first, so matches come from deep in the
     * unexpected queue. */
    if (tc_rank == 0) {
        unsigned char *buf = tc_malloc(max);
        memset(got, 0, sizeof got);
        tc_sleep_ms(50);
        for (int tag = NTAG - 1; tag >= 0; tag--) {
            int n = 0;
            for (int src = 1; src < tc_size; src++)
                for (int seq = 0; seq < NMSG; seq++)
                    n += msg_tag(src, seq) == tag;
            for (int i = 0; i < n; i++) {
                MPI_Status st;
                TC_MPI(MPI_Recv(buf, (int)max, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st));
                check_msg(buf, &st, tag, 1);
            }
        }
        free(buf);
        ack_all();
    } else {
        sender(1);
    }

    /* Phase 2: all wildcard receives are posted first, then the senders
     * are released. Requests are matched in posting order. */
    if (tc_rank == 0) {
        unsigned char *bufs = tc_malloc(max * (size_t)total);
        MPI_Request *rq = tc_malloc(sizeof(MPI_Request) * (size_t)total);
        MPI_Status *st = tc_malloc(sizeof(MPI_Status) * (size_t)total);
        memset(got, 0, sizeof got);
        for (int i = 0; i < total; i++)
            TC_MPI(MPI_Irecv(bufs + max * (size_t)i, (int)max, MPI_BYTE, MPI_ANY_SOURCE,
                             MPI_ANY_TAG, MPI_COMM_WORLD, &rq[i]));
        for (int src = 1; src < tc_size; src++) {
            int go = 1;
            TC_MPI(MPI_Send(&go, 1, MPI_INT, src, GO_TAG, MPI_COMM_WORLD));
        }
        TC_MPI(MPI_Waitall(total, rq, st));
        for (int i = 0; i < total; i++)
            check_msg(bufs + max * (size_t)i, &st[i], MPI_ANY_TAG, 2);
        free(bufs);
        free(rq);
        free(st);
        ack_all();
    } else {
        sender(2);
    }
    return tc_finalize();
}
