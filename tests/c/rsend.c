/* rsend: ready mode.  The receiver posts its receives, then tells the
 * sender, which uses MPI_Rsend / MPI_Irsend; data of every size arrives
 * intact.
 * ranks: 2
 * timeout: 60
 */
#include "tc.h"

static const int sizes[] = { 0, 1, 100, 4096, 65537, 1 << 20 };
#define NS ((int)(sizeof sizes / sizeof sizes[0]))
#define READY_TAG 70

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "rsend");
    if (tc_size != 2)
        tc_die("needs exactly 2 ranks");
    for (int round = 0; round < 6; round++) {
        if (tc_rank == 1) {
            unsigned char *buf[NS];
            MPI_Request rq[NS];
            MPI_Status st[NS];
            int ready = 1;
            for (int i = 0; i < NS; i++) {
                buf[i] = tc_malloc((size_t)sizes[i]);
                TC_MPI(MPI_Irecv(buf[i], sizes[i], MPI_BYTE, 0, i, MPI_COMM_WORLD, &rq[i]));
            }
            TC_MPI(MPI_Send(&ready, 1, MPI_INT, 0, READY_TAG, MPI_COMM_WORLD));
            TC_MPI(MPI_Waitall(NS, rq, st));
            for (int i = 0; i < NS; i++) {
                int cnt = -1;
                TC_MPI(MPI_Get_count(&st[i], MPI_BYTE, &cnt));
                TC_CHECK(cnt == sizes[i], "round %d: count %d want %d", round, cnt, sizes[i]);
                tc_verify(buf[i], (size_t)sizes[i], tc_seed(0, 1, i, round), "round %d size %d", round, sizes[i]);
                free(buf[i]);
            }
        } else {
            unsigned char *buf = tc_malloc((size_t)sizes[NS - 1] * NS);
            MPI_Request rq[NS];
            int ready;
            TC_MPI(MPI_Recv(&ready, 1, MPI_INT, 1, READY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            for (int i = 0; i < NS; i++) {
                unsigned char *b = buf + (size_t)sizes[NS - 1] * (size_t)i;
                tc_fill(b, (size_t)sizes[i], tc_seed(0, 1, i, round));
                if (round % 2) {
                    TC_MPI(MPI_Irsend(b, sizes[i], MPI_BYTE, 1, i, MPI_COMM_WORLD, &rq[i]));
                } else {
                    TC_MPI(MPI_Rsend(b, sizes[i], MPI_BYTE, 1, i, MPI_COMM_WORLD));
                    rq[i] = MPI_REQUEST_NULL;
                }
            }
            TC_MPI(MPI_Waitall(NS, rq, MPI_STATUSES_IGNORE));
            free(buf);
        }
    }
    return tc_finalize();
}
