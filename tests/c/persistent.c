/* persistent: Send_init / Ssend_init / Recv_init reused many times with
 * Start and Startall on a ring, buffers refilled in place between
 * iterations; an inactive persistent request completes at once with an
 * empty status and can be freed.
 * ranks: 2 4
 * timeout: 60
 */
#include "tc.h"

#define ITERS 200

static const size_t sizes[] = { 0, 8, 1000, 65536, 1048576 };
#define NS (sizeof sizes / sizeof sizes[0])

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "persistent");
    const int right = (tc_rank + 1) % tc_size, left = (tc_rank + tc_size - 1) % tc_size;
    unsigned char *sb[NS], *rb[NS];
    MPI_Request rq[2 * NS];
    MPI_Status st[2 * NS];

    for (size_t s = 0; s < NS; s++) {
        sb[s] = tc_malloc(sizes[s]);
        rb[s] = tc_malloc(sizes[s]);
        TC_MPI(MPI_Recv_init(rb[s], (int)sizes[s], MPI_BYTE, left, (int)s, MPI_COMM_WORLD, &rq[s]));
        if (s % 2)
            TC_MPI(MPI_Ssend_init(sb[s], (int)sizes[s], MPI_BYTE, right, (int)s, MPI_COMM_WORLD, &rq[NS + s]));
        else
            TC_MPI(MPI_Send_init(sb[s], (int)sizes[s], MPI_BYTE, right, (int)s, MPI_COMM_WORLD, &rq[NS + s]));
    }

    /* Inactive persistent requests: Wait and Test return at once with an
     * empty status (source ANY_SOURCE, tag ANY_TAG, count 0). */
    {
        MPI_Status e;
        int flag = 0, cnt = -1;
        e.MPI_SOURCE = 12345; e.MPI_TAG = 12345;
        TC_MPI(MPI_Wait(&rq[0], &e));
        TC_CHECK(rq[0] != MPI_REQUEST_NULL, "Wait freed an inactive persistent request");
        TC_MPI(MPI_Get_count(&e, MPI_BYTE, &cnt));
        TC_CHECK(e.MPI_SOURCE == MPI_ANY_SOURCE && e.MPI_TAG == MPI_ANY_TAG && cnt == 0,
                 "inactive Wait: status source %d tag %d count %d", e.MPI_SOURCE, e.MPI_TAG, cnt);
        TC_MPI(MPI_Test(&rq[NS], &flag, &e));
        TC_CHECK(flag, "Test on an inactive persistent request: flag 0");
    }

    for (int it = 0; it < ITERS; it++) {
        size_t limit = (it % 10 == 0) ? NS : NS - 1; /* 1 MiB every 10th iteration */
        for (size_t s = 0; s < limit; s++) {
            tc_fill(sb[s], sizes[s], tc_seed(tc_rank, right, (int)s, it));
            memset(rb[s], 0xC3, sizes[s]);
        }
        if (it % 3 == 0) {
            /* Receives first, then sends, one Start at a time. */
            for (size_t s = 0; s < limit; s++)
                TC_MPI(MPI_Start(&rq[s]));
            for (size_t s = 0; s < limit; s++)
                TC_MPI(MPI_Start(&rq[NS + s]));
            for (size_t s = 0; s < limit; s++) {
                TC_MPI(MPI_Wait(&rq[s], &st[s]));
                TC_MPI(MPI_Wait(&rq[NS + s], &st[NS + s]));
            }
        } else {
            MPI_Request act[2 * NS];
            for (size_t s = 0; s < limit; s++) {
                act[s] = rq[s];
                act[limit + s] = rq[NS + s];
            }
            TC_MPI(MPI_Startall((int)(2 * limit), act));
            TC_MPI(MPI_Waitall((int)(2 * limit), act, st));
            for (size_t s = 0; s < limit; s++) {
                TC_CHECK(act[s] != MPI_REQUEST_NULL, "Waitall freed a persistent request");
                st[NS + s] = st[limit + s];
            }
        }
        for (size_t s = 0; s < limit; s++) {
            int cnt = -1;
            TC_MPI(MPI_Get_count(&st[s], MPI_BYTE, &cnt));
            TC_CHECK(st[s].MPI_SOURCE == left && st[s].MPI_TAG == (int)s && cnt == (int)sizes[s],
                     "it %d size %zu: source %d tag %d count %d", it, sizes[s],
                     st[s].MPI_SOURCE, st[s].MPI_TAG, cnt);
            tc_verify(rb[s], sizes[s], tc_seed(left, tc_rank, (int)s, it), "it %d size %zu", it, sizes[s]);
        }
    }
    for (size_t s = 0; s < 2 * NS; s++) {
        TC_MPI(MPI_Request_free(&rq[s]));
        TC_CHECK(rq[s] == MPI_REQUEST_NULL, "Request_free did not reset the handle");
    }
    for (size_t s = 0; s < NS; s++) {
        free(sb[s]);
        free(rb[s]);
    }
    return tc_finalize();
}
