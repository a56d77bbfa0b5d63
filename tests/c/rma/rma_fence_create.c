/* ranks: 2 4
 * Fence epochs on windows over the application's memory (MPI_Win_create), where small puts
 * and gets between members of one host are staged in shared memory and applied by the
 * targets at the closing fence (docs/mpi5.md, "One-sided communication"):
 *  - in several epochs every rank puts blocks of many sizes into every other rank and gets
 *    blocks of every other rank's memory that their owner stored before the epoch: after
 *    each fence every block holds what its origin put and every get what the owner stored;
 *  - one epoch carries more than a target's staging inbox holds (the rest goes directly),
 *    mixed with puts too large to stage, zero-byte puts and gets, and a get of the rank's
 *    own memory: everything arrives. */
#include "../tc.h"

#define BLOCK 40            /* bytes per block slot: sizes 1 .. BLOCK */
#define SLOTS 64            /* block slots per origin */
#define ROUNDS 6
#define MANY 3000           /* one-int puts per origin in the overflowing epoch */
#define BIG 20000           /* bytes of each large put */

static unsigned char val(int who, int round, int slot, int i)
{
    return (unsigned char)(who * 31 + round * 7 + slot * 3 + i + 1);
}

static int len_of(int slot, int round)
{
    return 1 + (slot + round) % BLOCK;
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "rma_fence_create");
    int me = tc_rank, n = tc_size;
    /* Each rank's window: the blocks origins put (SLOTS per origin), the blocks the owner
     * stores for gets (SLOTS), MANY ints per origin, BIG bytes per origin. */
    size_t put_area = (size_t)n * SLOTS * BLOCK, get_area = (size_t)SLOTS * BLOCK;
    size_t ints_off = put_area + get_area, big_off = ints_off + (size_t)n * MANY * sizeof(int);
    size_t bytes = big_off + (size_t)n * BIG;
    unsigned char *mem = calloc(bytes, 1);
    MPI_Win win;
    TC_MPI(MPI_Win_create(mem, (MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    /* origin buffers stay untouched until the fence that completes their puts */
    unsigned char *src = malloc((size_t)n * SLOTS * BLOCK), *got = malloc((size_t)n * SLOTS * BLOCK);

    TC_MPI(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    for (int round = 0; round < ROUNDS; round++) {
        /* what the others get from this rank in this epoch */
        for (int slot = 0; slot < SLOTS; slot++)
            for (int i = 0; i < BLOCK; i++)
                mem[put_area + (size_t)slot * BLOCK + i] = val(me, round, slot, i);
        TC_MPI(MPI_Win_fence(0, win));
        memset(got, 0xee, (size_t)n * SLOTS * BLOCK);
        for (int t = 0; t < n; t++) {
            if (t == me)
                continue;
            for (int slot = 0; slot < SLOTS; slot++) {
                int len = len_of(slot, round);
                unsigned char *s = src + ((size_t)t * SLOTS + slot) * BLOCK;
                for (int i = 0; i < len; i++)
                    s[i] = val(me, round, slot, i);
                TC_MPI(MPI_Put(s, len, MPI_BYTE, t, (MPI_Aint)((me * SLOTS + slot) * BLOCK), len, MPI_BYTE, win));
                TC_MPI(MPI_Get(got + ((size_t)t * SLOTS + slot) * BLOCK, len, MPI_BYTE, t, (MPI_Aint)(put_area + (size_t)slot * BLOCK),
                               len, MPI_BYTE, win));
            }
        }
        TC_MPI(MPI_Win_fence(0, win));
        for (int o = 0; o < n; o++)
            for (int slot = 0; slot < SLOTS && o != me; slot++) {
                int len = len_of(slot, round);
                unsigned char *b = mem + ((size_t)o * SLOTS + slot) * BLOCK;
                for (int i = 0; i < len; i++)
                    if (b[i] != val(o, round, slot, i)) {
                        TC_CHECK(0, "round %d: block %d put by %d, byte %d: %d, want %d", round, slot, o, i, b[i], val(o, round, slot, i));
                        break;
                    }
            }
        for (int t = 0; t < n; t++)
            for (int slot = 0; slot < SLOTS && t != me; slot++) {
                int len = len_of(slot, round);
                unsigned char *g = got + ((size_t)t * SLOTS + slot) * BLOCK;
                for (int i = 0; i < len; i++)
                    if (g[i] != val(t, round, slot, i)) {
                        TC_CHECK(0, "round %d: get of block %d of %d, byte %d: %d, want %d", round, slot, t, i, g[i], val(t, round, slot, i));
                        break;
                    }
            }
    }

    /* One epoch with more than an inbox holds, large puts, empty transfers, a get of
     * this rank's own memory. */
    int *vals = malloc(sizeof(int) * MANY);
    unsigned char *bigsrc = malloc(BIG), own[BLOCK];
    for (int i = 0; i < MANY; i++)
        vals[i] = me * 100000 + i;
    for (int i = 0; i < BIG; i++)
        bigsrc[i] = (unsigned char)(me + i * 13);
    memset(own, 0, sizeof own);
    for (int t = 0; t < n; t++) {
        if (t == me)
            continue;
        for (int i = 0; i < MANY; i++) {
            TC_MPI(MPI_Put(&vals[i], 1, MPI_INT, t, (MPI_Aint)(ints_off + ((size_t)me * MANY + i) * sizeof(int)), 1, MPI_INT, win));
            if (i % 500 == 0)
                TC_MPI(MPI_Put(bigsrc, BIG, MPI_BYTE, t, (MPI_Aint)(big_off + (size_t)me * BIG), BIG, MPI_BYTE, win));
        }
        TC_MPI(MPI_Put(vals, 0, MPI_INT, t, 0, 0, MPI_INT, win));
        TC_MPI(MPI_Get(got, 0, MPI_BYTE, t, 0, 0, MPI_BYTE, win));
    }
    TC_MPI(MPI_Get(own, BLOCK, MPI_BYTE, me, (MPI_Aint)put_area, BLOCK, MPI_BYTE, win));
    TC_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    int *ints = (int *)(mem + ints_off);
    for (int o = 0; o < n; o++) {
        if (o == me)
            continue;
        for (int i = 0; i < MANY; i++)
            if (ints[o * MANY + i] != o * 100000 + i) {
                TC_CHECK(0, "many puts: int %d from %d is %d", i, o, ints[o * MANY + i]);
                break;
            }
        for (int i = 0; i < BIG; i++)
            if (mem[big_off + (size_t)o * BIG + i] != (unsigned char)(o + i * 13)) {
                TC_CHECK(0, "large put from %d: byte %d", o, i);
                break;
            }
    }
    for (int i = 0; i < BLOCK; i++)
        TC_CHECK(own[i] == val(me, ROUNDS - 1, 0, i), "get of own memory: byte %d", i);

    TC_MPI(MPI_Win_free(&win));
    free(mem);
    free(src);
    free(got);
    free(vals);
    free(bigsrc);
    return tc_finalize();
}
