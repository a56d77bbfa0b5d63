/* ranks: 4 8
 * timeout: 60
 * MPI_THREAD_MULTIPLE: after a run of broadcasts over the shared-memory channels (64 KiB,
 * more broadcasts than channels, so they synchronize), every rank but the last blocks in a
 * point-to-point receive from the next rank, while the last rank, started late, is still
 * in its broadcasts. Those need the synchronizations' results, which reach the last rank
 * through its parent in the synchronization tree, which is blocked in its receive by then
 * or soon after. Every rank's broadcasts are checked, and the chain of receives must end. */
#include <stdlib.h>
#include "../tc.h"

#define BYTES 65536
#define CALLS 64

int main(int argc, char **argv)
{
    int provided = 0;
    tc_name = "channels_wait_after";
    TC_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    TC_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &tc_rank));
    TC_MPI(MPI_Comm_size(MPI_COMM_WORLD, &tc_size));
    if (provided != MPI_THREAD_MULTIPLE)
        tc_die("MPI_Init_thread provided %d, not MPI_THREAD_MULTIPLE", provided);
    unsigned char *b = malloc(BYTES);
    TC_CHECK(b != NULL, "out of memory");
    const int last = tc_size - 1;
    /* The first broadcast agrees on the segment; then the last rank falls behind. */
    for (int i = 0; i < BYTES; i++)
        b[i] = tc_rank == 0 ? (unsigned char)i : 0;
    TC_MPI(MPI_Bcast(b, BYTES, MPI_BYTE, 0, MPI_COMM_WORLD));
    if (tc_rank == last)
        tc_sleep_ms(100);
    for (int call = 1; call < CALLS; call++) {
        for (int i = 0; i < BYTES; i++)
            b[i] = tc_rank == 0 ? (unsigned char)(i + call) : 0;
        TC_MPI(MPI_Bcast(b, BYTES, MPI_BYTE, 0, MPI_COMM_WORLD));
        int bad = -1;
        for (int i = 0; i < BYTES && bad < 0; i++)
            if (b[i] != (unsigned char)(i + call))
                bad = i;
        TC_CHECK(bad < 0, "broadcast %d: byte %d wrong", call, bad);
    }
    /* A chain: each rank waits for the next one, which the last rank ends. */
    int token = tc_rank;
    if (tc_rank < last) {
        int got = -1;
        TC_MPI(MPI_Recv(&got, 1, MPI_INT, tc_rank + 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        TC_CHECK(got == tc_rank + 1, "token %d from rank %d", got, tc_rank + 1);
    }
    if (tc_rank > 0)
        TC_MPI(MPI_Send(&token, 1, MPI_INT, tc_rank - 1, 7, MPI_COMM_WORLD));
    free(b);
    return tc_finalize();
}
