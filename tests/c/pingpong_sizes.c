/* pingpong_sizes: rank 0 and rank 1 bounce messages of every power of two
 * from 0 B to 16 MiB and its odd neighbours (2^k - 1, 2^k + 1), at varying
 * buffer alignments; both directions are checked byte by byte.
 * ranks: 2
 * timeout: 120
 */
#include "tc.h"

#define MAXSZ ((size_t)16 << 20)

static void bounce(unsigned char *sbuf, unsigned char *rbuf, size_t n, long it)
{
    const int peer = 1 - tc_rank;
    MPI_Status st;
    int cnt = -1;
    for (int dir = 0; dir < 2; dir++) {
        int sender = dir; /* 0 -> 1 first, then 1 -> 0 */
        if (tc_rank == sender) {
            tc_fill(sbuf, n, tc_seed(tc_rank, peer, 1, it * 2 + dir));
            TC_MPI(MPI_Send(sbuf, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD));
        } else {
            memset(rbuf, 0xEE, n + 8);
            TC_MPI(MPI_Recv(rbuf, (int)(n + 8), MPI_BYTE, peer, 1, MPI_COMM_WORLD, &st));
            TC_MPI(MPI_Get_count(&st, MPI_BYTE, &cnt));
            TC_CHECK(cnt == (int)n, "size %zu: received count %d", n, cnt);
            tc_verify(rbuf, n, tc_seed(peer, tc_rank, 1, it * 2 + dir), "size %zu it %ld", n, it);
            /* Bytes past the message must not be written. */
            for (size_t i = n; i < n + 8; i++)
                if (rbuf[i] != 0xEE) {
                    TC_ERR("size %zu: byte %zu past the end was overwritten", n, i);
                    break;
                }
        }
    }
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "pingpong_sizes");
    if (tc_size != 2)
        tc_die("needs exactly 2 ranks");
    unsigned char *sraw = tc_malloc(MAXSZ + 64), *rraw = tc_malloc(MAXSZ + 64);
    long it = 0;
    for (int k = 0; k <= 24; k++) {
        size_t p = (size_t)1 << k;
        size_t cand[4] = { k == 0 ? 0 : p - 1, p, p + 1, 0 };
        int ncand = k < 24 ? 3 : 2;
        for (int c = 0; c < ncand; c++) {
            size_t n = cand[c];
            if (k >= 1 && c == 0 && n <= 2)
                continue; /* already covered */
            int reps = n <= 65536 ? 5 : (n <= (1 << 20) ? 3 : 1);
            for (int r = 0; r < reps; r++) {
                size_t off = (size_t)(it % 8); /* vary alignment */
                bounce(sraw + off, rraw + ((off * 3) % 8), n, it);
                it++;
            }
        }
    }
    free(sraw);
    free(rraw);
    return tc_finalize();
}
