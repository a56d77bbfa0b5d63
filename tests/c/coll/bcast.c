/* ranks: 1 2 3 4 5 8 24
 * timeout: 120
 * Bcast / Ibcast / Bcast_init: every root, counts 0, 1, 1000 and 300000 ints (the last
 * uses scatter + allgather and rendezvous transfers), MPI_DOUBLE, MPI_Bcast_c, and a
 * duplicated communicator; several Ibcasts in flight at once must not mix.
 */
#include "ct.h"

static void check(const int *buf, long n, int root, int seed, const char *what)
{
    for (long i = 0; i < n; i++)
        if (buf[i] != ct_val(root, i + seed)) {
            CT_ERR("%s root %d count %ld: element %ld is %d, expected %d", what, root, n, i, buf[i],
                   ct_val(root, i + seed));
            return;
        }
}

static void fill(int *buf, long n, int root, int seed)
{
    for (long i = 0; i < n; i++)
        buf[i] = ct_rank == root ? ct_val(root, i + seed) : -1;
}

int main(int argc, char **argv)
{
    ct_init(&argc, &argv, "bcast");
    static const long counts[] = {0, 1, 1000, 300000};
    int *buf = malloc(sizeof(int) * 300001);
    MPI_Comm dup;
    CT_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    MPI_Comm comms[2] = {MPI_COMM_WORLD, dup};
    for (int c = 0; c < 2; c++) {
        for (int ci = 0; ci < 4; ci++) {
            long n = counts[ci];
            for (int root = 0; root < ct_size; root++) {
                fill(buf, n + 1, root, 3);
                buf[n] = -5; /* nothing past the end is written */
                CT_MPI(MPI_Bcast(buf, (int)n, MPI_INT, root, comms[c]));
                check(buf, n, root, 3, "Bcast");
                CT_CHECK(buf[n] == -5 || ct_rank == root, "Bcast wrote past the end");
                fill(buf, n, root, 4);
                MPI_Request r;
                CT_MPI(MPI_Ibcast(buf, (int)n, MPI_INT, root, comms[c], &r));
                CT_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
                CT_CHECK(r == MPI_REQUEST_NULL, "Wait did not free the Ibcast request");
                check(buf, n, root, 4, "Ibcast");
                fill(buf, n, root, 5);
                CT_MPI(MPI_Bcast_c(buf, (MPI_Count)n, MPI_INT, root, comms[c]));
                check(buf, n, root, 5, "Bcast_c");
            }
        }
    }
    /* doubles */
    double d[7];
    for (int root = 0; root < ct_size; root++) {
        for (int i = 0; i < 7; i++)
            d[i] = ct_rank == root ? root + i * 0.25 : -1.0;
        CT_MPI(MPI_Bcast(d, 7, MPI_DOUBLE, root, MPI_COMM_WORLD));
        for (int i = 0; i < 7; i++)
            CT_CHECK(d[i] == root + i * 0.25, "double bcast root %d element %d = %g", root, i, d[i]);
    }
    /* several in flight on one communicator, completed in reverse order */
    enum { K = 6 };
    int bufs[K][50];
    MPI_Request reqs[K];
    for (int k = 0; k < K; k++) {
        int root = k % ct_size;
        fill(bufs[k], 50, root, 100 + k);
        CT_MPI(MPI_Ibcast(bufs[k], 50, MPI_INT, root, MPI_COMM_WORLD, &reqs[k]));
    }
    for (int k = K - 1; k >= 0; k--)
        CT_MPI(MPI_Wait(&reqs[k], MPI_STATUS_IGNORE));
    for (int k = 0; k < K; k++)
        check(bufs[k], 50, k % ct_size, 100 + k, "overlapping Ibcast");
    /* persistent: started several times with new data each time */
    MPI_Request p;
    int root = ct_size - 1;
    CT_MPI(MPI_Bcast_init(buf, 1000, MPI_INT, root, MPI_COMM_WORLD, MPI_INFO_NULL, &p));
    for (int it = 0; it < 5; it++) {
        fill(buf, 1000, root, 200 + it);
        CT_MPI(MPI_Start(&p));
        CT_MPI(MPI_Wait(&p, MPI_STATUS_IGNORE));
        CT_CHECK(p != MPI_REQUEST_NULL, "Wait freed a persistent request");
        check(buf, 1000, root, 200 + it, "Bcast_init");
    }
    CT_MPI(MPI_Request_free(&p));
    CT_MPI(MPI_Comm_free(&dup));
    free(buf);
    return ct_finish();
}
