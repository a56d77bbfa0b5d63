/* cancel: cancelling a posted receive that nothing matches succeeds
 * (MPI_Test_cancelled true, buffer untouched, Wait returns); cancelling a
 * receive that may already have matched either cancels it (and the message
 * is then still receivable) or lets it complete with the full data.
 * ranks: 1 2
 * timeout: 60
 */
#include "tc.h"

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "cancel");
    const int peer = tc_size > 1 ? 1 - (tc_rank % 2) : 0;

    /* Unmatched receives: specific source, any source, any tag. */
    for (int k = 0; k < 3; k++) {
        char buf[64];
        MPI_Request rq;
        MPI_Status st;
        int flag = 0;
        memset(buf, 0x33, sizeof buf);
        /* Nothing is ever sent that these could match: tag 4242 is unused,
         * and with MPI_ANY_TAG the source is oneself (the peer's later
         * synchronisation messages must not be caught). */
        int src = k == 1 ? MPI_ANY_SOURCE : k == 2 ? tc_rank : peer;
        int tag = k == 2 ? MPI_ANY_TAG : 4242;
        if (tc_rank >= 2)
            break;
        TC_MPI(MPI_Irecv(buf, 64, MPI_CHAR, src, tag, MPI_COMM_WORLD, &rq));
        TC_MPI(MPI_Cancel(&rq));
        if (k == 2) {
            /* Completion via Test loop rather than Wait. */
            while (!flag)
                TC_MPI(MPI_Test(&rq, &flag, &st));
        } else {
            TC_MPI(MPI_Wait(&rq, &st));
        }
        TC_CHECK(rq == MPI_REQUEST_NULL, "cancelled request not freed");
        flag = 0;
        TC_MPI(MPI_Test_cancelled(&st, &flag));
        TC_CHECK(flag, "case %d: unmatched receive was not cancelled", k);
        for (size_t i = 0; i < sizeof buf; i++)
            if (buf[i] != 0x33) {
                TC_ERR("case %d: cancelled receive wrote the buffer", k);
                break;
            }
    }
    tc_sync(MPI_COMM_WORLD);

    /* A receive that a message may already have matched. */
    if (tc_size >= 2 && tc_rank < 2) {
        static const int sizes[] = { 16, 200000 };
        for (int s = 0; s < 2; s++) {
            int n = sizes[s];
            unsigned char *buf = tc_malloc((size_t)n);
            if (tc_rank == 1) {
                tc_fill(buf, (size_t)n, tc_seed(1, 0, 9, s));
                TC_MPI(MPI_Send(buf, n, MPI_BYTE, 0, 9, MPI_COMM_WORLD));
            } else {
                MPI_Request rq;
                MPI_Status st;
                int flag = 0;
                memset(buf, 0, (size_t)n);
                TC_MPI(MPI_Irecv(buf, n, MPI_BYTE, 1, 9, MPI_COMM_WORLD, &rq));
                tc_sleep_ms(50);
                TC_MPI(MPI_Cancel(&rq));
                TC_MPI(MPI_Wait(&rq, &st));
                TC_MPI(MPI_Test_cancelled(&st, &flag));
                if (flag) {
                    /* Cancelled: the message must still be there. */
                    TC_MPI(MPI_Recv(buf, n, MPI_BYTE, 1, 9, MPI_COMM_WORLD, &st));
                }
                int cnt = -1;
                TC_MPI(MPI_Get_count(&st, MPI_BYTE, &cnt));
                TC_CHECK(cnt == n && st.MPI_SOURCE == 1, "size %d (cancelled=%d): count %d source %d",
                         n, flag, cnt, st.MPI_SOURCE);
                tc_verify(buf, (size_t)n, tc_seed(1, 0, 9, s), "size %d cancelled=%d", n, flag);
            }
            free(buf);
        }
    }
    return tc_finalize();
}
