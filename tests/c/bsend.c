/* bsend: buffered sends.  MPI_Bsend / MPI_Ibsend complete locally while the
 * receiver is not receiving; the user buffer can be reused as soon as the
 * call returns; MPI_Buffer_detach returns the attached buffer and blocks
 * until every buffered message has been transmitted, so scribbling over
 * the detached buffer must not corrupt what the receiver gets.
 * ranks: 2
 * timeout: 60
 */
#include "tc.h"

static const int sizes[] = { 0, 10, 4096, 100000, 1 << 20, 3 };
#define NS ((int)(sizeof sizes / sizeof sizes[0]))
#define GO_TAG 50

static void round_trip(int round, int use_ibsend)
{
    if (tc_rank == 0) {
        int total = 0, ps;
        for (int i = 0; i < NS; i++) {
            TC_MPI(MPI_Pack_size(sizes[i], MPI_BYTE, MPI_COMM_WORLD, &ps));
            total += ps + MPI_BSEND_OVERHEAD;
        }
        char *attach = tc_malloc((size_t)total);
        unsigned char *src = tc_malloc(1 << 20);
        TC_MPI(MPI_Buffer_attach(attach, total));
        for (int i = 0; i < NS; i++) {
            tc_fill(src, (size_t)sizes[i], tc_seed(0, 1, i, round));
            if (use_ibsend) {
                MPI_Request rq;
                int flag = 0;
                TC_MPI(MPI_Ibsend(src, sizes[i], MPI_BYTE, 1, i, MPI_COMM_WORLD, &rq));
                /* A buffered send completes locally. */
                TC_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
                (void)flag;
            } else {
                TC_MPI(MPI_Bsend(src, sizes[i], MPI_BYTE, 1, i, MPI_COMM_WORLD));
            }
            /* The data now lives in the attached buffer: reuse ours. */
            memset(src, 0xFF, (size_t)sizes[i]);
        }
        /* Only now may the receiver start: the Bsends above must not have
         * waited for it. */
        int go = 1;
        TC_MPI(MPI_Send(&go, 1, MPI_INT, 1, GO_TAG, MPI_COMM_WORLD));
        void *det = NULL;
        int detsize = 0;
        TC_MPI(MPI_Buffer_detach(&det, &detsize));
        TC_CHECK(det == attach && detsize == total, "detach returned %p/%d, attached %p/%d",
                 det, detsize, (void *)attach, total);
        /* Detach waited for the transmissions; the buffer is ours again. */
        memset(attach, 0xEE, (size_t)total);
        free(attach);
        free(src);
    } else {
        int go;
        unsigned char *buf = tc_malloc(1 << 20);
        TC_MPI(MPI_Recv(&go, 1, MPI_INT, 0, GO_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        tc_sleep_ms(200); /* rank 0 sits in Buffer_detach meanwhile */
        for (int i = NS - 1; i >= 0; i--) { /* reverse order: matched by tag */
            MPI_Status st;
            int cnt = -1;
            memset(buf, 0, (size_t)sizes[i]);
            TC_MPI(MPI_Recv(buf, 1 << 20, MPI_BYTE, 0, i, MPI_COMM_WORLD, &st));
            TC_MPI(MPI_Get_count(&st, MPI_BYTE, &cnt));
            TC_CHECK(cnt == sizes[i], "round %d msg %d: count %d want %d", round, i, cnt, sizes[i]);
            tc_verify(buf, (size_t)sizes[i], tc_seed(0, 1, i, round), "round %d msg %d", round, i);
        }
        free(buf);
    }
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "bsend");
    if (tc_size != 2)
        tc_die("needs exactly 2 ranks");
    for (int round = 0; round < 4; round++) {
        round_trip(round, round % 2);
        tc_sync(MPI_COMM_WORLD);
    }
    /* Bsend to MPI_PROC_NULL needs no buffer and succeeds. */
    TC_MPI(MPI_Bsend("x", 1, MPI_CHAR, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    return tc_finalize();
}
