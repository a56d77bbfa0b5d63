/* order: non-overtaking.  Rank 0 sends a long sequence of messages with
 * the same (source, tag, communicator) whose sizes jump across the
 * eager/rendezvous thresholds (1 KiB, 64 KiB, 1 MiB interleaved with tiny
 * ones), mixing send modes; rank 1 must receive them in send order whether
 * its receives were posted before (posted queue), after (unexpected queue)
 * or half and half.  A second round interleaves two tags and receives one
 * tag at a time, then with MPI_ANY_TAG.
 * ranks: 2
 * timeout: 90
 */
#include "tc.h"

#define K 48
#define MAXSZ ((size_t)1 << 20)
#define GO_TAG 77

static size_t size_of(int i)
{
    static const size_t s[] = { 1024, 65536, 1048576, 0, 1, 65535, 200000, 8, 1048576, 1024, 16, 65536 };
    return s[i % 12];
}

/* Send i with a mode that depends on i and the round. */
static void send_one(unsigned char *buf, int i, int tag, int round, int blocking_ok, MPI_Request *rq)
{
    size_t n = size_of(i);
    tc_fill(buf, n, tc_seed(0, 1, tag, i + round * 1000));
    switch ((i + round) % 4 + (blocking_ok ? 0 : 1)) {
    case 0: TC_MPI(MPI_Send(buf, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD)); *rq = MPI_REQUEST_NULL; break;
    case 1: TC_MPI(MPI_Isend(buf, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD, rq)); break;
    case 2: TC_MPI(MPI_Issend(buf, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD, rq)); break;
    default: TC_MPI(MPI_Isend(buf, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD, rq)); break;
    }
}

static void check_one(const unsigned char *buf, const MPI_Status *st, int i, int tag, int round)
{
    int cnt = -1;
    TC_MPI(MPI_Get_count(st, MPI_BYTE, &cnt));
    TC_CHECK(st->MPI_TAG == tag, "round %d msg %d: tag %d, want %d", round, i, st->MPI_TAG, tag);
    if (cnt != (int)size_of(i)) {
        TC_ERR("round %d msg %d: count %d, want %zu (overtaken?)", round, i, cnt, size_of(i));
        return;
    }
    tc_verify(buf, (size_t)cnt, tc_seed(0, 1, tag, i + round * 1000), "round %d msg %d", round, i);
}

/* mode 0: receiver late (unexpected queue); 1: all posted first; 2: half. */
static void round_same_tag(unsigned char *sbufs, unsigned char *rbufs, int mode)
{
    const int tag = 3;
    MPI_Request rq[K];
    MPI_Status st[K];
    if (tc_rank == 0) {
        int go;
        if (mode != 0)
            TC_MPI(MPI_Recv(&go, 1, MPI_INT, 1, GO_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < K; i++)
            send_one(sbufs + MAXSZ * (size_t)i, i, tag, mode, 1, &rq[i]);
        TC_MPI(MPI_Waitall(K, rq, MPI_STATUSES_IGNORE));
    } else {
        int go = 1, npost = mode == 0 ? 0 : mode == 1 ? K : K / 2;
        for (int i = 0; i < npost; i++)
            TC_MPI(MPI_Irecv(rbufs + MAXSZ * (size_t)i, (int)MAXSZ, MPI_BYTE, 0, tag,
                             MPI_COMM_WORLD, &rq[i]));
        if (mode != 0)
            TC_MPI(MPI_Send(&go, 1, MPI_INT, 0, GO_TAG, MPI_COMM_WORLD));
        else
            tc_sleep_ms(100); /* let eager messages pile up unexpected */
        for (int i = npost; i < K; i++) {
            if (i % 2)
                TC_MPI(MPI_Recv(rbufs + MAXSZ * (size_t)i, (int)MAXSZ, MPI_BYTE, 0, tag,
                                MPI_COMM_WORLD, &st[i]));
            else {
                TC_MPI(MPI_Irecv(rbufs + MAXSZ * (size_t)i, (int)MAXSZ, MPI_BYTE, 0, tag,
                                 MPI_COMM_WORLD, &rq[i]));
                TC_MPI(MPI_Wait(&rq[i], &st[i]));
            }
        }
        if (npost)
            TC_MPI(MPI_Waitall(npost, rq, st));
        for (int i = 0; i < K; i++)
            check_one(rbufs + MAXSZ * (size_t)i, &st[i], i, tag, mode);
    }
}

/* Two tags interleaved; rank 1 drains tag 11 first, then tag 12 with
 * MPI_ANY_TAG (only tag-12 messages remain), each in send order. */
static void round_two_tags(unsigned char *sbufs, unsigned char *rbufs)
{
    const int round = 7;
    MPI_Request rq[K];
    MPI_Status st;
    if (tc_rank == 0) {
        for (int i = 0; i < K; i++)
            send_one(sbufs + MAXSZ * (size_t)i, i, 11 + (i % 2), round, 0, &rq[i]);
        TC_MPI(MPI_Waitall(K, rq, MPI_STATUSES_IGNORE));
    } else {
        tc_sleep_ms(50);
        for (int i = 0; i < K; i += 2) {
            TC_MPI(MPI_Recv(rbufs, (int)MAXSZ, MPI_BYTE, 0, 11, MPI_COMM_WORLD, &st));
            check_one(rbufs, &st, i, 11, round);
        }
        for (int i = 1; i < K; i += 2) {
            TC_MPI(MPI_Recv(rbufs, (int)MAXSZ, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            TC_CHECK(st.MPI_SOURCE == 0, "source %d", st.MPI_SOURCE);
            check_one(rbufs, &st, i, 12, round);
        }
    }
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "order");
    if (tc_size != 2)
        tc_die("needs exactly 2 ranks");
    /* Isend buffers must stay intact until completion, so one per message. */
    unsigned char *bufs = tc_malloc(MAXSZ * K);
    for (int mode = 0; mode < 3; mode++) {
        round_same_tag(bufs, bufs, mode);
        tc_sync(MPI_COMM_WORLD);
    }
    round_two_tags(bufs, bufs);
    free(bufs);
    return tc_finalize();
}
