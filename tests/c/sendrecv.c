/* sendrecv: MPI_Sendrecv and MPI_Sendrecv_replace as a periodic ring shift
 * in both directions, as a non-periodic shift whose ends talk to
 * MPI_PROC_NULL (status per the standard, buffer untouched), and with
 * oneself.
 * ranks: 1 2 4 8
 * timeout: 60
 */
#include "tc.h"

static const size_t sizes[] = { 0, 1, 31, 4096, 65536, 300001, 1048576 };
#define NS (sizeof sizes / sizeof sizes[0])

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "sendrecv");
    const int right = (tc_rank + 1) % tc_size, left = (tc_rank + tc_size - 1) % tc_size;
    size_t max = sizes[NS - 1];
    unsigned char *sb = tc_malloc(max), *rb = tc_malloc(max + 16);

    for (int rep = 0; rep < 3; rep++) {
        for (size_t s = 0; s < NS; s++) {
            size_t n = sizes[s];
            long it = rep * 100 + (long)s;
            MPI_Status st;
            int cnt = -1;

            /* Periodic shift right, and the reverse with swapped roles. */
            for (int dir = 0; dir < 2; dir++) {
                int to = dir ? left : right, from = dir ? right : left;
                tc_fill(sb, n, tc_seed(tc_rank, to, dir, it));
                memset(rb, 0x11, n);
                TC_MPI(MPI_Sendrecv(sb, (int)n, MPI_BYTE, to, dir, rb, (int)(max + 16), MPI_BYTE,
                                    from, dir, MPI_COMM_WORLD, &st));
                TC_MPI(MPI_Get_count(&st, MPI_BYTE, &cnt));
                TC_CHECK(st.MPI_SOURCE == from && st.MPI_TAG == dir && cnt == (int)n,
                         "Sendrecv dir %d: source %d tag %d count %d, want %d %d %zu", dir,
                         st.MPI_SOURCE, st.MPI_TAG, cnt, from, dir, n);
                tc_verify(rb, n, tc_seed(from, tc_rank, dir, it), "Sendrecv dir %d size %zu", dir, n);
            }

            /* In place. */
            tc_fill(rb, n, tc_seed(tc_rank, right, 2, it));
            TC_MPI(MPI_Sendrecv_replace(rb, (int)n, MPI_BYTE, right, 2, left, 2, MPI_COMM_WORLD, &st));
            TC_MPI(MPI_Get_count(&st, MPI_BYTE, &cnt));
            TC_CHECK(st.MPI_SOURCE == left && cnt == (int)n, "Sendrecv_replace: source %d count %d",
                     st.MPI_SOURCE, cnt);
            tc_verify(rb, n, tc_seed(left, tc_rank, 2, it), "Sendrecv_replace size %zu", n);

            /* Non-periodic shift: rank 0 receives from PROC_NULL, the last
             * rank sends to PROC_NULL. */
            int to = tc_rank + 1 < tc_size ? tc_rank + 1 : MPI_PROC_NULL;
            int from = tc_rank > 0 ? tc_rank - 1 : MPI_PROC_NULL;
            tc_fill(sb, n, tc_seed(tc_rank, tc_rank + 1, 3, it));
            memset(rb, 0x22, n);
            TC_MPI(MPI_Sendrecv(sb, (int)n, MPI_BYTE, to, 3, rb, (int)n, MPI_BYTE, from, 3,
                                MPI_COMM_WORLD, &st));
            TC_MPI(MPI_Get_count(&st, MPI_BYTE, &cnt));
            if (from == MPI_PROC_NULL) {
                TC_CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && cnt == 0,
                         "Sendrecv from PROC_NULL: source %d tag %d count %d", st.MPI_SOURCE,
                         st.MPI_TAG, cnt);
                for (size_t i = 0; i < n; i++)
                    if (rb[i] != 0x22) {
                        TC_ERR("receive from PROC_NULL wrote byte %zu", i);
                        break;
                    }
            } else {
                TC_CHECK(st.MPI_SOURCE == from && cnt == (int)n, "open shift: source %d count %d",
                         st.MPI_SOURCE, cnt);
                tc_verify(rb, n, tc_seed(from, tc_rank, 3, it), "open shift size %zu", n);
            }

            /* With oneself. */
            tc_fill(sb, n, tc_seed(tc_rank, tc_rank, 4, it));
            TC_MPI(MPI_Sendrecv(sb, (int)n, MPI_BYTE, tc_rank, 4, rb, (int)n, MPI_BYTE, tc_rank, 4,
                                MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            tc_verify(rb, n, tc_seed(tc_rank, tc_rank, 4, it), "Sendrecv self size %zu", n);

            /* With oneself into a receive buffer 1-15 bytes past the send buffer's
             * offset (the copy placement some CPUs' string moves crawl at), and into
             * every other byte of a strided type. */
            size_t past = 1 + (size_t)(rep * 5 + s) % 15;
            memset(rb, 0x33, max + 16);
            TC_MPI(MPI_Sendrecv(sb, (int)n, MPI_BYTE, tc_rank, 5, rb + past, (int)n, MPI_BYTE,
                                tc_rank, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            tc_verify(rb + past, n, tc_seed(tc_rank, tc_rank, 4, it), "Sendrecv self size %zu, %zu past",
                      n, past);
            TC_CHECK(rb[past - 1] == 0x33 && rb[past + n] == 0x33, "Sendrecv self size %zu wrote outside", n);
            if (n <= max / 2) {
                MPI_Datatype every2;
                TC_MPI(MPI_Type_vector((int)n, 1, 2, MPI_BYTE, &every2));
                TC_MPI(MPI_Type_commit(&every2));
                memset(rb, 0x44, max + 16);
                TC_MPI(MPI_Sendrecv(sb, (int)n, MPI_BYTE, tc_rank, 6, rb, n ? 1 : 0, every2, tc_rank, 6,
                                    MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                for (size_t i = 0; i < 2 * n; i++) {
                    unsigned char want = (i % 2) ? 0x44 : sb[i / 2];
                    if (rb[i] != want) {
                        TC_ERR("Sendrecv self strided size %zu: byte %zu is %#x, want %#x", n, i, rb[i], want);
                        break;
                    }
                }
                TC_MPI(MPI_Type_free(&every2));
            }
        }
    }
    free(sb);
    free(rb);
    return tc_finalize();
}
