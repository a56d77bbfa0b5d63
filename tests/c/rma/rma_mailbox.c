/* ranks: 2 4
 * Passive-target epochs on windows over the application's memory (MPI_Win_create) within
 * one host, where puts and gets go through the window's mailboxes in shared memory and
 * the target applies them when it makes progress; an origin whose target does not take a
 * record in time applies it itself with a system call (docs/mpi5.md, "Mailboxes"):
 *  - under MPI_Win_lock_all every rank puts blocks of sizes from 1 byte to 300 KiB (larger
 *    than a mailbox ring) into every other rank, flushes, and gets every block back; after
 *    a barrier every target holds what its origins put;
 *  - a target that computes for 400 ms without calling MPI: rank 0's lock, puts of small
 *    and large blocks, flush and unlock complete well before (the records are claimed), and
 *    the data is there afterwards;
 *  - a counter raised by every rank under exclusive locks with get + flush + put: every
 *    raise is seen by the next holder (unlock completes the puts before it lets go). */
#include "../tc.h"

#define SIZES 9
static const int sizes[SIZES] = {1, 7, 64, 1000, 4096, 16384, 16385, 70000, 300000};
#define RAISES 200

static unsigned char val(int origin, int target, int block, long i)
{
    return (unsigned char)(origin * 37 + target * 11 + block * 5 + i * 3 + 1);
}

static double now(void)
{
    return MPI_Wtime();
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "rma_mailbox");
    int me = tc_rank, n = tc_size;
    long per_origin = 0;
    for (int b = 0; b < SIZES; b++)
        per_origin += sizes[b];
    size_t bytes = (size_t)per_origin * (size_t)n + 64;
    unsigned char *mem = malloc(bytes);
    unsigned char *src = malloc((size_t)per_origin);
    unsigned char *back = malloc((size_t)per_origin);
    if (!mem || !src || !back)
        tc_die("out of memory");
    memset(mem, 0, bytes);
    MPI_Win win;
    TC_MPI(MPI_Win_create(mem, (MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));

    /* 1. every rank to every other under lock_all */
    TC_MPI(MPI_Win_lock_all(0, win));
    for (int t = 0; t < n; t++) {
        if (t == me)
            continue;
        long off = 0;
        for (int b = 0; b < SIZES; b++) {
            for (long i = 0; i < sizes[b]; i++)
                src[off + i] = val(me, t, b, i);
            TC_MPI(MPI_Put(src + off, sizes[b], MPI_BYTE, t, (MPI_Aint)(me * per_origin + off), sizes[b], MPI_BYTE, win));
            off += sizes[b];
        }
        TC_MPI(MPI_Win_flush(t, win));
        memset(back, 0, (size_t)per_origin);
        off = 0;
        for (int b = 0; b < SIZES; b++) {
            TC_MPI(MPI_Get(back + off, sizes[b], MPI_BYTE, t, (MPI_Aint)(me * per_origin + off), sizes[b], MPI_BYTE, win));
            off += sizes[b];
        }
        TC_MPI(MPI_Win_flush(t, win));
        long bad = 0;
        for (long i = 0; i < per_origin; i++)
            bad += back[i] != src[i];
        TC_CHECK(bad == 0, "got back %ld wrong bytes of %ld from rank %d", bad, per_origin, t);
    }
    TC_MPI(MPI_Win_unlock_all(win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int o = 0; o < n; o++) {
        if (o == me)
            continue;
        long off = 0, bad = 0;
        for (int b = 0; b < SIZES; b++) {
            for (long i = 0; i < sizes[b]; i++)
                bad += mem[o * per_origin + off + i] != val(o, me, b, i);
            off += sizes[b];
        }
        TC_CHECK(bad == 0, "%ld wrong bytes of %ld put by rank %d", bad, per_origin, o);
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* 2. a target outside MPI for 400 ms */
    if (me == 1) {
        double t0 = now();
        volatile unsigned long spin = 0;
        while (now() - t0 < 0.4)
            spin++;
    } else if (me == 0) {
        double t0 = now();
        TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win));
        long off = 0;
        for (int b = 0; b < SIZES; b++) {
            for (long i = 0; i < sizes[b]; i++)
                src[off + i] = val(9, 1, b, i);
            TC_MPI(MPI_Put(src + off, sizes[b], MPI_BYTE, 1, (MPI_Aint)off, sizes[b], MPI_BYTE, win));
            off += sizes[b];
        }
        TC_MPI(MPI_Win_flush(1, win));
        TC_MPI(MPI_Get(back, 64, MPI_BYTE, 1, 0, 64, MPI_BYTE, win));
        TC_MPI(MPI_Win_unlock(1, win));
        double took = now() - t0;
        TC_CHECK(took < 0.2, "the epoch towards a target outside MPI took %.3f s", took);
        TC_CHECK(memcmp(back, src, 64) == 0, "a get from a target outside MPI read other bytes");
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 1) {
        long off = 0, bad = 0;
        for (int b = 0; b < SIZES; b++) {
            for (long i = 0; i < sizes[b]; i++)
                bad += mem[off + i] != val(9, 1, b, i);
            off += sizes[b];
        }
        TC_CHECK(bad == 0, "%ld wrong bytes put while this rank was outside MPI", bad);
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* 3. a counter at rank 0 raised under exclusive locks */
    if (me == 0)
        memset(mem, 0, 8);
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int k = 0; k < RAISES; k++) {
        long c = -1;
        TC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        TC_MPI(MPI_Get(&c, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win));
        TC_MPI(MPI_Win_flush(0, win));
        c++;
        TC_MPI(MPI_Put(&c, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win));
        TC_MPI(MPI_Win_unlock(0, win));
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0) {
        long c;
        memcpy(&c, mem, sizeof c);
        TC_CHECK(c == (long)RAISES * n, "counter %ld, want %ld", c, (long)RAISES * n);
    }

    TC_MPI(MPI_Win_free(&win));
    free(mem);
    free(src);
    free(back);
    return tc_finalize();
}
