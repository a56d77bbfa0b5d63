/* ssend: synchronous mode.  An MPI_Issend must not complete (MPI_Test stays
 * false) before the matching receive is posted, for eager-sized and
 * rendezvous-sized messages including 0 bytes; a blocking MPI_Ssend must
 * not return before the receiver posted, which is held back 300 ms after
 * a start message that rank 0 sent just before the Ssend.
 * ranks: 2
 * timeout: 60
 */
#include "tc.h"

static const int sizes[] = { 0, 8, 1024, 65536, 1 << 20 };
#define NS ((int)(sizeof sizes / sizeof sizes[0]))
#define GO_TAG 60

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "ssend");
    if (tc_size != 2)
        tc_die("needs exactly 2 ranks");
    unsigned char *buf = tc_malloc(1 << 20);
    int go = 1;

    for (int i = 0; i < NS; i++) {
        size_t n = (size_t)sizes[i];
        if (tc_rank == 0) {
            MPI_Request rq;
            int flag = 0;
            tc_fill(buf, n, tc_seed(0, 1, i, 0));
            TC_MPI(MPI_Issend(buf, (int)n, MPI_BYTE, 1, i, MPI_COMM_WORLD, &rq));
            double t0 = MPI_Wtime();
            long tests = 0;
            while (MPI_Wtime() - t0 < 0.15) {
                TC_MPI(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
                tests++;
                if (flag) {
                    TC_ERR("Issend of %zu bytes completed before the receive was posted", n);
                    break;
                }
            }
            TC_MPI(MPI_Send(&go, 1, MPI_INT, 1, GO_TAG, MPI_COMM_WORLD));
            if (!flag)
                TC_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        } else {
            MPI_Status st;
            int cnt = -1;
            TC_MPI(MPI_Recv(&go, 1, MPI_INT, 0, GO_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            memset(buf, 0, n);
            TC_MPI(MPI_Recv(buf, (int)n, MPI_BYTE, 0, i, MPI_COMM_WORLD, &st));
            TC_MPI(MPI_Get_count(&st, MPI_BYTE, &cnt));
            TC_CHECK(cnt == (int)n, "count %d want %zu", cnt, n);
            tc_verify(buf, n, tc_seed(0, 1, i, 0), "Issend %zu", n);
        }
    }

    /* Blocking Ssend: the receiver cannot post before the start message
     * arrives, and then waits 300 ms more, so Ssend takes >= 300 ms. */
    for (int i = 0; i < NS; i += 2) {
        size_t n = (size_t)sizes[i];
        if (tc_rank == 0) {
            tc_fill(buf, n, tc_seed(0, 1, i, 1));
            double t0 = MPI_Wtime();
            TC_MPI(MPI_Send(&go, 1, MPI_INT, 1, GO_TAG, MPI_COMM_WORLD));
            TC_MPI(MPI_Ssend(buf, (int)n, MPI_BYTE, 1, 100 + i, MPI_COMM_WORLD));
            double dt = MPI_Wtime() - t0;
            TC_CHECK(dt >= 0.25, "Ssend of %zu bytes returned after %.3f s, before the receive "
                     "was posted (>= 0.3 s)", n, dt);
        } else {
            int cnt = -1;
            MPI_Status st;
            TC_MPI(MPI_Recv(&go, 1, MPI_INT, 0, GO_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            tc_sleep_ms(300);
            memset(buf, 0, n);
            TC_MPI(MPI_Recv(buf, (int)n, MPI_BYTE, 0, 100 + i, MPI_COMM_WORLD, &st));
            TC_MPI(MPI_Get_count(&st, MPI_BYTE, &cnt));
            TC_CHECK(cnt == (int)n, "count %d want %zu", cnt, n);
            tc_verify(buf, n, tc_seed(0, 1, i, 1), "Ssend %zu", n);
        }
    }

    /* Ssend to self with the receive already posted completes. */
    {
        MPI_Request rq;
        char c = 0;
        TC_MPI(MPI_Irecv(&c, 1, MPI_CHAR, tc_rank, 7, MPI_COMM_WORLD, &rq));
        TC_MPI(MPI_Ssend("s", 1, MPI_CHAR, tc_rank, 7, MPI_COMM_WORLD));
        TC_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        TC_CHECK(c == 's', "Ssend to self: got %d", c);
    }
    free(buf);
    return tc_finalize();
}
