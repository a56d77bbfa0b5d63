/* ranks: 2 4
 * timeout: 60
 * MPI_THREAD_MULTIPLE: the first small collective on a communicator whose ranks share memory
 * agrees on the slot exchange's segment (rank 0 of the communicator makes it and sends its
 * name down a tree). NTHREADS threads per rank each make that first call on their own
 * communicator at the same time, and rank 0 of thread t's communicator is world rank t mod
 * size, so every process is the maker for one thread and waits for another process's maker
 * in the others. An agreement that waits with the library lock held keeps the maker thread
 * of its process out while it waits for the maker thread of another process, which waits
 * the same way: this hung (MPICH's threads/comm/idup_comm_gen too); the makers start 50 ms
 * after the others to make sure of it. Each thread then checks
 * a few Allreduce, Allgather and Barrier results on its communicator.
 */
#include <pthread.h>
#include "../tc.h"

#define NTHREADS 4
#define ITERS 20

static MPI_Comm comms[NTHREADS];
static int errors[NTHREADS];

static void *run(void *arg)
{
    int t = (int)(long)arg, n, r;
    MPI_Comm c = comms[t];
    MPI_Comm_size(c, &n);
    MPI_Comm_rank(c, &r);
    /* The makers come last: the other threads are already waiting for them. */
    if (r == 0)
        tc_sleep_ms(50);
    for (int i = 0; i < ITERS; i++) {
        int v = r + i + t, sum = -1;
        if (MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, c) != MPI_SUCCESS || sum != n * (n - 1) / 2 + n * (i + t))
            errors[t]++;
        int all[64];
        if (MPI_Allgather(&v, 1, MPI_INT, all, 1, MPI_INT, c) != MPI_SUCCESS)
            errors[t]++;
        for (int k = 0; k < n; k++)
            if (all[k] != k + i + t)
                errors[t]++;
        if (MPI_Barrier(c) != MPI_SUCCESS)
            errors[t]++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = 0;
    tc_name = "slots_first_call";
    TC_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    TC_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &tc_rank));
    TC_MPI(MPI_Comm_size(MPI_COMM_WORLD, &tc_size));
    if (provided != MPI_THREAD_MULTIPLE)
        tc_die("MPI_Init_thread provided %d, not MPI_THREAD_MULTIPLE", provided);
    /* Communicator t's rank 0 is world rank t mod size. */
    for (int t = 0; t < NTHREADS; t++)
        TC_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, (tc_rank - t % tc_size + tc_size) % tc_size, &comms[t]));
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++)
        pthread_create(&th[t], NULL, run, (void *)(long)t);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < NTHREADS; t++) {
        TC_CHECK(errors[t] == 0, "thread %d: %d wrong results", t, errors[t]);
        MPI_Comm_free(&comms[t]);
    }
    return tc_finalize();
}
