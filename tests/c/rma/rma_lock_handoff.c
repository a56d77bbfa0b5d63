/* ranks: 2 4
 * timeout: 60
 * Exclusive locks on one target handed between its host's members and the members of other
 * hosts (tests/c/rma/hosts.sh spreads the ranks: with 2 per host, rank 1 shares rank 0's
 * host and ranks 2 and 3 reach it over the network), the pattern of MPICH's
 * linked_list_bench_lock_excl: rank 1 must take rank 0's exclusive lock ROUNDS times, pausing
 * between rounds, while every other rank, rank 0 included, takes and drops the same lock as
 * fast as it can until rank 1 is done. Rank 1 must get its turns: with a protocol that lets
 * the requests of other hosts, queued again during each pause, keep it out, it never finishes
 * (it did not within 60 s when a host's lockers stood back whenever any request of another
 * host was queued). Under the lock each holder reads and rewrites a counter with a get and a
 * put (not atomic by themselves), so a lock held by two at once loses updates: the counters
 * must equal the number of times each side incremented them. */
#include <unistd.h>
#include "../tc.h"

#define ROUNDS 100

/* Window of rank 0: [0] rank 1's count, [1] the others' count, [2] rank 1's done flag. */
static void locked_increment(MPI_Win win, int slot)
{
    int v = -1;
    TC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
    TC_MPI(MPI_Get(&v, 1, MPI_INT, 0, slot, 1, MPI_INT, win));
    TC_MPI(MPI_Win_flush(0, win));
    v++;
    TC_MPI(MPI_Put(&v, 1, MPI_INT, 0, slot, 1, MPI_INT, win));
    TC_MPI(MPI_Win_unlock(0, win));
}

/* The others' lock: a short look at the done flag, as a reader chasing a list's tail. */
static int locked_peek(MPI_Win win)
{
    int done = -1;
    TC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
    TC_MPI(MPI_Get(&done, 1, MPI_INT, 0, 2, 1, MPI_INT, win));
    TC_MPI(MPI_Win_unlock(0, win));
    return done;
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "rma_lock_handoff");
    int me = tc_rank;
    int *mem;
    MPI_Win win;
    TC_MPI(MPI_Win_allocate(3 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    mem[0] = mem[1] = mem[2] = 0;
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));

    long held = 0, incs = 0;
    if (me == 1) {
        for (int i = 0; i < ROUNDS; i++) {
            locked_increment(win, 0);
            /* Time for the others to queue up again. */
            usleep(500);
        }
        int one = 1;
        TC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        TC_MPI(MPI_Put(&one, 1, MPI_INT, 0, 2, 1, MPI_INT, win));
        TC_MPI(MPI_Win_unlock(0, win));
    } else {
        int flag;
        while (!locked_peek(win)) {
            held++;
            if (held % 8 == 0) {
                locked_increment(win, 1);
                incs++;
            }
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        }
    }
    long others = me == 1 ? 0 : incs, total = 0;
    TC_MPI(MPI_Reduce(&others, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0) {
        TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        int c[3];
        TC_MPI(MPI_Get(c, 3, MPI_INT, 0, 0, 3, MPI_INT, win));
        TC_MPI(MPI_Win_unlock(0, win));
        TC_CHECK(c[0] == ROUNDS, "rank 1's count is %d, want %d (an update was lost)", c[0], ROUNDS);
        TC_CHECK(c[1] == total, "the others' count is %d, want %ld (an update was lost)", c[1], total);
        TC_CHECK(c[2] == 1, "done flag %d", c[2]);
    }
    TC_MPI(MPI_Win_free(&win));
    return tc_finalize();
}
