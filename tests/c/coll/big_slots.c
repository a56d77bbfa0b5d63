/* ranks: 4
 * timeout: 120
 * Large contributions to the slot collectives of ranks sharing memory (Allreduce of 1 MiB,
 * Allgather of 512 KiB, Alltoall of 128 KiB blocks, Reduce_scatter_block of 256 KiB blocks),
 * each checked. tests/c/coll/small-shm.sh also runs it on a 4 MiB /dev/shm: there the slot
 * segment must shrink to what fits and the calls that no longer fit take the messages; a
 * segment sized by the setting alone had a rank killed by SIGBUS part way through.
 */
#include "ct.h"

#define N (1 << 18) /* floats: 1 MiB */

int main(int argc, char **argv)
{
    ct_init(&argc, &argv, "big_slots");
    const int n = ct_size, me = ct_rank;
    float *a = malloc(N * sizeof(float)), *b = malloc((size_t)N * n * sizeof(float));
    char *s = malloc((size_t)N * 2 * n), *r = malloc((size_t)N * 2 * n);
    if (!a || !b || !s || !r) {
        CT_ERR("out of memory");
        return ct_finish();
    }
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++)
            a[i] = (float)(me + i % 7 + round);
        CT_MPI(MPI_Allreduce(a, b, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < N; i += 997) {
            float want = (float)(n * (n - 1) / 2 + n * (i % 7 + round));
            CT_CHECK(b[i] == want, "allreduce[%d] = %g, expected %g", i, b[i], want);
        }
        /* 512 KiB per rank. */
        const int g = N / 2;
        CT_MPI(MPI_Allgather(a, g, MPI_FLOAT, b, g, MPI_FLOAT, MPI_COMM_WORLD));
        for (int k = 0; k < n; k++)
            for (int i = 0; i < g; i += 1009)
                CT_CHECK(b[(size_t)k * g + i] == (float)(k + i % 7 + round), "allgather block %d [%d] = %g", k, i, b[(size_t)k * g + i]);
        /* 128 KiB to every rank. */
        const size_t blk = 128 << 10;
        for (int k = 0; k < n; k++)
            memset(s + k * blk, (me * 16 + k + round) & 0xff, blk);
        CT_MPI(MPI_Alltoall(s, (int)blk, MPI_CHAR, r, (int)blk, MPI_CHAR, MPI_COMM_WORLD));
        for (int k = 0; k < n; k++)
            for (size_t i = 0; i < blk; i += 4093)
                CT_CHECK((unsigned char)r[k * blk + i] == ((k * 16 + me + round) & 0xff), "alltoall from %d [%zu] = %d", k, i, r[k * blk + i]);
        /* 256 KiB blocks. */
        const int q = N / 4;
        float *in = malloc((size_t)q * n * sizeof(float));
        if (!in) {
            CT_ERR("out of memory");
            break;
        }
        for (int i = 0; i < q * n; i++)
            in[i] = (float)(me + i % 5 + round);
        CT_MPI(MPI_Reduce_scatter_block(in, b, q, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < q; i += 991) {
            float want = (float)(n * (n - 1) / 2 + n * ((me * q + i) % 5 + round));
            CT_CHECK(b[i] == want, "reduce_scatter_block[%d] = %g, expected %g", i, b[i], want);
        }
        free(in);
        CT_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    free(a);
    free(b);
    free(s);
    free(r);
    return ct_finish();
}
