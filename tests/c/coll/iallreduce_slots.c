/* ranks: 2 3 4 8 24
 * timeout: 120
 * MPI_Iallreduce through the slot exchange of ranks sharing memory (docs/collectives.md): a
 * communicator's nonblocking calls have their own exchange, apart from the blocking calls',
 * and run one at a time in call order. Up to four calls outstanding with different
 * operations, a blocking Allreduce and Barrier among them, completed in either order, at
 * sizes from one int to 4 MiB (the split into Reduce_scatter_block + Allgather), on a
 * duplicate that is freed with calls still waiting for the exchange. A call started while
 * an earlier one holds the exchange waits for it: started at once, it found no exchange,
 * began an agreement on a new segment and hung.
 */
#include "ct.h"

int main(int argc, char **argv)
{
    ct_init(&argc, &argv, "iallreduce_slots");
    const int n = ct_size, me = ct_rank;
    for (int cnt = 1; cnt <= (1 << 20); cnt *= 8) {
        int *a = malloc(cnt * sizeof(int)), *s = malloc(cnt * sizeof(int)), *x = malloc(cnt * sizeof(int));
        int *y = malloc(cnt * sizeof(int)), *b = malloc(cnt * sizeof(int));
        if (!a || !s || !x || !y || !b) {
            CT_ERR("out of memory");
            return ct_finish();
        }
        MPI_Comm comm;
        CT_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
        for (int it = 0; it < 4; it++) {
            for (int i = 0; i < cnt; i++)
                a[i] = me + i % 1000 + it;
            MPI_Request r[4];
            CT_MPI(MPI_Iallreduce(a, s, cnt, MPI_INT, MPI_SUM, comm, &r[0]));
            CT_MPI(MPI_Iallreduce(a, x, cnt, MPI_INT, MPI_MAX, comm, &r[1]));
            CT_MPI(MPI_Allreduce(a, b, cnt, MPI_INT, MPI_SUM, comm));
            CT_MPI(MPI_Iallreduce(a, y, cnt, MPI_INT, MPI_MIN, comm, &r[2]));
            CT_MPI(MPI_Ibarrier(comm, &r[3]));
            if (it == 3) {
                /* Freed with the calls outstanding: they complete normally. */
                CT_MPI(MPI_Comm_free(&comm));
            } else {
                CT_MPI(MPI_Barrier(comm));
            }
            if (it % 2) {
                for (int k = 3; k >= 0; k--)
                    CT_MPI(MPI_Wait(&r[k], MPI_STATUS_IGNORE));
            } else {
                CT_MPI(MPI_Waitall(4, r, MPI_STATUSES_IGNORE));
            }
            for (int i = 0; i < cnt; i++) {
                int base = i % 1000 + it, sum = n * (n - 1) / 2 + n * base;
                if (s[i] != sum || b[i] != sum || x[i] != n - 1 + base || y[i] != base) {
                    CT_ERR("count %d round %d [%d]: sum %d/%d max %d min %d, expected %d, %d, %d", cnt, it, i, s[i], b[i], x[i], y[i], sum, n - 1 + base, base);
                    break;
                }
            }
        }
        free(a);
        free(s);
        free(x);
        free(y);
        free(b);
    }
    return ct_finish();
}
