/* ranks: 2 4 8
 * timeout: 60
 * Broadcasts large enough for the shared-memory channels (12 KiB and up on one host, the
 * default rule) between processes of different thread levels: even ranks call
 * MPI_Init_thread(MPI_THREAD_MULTIPLE), odd ranks MPI_Init. A rank at MPI_THREAD_MULTIPLE
 * waits for a blocking collective with the library lock released, as a request; the
 * others run the channel broadcast with the lock held. They must meet in the same
 * broadcast: this hung when the first ranks took the message tree instead. Every root in
 * turn, contiguous and strided (MPI_Type_vector) buffers, on MPI_COMM_WORLD and on a
 * communicator whose rank 0 (the segment's maker) is an MPI_Init rank; each result checked.
 */
#include <stdlib.h>
#include <string.h>
#include "../tc.h"

#define BYTES 65536

static unsigned char value(int call, int i)
{
    return (unsigned char)(call * 131 + i * 7 + (i >> 9));
}

static void bcasts(MPI_Comm c, const char *what)
{
    int n, r;
    TC_MPI(MPI_Comm_size(c, &n));
    TC_MPI(MPI_Comm_rank(c, &r));
    unsigned char *b = malloc(2 * BYTES);
    TC_CHECK(b != NULL, "out of memory");
    MPI_Datatype every_other;
    /* BYTES / 8 blocks of 4 bytes, 8 apart: 32 KiB of data spread over 64 KiB. */
    TC_MPI(MPI_Type_vector(BYTES / 8, 4, 8, MPI_BYTE, &every_other));
    TC_MPI(MPI_Type_commit(&every_other));
    for (int call = 0; call < 4 * n; call++) {
        int root = call % n, strided = call / n % 2;
        memset(b, 0xee, 2 * BYTES);
        if (r == root)
            for (int i = 0; i < BYTES; i++)
                b[i] = value(call, i);
        if (strided)
            TC_MPI(MPI_Bcast(b, 1, every_other, root, c));
        else
            TC_MPI(MPI_Bcast(b, BYTES, MPI_BYTE, root, c));
        int bad = -1;
        for (int i = 0; i < BYTES && bad < 0; i++) {
            int carried = !strided || i % 8 < 4;
            unsigned char want = carried || r == root ? value(call, i) : 0xee;
            if (b[i] != want)
                bad = i;
        }
        TC_CHECK(bad < 0, "%s: broadcast %d (root %d, %s): byte %d wrong", what, call, root, strided ? "strided" : "contiguous", bad);
        TC_CHECK(b[BYTES] == 0xee, "%s: broadcast %d wrote past the buffer", what, call);
    }
    TC_MPI(MPI_Type_free(&every_other));
    free(b);
}

int main(int argc, char **argv)
{
    tc_name = "mixed_bcast";
    int provided = MPI_THREAD_SINGLE;
    if (tc_launcher_rank() % 2 == 0)
        TC_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    else
        TC_MPI(MPI_Init(&argc, &argv));
    TC_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &tc_rank));
    TC_MPI(MPI_Comm_size(MPI_COMM_WORLD, &tc_size));
    bcasts(MPI_COMM_WORLD, "MPI_COMM_WORLD");
    /* Reversed: rank 0 of the new communicator is the last world rank (odd: MPI_Init). */
    MPI_Comm rev;
    TC_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, tc_size - 1 - tc_rank, &rev));
    bcasts(rev, "reversed");
    TC_MPI(MPI_Comm_free(&rev));
    return tc_finalize();
}
