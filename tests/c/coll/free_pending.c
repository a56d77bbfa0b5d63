/* ranks: 2 3 4 8
 * timeout: 60
 * MPI_Comm_free with operations in progress on the communicator: they complete normally
 * (MPI standard, MPI_Comm_free). Nonblocking collectives of every path (an MPI_Ibcast by
 * messages and one over the channels, an MPI_Iallreduce, an MPI_Ibarrier) and point-to-point
 * requests (a rendezvous-sized MPI_Isend/MPI_Irecv) are started on a duplicate, the duplicate
 * is freed, then they are waited for and checked. Before, the collectives failed with
 * MPI_ERR_COMM or MPI_ERR_INTERN. Repeated, so the communicators made after it reuse nothing
 * of a freed one too early.
 */
#include "ct.h"

#define BIG 65536

int main(int argc, char **argv)
{
    ct_init(&argc, &argv, "free_pending");
    unsigned char *small = malloc(64), *big = malloc(BIG);
    int *p2p = malloc(20000 * sizeof(int));
    for (int round = 0; round < 6; round++) {
        MPI_Comm d;
        CT_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &d));
        /* A blocking broadcast first on some rounds: the channels' segment then exists. */
        if (round % 2 == 1)
            CT_MPI(MPI_Bcast(big, BIG, MPI_BYTE, 0, d));
        int root = round % ct_size;
        for (int i = 0; i < 64; i++)
            small[i] = ct_rank == root ? (unsigned char)(round + i) : 0;
        for (int i = 0; i < BIG; i++)
            big[i] = ct_rank == root ? (unsigned char)(round * 7 + i) : 0;
        int in = ct_rank + round, sum = -1;
        int peer = ct_rank ^ 1;
        int has_peer = peer < ct_size;
        for (int i = 0; i < 20000; i++)
            p2p[i] = ct_rank % 2 == 0 ? ct_val(ct_rank, i + round) : -1;
        MPI_Request q[6];
        int nq = 0;
        CT_MPI(MPI_Ibcast(small, 64, MPI_BYTE, root, d, &q[nq++]));
        CT_MPI(MPI_Ibcast(big, BIG, MPI_BYTE, root, d, &q[nq++]));
        CT_MPI(MPI_Iallreduce(&in, &sum, 1, MPI_INT, MPI_SUM, d, &q[nq++]));
        CT_MPI(MPI_Ibarrier(d, &q[nq++]));
        if (has_peer) {
            if (ct_rank % 2 == 0)
                CT_MPI(MPI_Isend(p2p, 20000, MPI_INT, peer, 5, d, &q[nq++]));
            else
                CT_MPI(MPI_Irecv(p2p, 20000, MPI_INT, peer, 5, d, &q[nq++]));
        }
        CT_MPI(MPI_Comm_free(&d));
        CT_CHECK(d == MPI_COMM_NULL, "round %d: the handle was not set to MPI_COMM_NULL", round);
        CT_MPI(MPI_Waitall(nq, q, MPI_STATUSES_IGNORE));
        for (int i = 0; i < 64; i++)
            if (small[i] != (unsigned char)(round + i)) {
                CT_ERR("round %d: small broadcast byte %d is %d", round, i, small[i]);
                break;
            }
        for (int i = 0; i < BIG; i++)
            if (big[i] != (unsigned char)(round * 7 + i)) {
                CT_ERR("round %d: large broadcast byte %d is %d", round, i, big[i]);
                break;
            }
        CT_CHECK(sum == ct_size * (ct_size - 1) / 2 + ct_size * round, "round %d: allreduce gave %d", round, sum);
        if (has_peer && ct_rank % 2 == 1)
            for (int i = 0; i < 20000; i++)
                if (p2p[i] != ct_val(peer, i + round)) {
                    CT_ERR("round %d: received element %d is %d", round, i, p2p[i]);
                    break;
                }
    }
    free(small);
    free(big);
    free(p2p);
    return ct_finish();
}
