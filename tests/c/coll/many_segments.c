/* ranks: 4
 * timeout: 120
 * Several communicators, each with large slot collectives and channel broadcasts, then
 * every pair streaming through the shm rings. Each segment was sized to a share of the
 * space free when it was made, and a sparse segment's pages take no space until written,
 * so the next one saw the same free space: on a small /dev/shm the segments together
 * promised more than there was, and the store that found no page killed a rank with SIGBUS.
 * tests/c/coll/small-shm.sh runs it on 4 and 12 MiB.
 */
#include "ct.h"

#define COMMS 8
#define N (1 << 17) /* floats: 512 KiB */

int main(int argc, char **argv)
{
    ct_init(&argc, &argv, "many_segments");
    const int n = ct_size, me = ct_rank;
    float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float));
    const size_t blk = 256 << 10;
    char *s = malloc(blk * n), *r = malloc(blk * n);
    if (!a || !b || !s || !r) {
        CT_ERR("out of memory");
        return ct_finish();
    }
    MPI_Comm comms[COMMS];
    for (int c = 0; c < COMMS; c++) {
        CT_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comms[c]));
        for (int i = 0; i < N; i++)
            a[i] = (float)(me + i % 5 + c);
        CT_MPI(MPI_Allreduce(a, b, N, MPI_FLOAT, MPI_SUM, comms[c]));
        for (int i = 0; i < N; i += 991) {
            float want = (float)(n * (n - 1) / 2 + n * (i % 5 + c));
            CT_CHECK(b[i] == want, "comm %d allreduce[%d] = %g, expected %g", c, i, b[i], want);
        }
        for (int i = 0; i < N; i++)
            b[i] = me == c % n ? (float)(i % 11 + c) : -1.0f;
        CT_MPI(MPI_Bcast(b, N, MPI_FLOAT, c % n, comms[c]));
        for (int i = 0; i < N; i += 997)
            CT_CHECK(b[i] == (float)(i % 11 + c), "comm %d bcast[%d] = %g", c, i, b[i]);
    }
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < n; k++)
            memset(s + k * blk, (me * 16 + k + round) & 0xff, blk);
        CT_MPI(MPI_Alltoall(s, (int)blk, MPI_CHAR, r, (int)blk, MPI_CHAR, comms[round]));
        for (int k = 0; k < n; k++)
            CT_CHECK((unsigned char)r[k * blk + blk - 1] == ((k * 16 + me + round) & 0xff), "alltoall block %d", k);
        /* Every pair through the rings, both ways at once. */
        for (int k = 1; k < n; k++) {
            int to = (me + k) % n, from = (me - k + n) % n;
            CT_MPI(MPI_Sendrecv(s, (int)blk, MPI_CHAR, to, k, r, (int)blk, MPI_CHAR, from, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CT_CHECK((unsigned char)r[blk - 1] == ((from * 16 + round) & 0xff), "sendrecv from %d", from);
        }
    }
    for (int c = 0; c < COMMS; c++)
        CT_MPI(MPI_Comm_free(&comms[c]));
    free(a);
    free(b);
    free(s);
    free(r);
    return ct_finish();
}
