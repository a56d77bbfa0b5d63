/* ring: a token travels around all ranks, then every rank shifts to its
 * right neighbour at once; sizes cross the eager/rendezvous thresholds.
 * ranks: 1 2 4 8
 * timeout: 60
 */
#include "tc.h"

static const size_t sizes[] = { 0, 1, 7, 64, 1024, 4093, 65536, 65537, 262144, 1048576, 4194305 };
#define NSIZES (sizeof sizes / sizeof sizes[0])

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "ring");
    const int right = (tc_rank + 1) % tc_size;
    const int left = (tc_rank + tc_size - 1) % tc_size;
    size_t max = sizes[NSIZES - 1];
    unsigned char *sbuf = tc_malloc(max), *rbuf = tc_malloc(max);

    /* Token ring: rank 0 injects, each rank checks what its left
     * neighbour sent and sends its own pattern on. */
    for (int rep = 0; rep < 3; rep++) {
        for (size_t s = 0; s < NSIZES; s++) {
            size_t n = sizes[s];
            long it = rep * 100 + (long)s;
            MPI_Request rq;
            MPI_Status st;
            memset(rbuf, 0xA5, n);
            TC_MPI(MPI_Irecv(rbuf, (int)n, MPI_BYTE, left, 5, MPI_COMM_WORLD, &rq));
            if (tc_rank != 0)
                TC_MPI(MPI_Wait(&rq, &st));
            tc_fill(sbuf, n, tc_seed(tc_rank, right, 5, it));
            TC_MPI(MPI_Send(sbuf, (int)n, MPI_BYTE, right, 5, MPI_COMM_WORLD));
            if (tc_rank == 0)
                TC_MPI(MPI_Wait(&rq, &st));
            int cnt = -1;
            TC_MPI(MPI_Get_count(&st, MPI_BYTE, &cnt));
            TC_CHECK(cnt == (int)n, "token size %zu: count %d", n, cnt);
            TC_CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 5,
                     "token status source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
            tc_verify(rbuf, n, tc_seed(left, tc_rank, 5, it), "token size %zu rep %d", n, rep);
        }
    }

    /* Simultaneous shift: everyone sends and receives at once. */
    for (int rep = 0; rep < 4; rep++) {
        for (size_t s = 0; s < NSIZES; s++) {
            size_t n = sizes[(s + (size_t)rep) % NSIZES];
            long it = 1000 + rep * 100 + (long)s;
            MPI_Request rq[2];
            MPI_Status st[2];
            tc_fill(sbuf, n, tc_seed(tc_rank, right, 6, it));
            memset(rbuf, 0x5A, n);
            TC_MPI(MPI_Irecv(rbuf, (int)n, MPI_BYTE, left, 6, MPI_COMM_WORLD, &rq[0]));
            TC_MPI(MPI_Isend(sbuf, (int)n, MPI_BYTE, right, 6, MPI_COMM_WORLD, &rq[1]));
            TC_MPI(MPI_Waitall(2, rq, st));
            int cnt = -1;
            TC_MPI(MPI_Get_count(&st[0], MPI_BYTE, &cnt));
            TC_CHECK(cnt == (int)n, "shift size %zu: count %d", n, cnt);
            tc_verify(rbuf, n, tc_seed(left, tc_rank, 6, it), "shift size %zu rep %d", n, rep);
            /* The send buffer must be untouched by the send. */
            tc_verify(sbuf, n, tc_seed(tc_rank, right, 6, it), "send buffer after shift %zu", n);
        }
    }
    free(sbuf);
    free(rbuf);
    return tc_finalize();
}
