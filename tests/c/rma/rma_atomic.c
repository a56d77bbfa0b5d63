/* ranks: 2 4
 * Atomicity and ordering of one-sided operations with concurrent origins (members on one
 * host, or spread over hosts: tests/c/rma/hosts.sh):
 *  - every rank takes tickets from one counter on every target with MPI_Fetch_and_op under
 *    a shared lock_all: the tickets of each target, gathered, are exactly 0 .. total-1
 *    (no ticket twice: each fetch-and-add is atomic);
 *  - every rank adds into one large strided array of doubles on each target with
 *    MPI_Accumulate (several pieces on the network path) at once: every element holds the
 *    exact sum;
 *  - MPI_Get_accumulate with MPI_REPLACE as an atomic swap: the values taken out and the
 *    one left form a permutation of what was put in;
 *  - a put then a get of the same location by one origin in one epoch (after a flush)
 *    reads the put; a large get (several pieces) reads back what fence-ordered puts wrote;
 *  - MPI_Compare_and_swap as a spin lock: increments of a plain integer done under it by
 *    every rank add up;
 *  - additions to one counter by every rank, alternating MPI_Fetch_and_op on MPI_INT and
 *    MPI_Accumulate of a derived datatype of one int (on one host the first is applied in
 *    place without the library's datatype machinery, the second is not): all add up, so
 *    the two kinds of accumulate are atomic with respect to each other. */
#include "../tc.h"

#define TICKETS 50
#define LEN (3 * 8192)          /* doubles in the accumulate array: 192 KiB */
#define STRIDE 3                /* every third double of it is a target */

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "rma_atomic");
    int me = tc_rank, n = tc_size;
    MPI_Aint bytes = 64 * sizeof(int) + LEN * sizeof(double);
    char *mem;
    MPI_Win win;
    TC_MPI(MPI_Win_allocate(bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    int *ints = (int *)mem;
    double *dbl = (double *)(mem + 64 * sizeof(int));
    memset(mem, 0, bytes);
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* Tickets from counter ints[0] of every target. */
    int *mine = malloc(sizeof(int) * TICKETS * n);
    TC_MPI(MPI_Win_lock_all(0, win));
    for (int i = 0; i < TICKETS; i++)
        for (int t = 0; t < n; t++) {
            int one = 1;
            TC_MPI(MPI_Fetch_and_op(&one, &mine[t * TICKETS + i], MPI_INT, t, 0, MPI_SUM, win));
        }
    TC_MPI(MPI_Win_unlock_all(win));
    for (int t = 0; t < n; t++) {
        int *all = me == t ? malloc(sizeof(int) * TICKETS * n) : NULL;
        TC_MPI(MPI_Gather(&mine[t * TICKETS], TICKETS, MPI_INT, all, TICKETS, MPI_INT, t, MPI_COMM_WORLD));
        if (me == t) {
            qsort(all, TICKETS * n, sizeof(int), cmp_int);
            for (int i = 0; i < TICKETS * n; i++)
                TC_CHECK(all[i] == i, "target %d: ticket %d is %d (taken twice or lost)", t, i, all[i]);
            free(all);
        }
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    TC_CHECK(ints[0] == TICKETS * n, "counter %d, want %d", ints[0], TICKETS * n);

    /* Concurrent strided accumulates of doubles into every target. */
    MPI_Datatype strided;
    TC_MPI(MPI_Type_vector(LEN / STRIDE, 1, STRIDE, MPI_DOUBLE, &strided));
    TC_MPI(MPI_Type_commit(&strided));
    double *add = malloc(sizeof(double) * (LEN / STRIDE));
    for (int i = 0; i < LEN / STRIDE; i++)
        add[i] = (me + 1) * 0.5 + i;
    TC_MPI(MPI_Win_lock_all(0, win));
    for (int round = 0; round < 3; round++)
        for (int k = 0; k < n; k++) {
            int t = (me + k) % n;
            TC_MPI(MPI_Accumulate(add, LEN / STRIDE, MPI_DOUBLE, t, 64 * sizeof(int), 1, strided, MPI_SUM, win));
        }
    TC_MPI(MPI_Win_unlock_all(win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    double ranks = 0.5 * n * (n + 1) / 2.0;
    for (int i = 0; i < LEN; i++) {
        double want = i % STRIDE ? 0.0 : 3.0 * (ranks + n * (i / STRIDE));
        if (dbl[i] != want) {
            TC_CHECK(0, "accumulated dbl[%d] = %f, want %f", i, dbl[i], want);
            break;
        }
    }
    MPI_Type_free(&strided);
    free(add);

    /* Atomic swaps on ints[1] of rank 0. */
    if (me == 0)
        ints[1] = -1;
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    int out[TICKETS];
    TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    for (int i = 0; i < TICKETS; i++) {
        int v = me * TICKETS + i;
        TC_MPI(MPI_Get_accumulate(&v, 1, MPI_INT, &out[i], 1, MPI_INT, 0, sizeof(int), 1, MPI_INT, MPI_REPLACE, win));
    }
    TC_MPI(MPI_Win_unlock(0, win));
    int *swapped = me == 0 ? malloc(sizeof(int) * (TICKETS * n + 1)) : NULL;
    TC_MPI(MPI_Gather(out, TICKETS, MPI_INT, swapped, TICKETS, MPI_INT, 0, MPI_COMM_WORLD));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0) {
        swapped[TICKETS * n] = ints[1];
        qsort(swapped, TICKETS * n + 1, sizeof(int), cmp_int);
        for (int i = 0; i <= TICKETS * n; i++)
            TC_CHECK(swapped[i] == i - 1, "swap %d: %d", i, swapped[i]);
        free(swapped);
    }

    /* Put, flush, get of the same location: the get sees the put. */
    int t = (me + 1) % n;
    TC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win));
    for (int i = 0; i < 20; i++) {
        int v = 1000 * me + i, back = -1;
        TC_MPI(MPI_Put(&v, 1, MPI_INT, t, (8 + me % 8) * sizeof(int), 1, MPI_INT, win));
        TC_MPI(MPI_Win_flush(t, win));
        TC_MPI(MPI_Get(&back, 1, MPI_INT, t, (8 + me % 8) * sizeof(int), 1, MPI_INT, win));
        TC_MPI(MPI_Win_flush(t, win));
        TC_CHECK(back == v, "get after put: %d, want %d", back, v);
    }
    TC_MPI(MPI_Win_unlock(t, win));

    /* Large puts ordered by fences, read back by a large get. */
    TC_MPI(MPI_Win_fence(0, win));
    double *big = malloc(sizeof(double) * LEN);
    for (int i = 0; i < LEN; i++)
        big[i] = me * 1e6 + i;
    TC_MPI(MPI_Put(big, LEN, MPI_DOUBLE, t, 64 * sizeof(int), LEN, MPI_DOUBLE, win));
    TC_MPI(MPI_Win_fence(0, win));
    int prev = (me + n - 1) % n;
    for (int i = 0; i < LEN; i++)
        if (dbl[i] != prev * 1e6 + i) {
            TC_CHECK(0, "large put: dbl[%d] = %f", i, dbl[i]);
            break;
        }
    memset(big, 0, sizeof(double) * LEN);
    TC_MPI(MPI_Get(big, LEN, MPI_DOUBLE, t, 64 * sizeof(int), LEN, MPI_DOUBLE, win));
    TC_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    for (int i = 0; i < LEN; i++)
        if (big[i] != me * 1e6 + i) {
            TC_CHECK(0, "large get: [%d] = %f", i, big[i]);
            break;
        }
    free(big);

    /* A spin lock made of Compare_and_swap on ints[2] of rank n-1 guards ints[3]. */
    if (me == n - 1)
        ints[2] = ints[3] = 0;
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    int owner = n - 1;
    TC_MPI(MPI_Win_lock_all(0, win));
    for (int i = 0; i < 10; i++) {
        int free_ = 0, taken = me + 1, prior = -1;
        do {
            TC_MPI(MPI_Compare_and_swap(&taken, &free_, &prior, MPI_INT, owner, 2 * sizeof(int), win));
            TC_MPI(MPI_Win_flush(owner, win));
        } while (prior != 0);
        int v;
        TC_MPI(MPI_Get(&v, 1, MPI_INT, owner, 3 * sizeof(int), 1, MPI_INT, win));
        TC_MPI(MPI_Win_flush(owner, win));
        v += 1;
        TC_MPI(MPI_Put(&v, 1, MPI_INT, owner, 3 * sizeof(int), 1, MPI_INT, win));
        TC_MPI(MPI_Win_flush(owner, win));
        TC_MPI(MPI_Compare_and_swap(&free_, &taken, &prior, MPI_INT, owner, 2 * sizeof(int), win));
        TC_MPI(MPI_Win_flush(owner, win));
        TC_CHECK(prior == taken, "lock released by rank %d held %d", me, prior);
    }
    TC_MPI(MPI_Win_unlock_all(win));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (me == owner)
        TC_CHECK(ints[3] == 10 * n, "increments under the CAS lock: %d, want %d", ints[3], 10 * n);

    /* Fetch-and-adds and accumulates of a derived type into ints[4] of rank 0, at once. */
    if (me == 0)
        ints[4] = 0;
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MPI_Datatype one_int;
    TC_MPI(MPI_Type_contiguous(1, MPI_INT, &one_int));
    TC_MPI(MPI_Type_commit(&one_int));
    TC_MPI(MPI_Win_lock_all(0, win));
    for (int i = 0; i < 20000; i++) {
        int one = 1, old;
        if (i % 2)
            TC_MPI(MPI_Fetch_and_op(&one, &old, MPI_INT, 0, 4 * sizeof(int), MPI_SUM, win));
        else
            TC_MPI(MPI_Accumulate(&one, 1, MPI_INT, 0, 4 * sizeof(int), 1, one_int, MPI_SUM, win));
    }
    TC_MPI(MPI_Win_unlock_all(win));
    TC_MPI(MPI_Type_free(&one_int));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0)
        TC_CHECK(ints[4] == 20000 * n, "fetch-and-adds and accumulates: %d, want %d", ints[4], 20000 * n);

    free(mine);
    TC_MPI(MPI_Win_free(&win));
    return tc_finalize();
}
