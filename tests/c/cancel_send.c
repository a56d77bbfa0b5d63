/* cancel_send: MPI_Cancel of a send whose message no receive matched withdraws it
 * (MPI_Test_cancelled true, the receiver never sees it), for eager and rendezvous sizes,
 * standard and buffered (Ibsend) sends; cancelling a send that was already received leaves
 * it standing (Test_cancelled false).
 * ranks: 2
 * timeout: 60
 */
#include "tc.h"
#include <stdlib.h>

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "cancel_send");
    static const int sizes[] = {4, 1000, 200000};
    int bsize = 1 << 20;
    char *bbuf = malloc(bsize);
    TC_MPI(MPI_Buffer_attach(bbuf, bsize));
    for (int k = 0; k < 3; k++) {
        for (int buffered = 0; buffered < 2; buffered++) {
            int n = sizes[k], tag = 10 + k * 2 + buffered;
            char *buf = malloc(n);
            if (tc_rank == 0) {
                MPI_Request rq;
                MPI_Status st;
                int flag = 0;
                tc_fill(buf, n, tc_seed(0, 1, tag, 0));
                if (buffered)
                    TC_MPI(MPI_Ibsend(buf, n, MPI_CHAR, 1, tag, MPI_COMM_WORLD, &rq));
                else
                    TC_MPI(MPI_Isend(buf, n, MPI_CHAR, 1, tag, MPI_COMM_WORLD, &rq));
                TC_MPI(MPI_Cancel(&rq));
                TC_MPI(MPI_Wait(&rq, &st));
                TC_MPI(MPI_Test_cancelled(&st, &flag));
                TC_CHECK(flag, "size %d buffered %d: unmatched send not cancelled", n, buffered);
                TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
                /* The same tag again: this one must be the message the receiver gets. */
                tc_fill(buf, n, tc_seed(0, 1, tag, 1));
                TC_MPI(MPI_Send(buf, n, MPI_CHAR, 1, tag, MPI_COMM_WORLD));
            } else {
                MPI_Status st;
                TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
                TC_MPI(MPI_Recv(buf, n, MPI_CHAR, 0, tag, MPI_COMM_WORLD, &st));
                tc_verify(buf, n, tc_seed(0, 1, tag, 1), "size %d buffered %d", n, buffered);
                int more = 0;
                TC_MPI(MPI_Iprobe(0, tag, MPI_COMM_WORLD, &more, MPI_STATUS_IGNORE));
                TC_CHECK(!more, "size %d buffered %d: a cancelled message arrived", n, buffered);
            }
            TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
            free(buf);
        }
    }
    /* A send the receiver already took cannot be cancelled. */
    int v = 42, got = 0;
    if (tc_rank == 0) {
        MPI_Request rq;
        MPI_Status st;
        int flag = 1;
        TC_MPI(MPI_Isend(&v, 1, MPI_INT, 1, 99, MPI_COMM_WORLD, &rq));
        TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
        TC_MPI(MPI_Cancel(&rq));
        TC_MPI(MPI_Wait(&rq, &st));
        TC_MPI(MPI_Test_cancelled(&st, &flag));
        TC_CHECK(!flag, "a received send was reported cancelled");
    } else {
        TC_MPI(MPI_Recv(&got, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        TC_CHECK(got == 42, "got %d", got);
        TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    void *b;
    TC_MPI(MPI_Buffer_detach(&b, &bsize));
    free(bbuf);
    return tc_finalize();
}
