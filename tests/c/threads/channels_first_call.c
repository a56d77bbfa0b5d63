/* ranks: 2 4
 * timeout: 60
 * MPI_THREAD_MULTIPLE: the first channel broadcast on a communicator whose ranks share
 * memory (64 KiB, which the default rule sends over the shared-memory channels) agrees on
 * the channel segment (rank 0 of the communicator makes it and sends its name down a
 * tree). NTHREADS threads per rank each make that first call on their own communicator at
 * the same time, and rank 0 of thread t's communicator is world rank t mod size, so every
 * process is the maker for one thread and waits for another process's maker in the others.
 * An agreement that waited with the library lock held would keep the maker thread of its
 * process out while it waits for the maker of another process, which waits the same way;
 * the makers start 50 ms after the others to make sure of it. Each thread then checks a
 * few broadcasts from every root of its communicator.
 */
#include <pthread.h>
#include <stdlib.h>
#include "../tc.h"

#define NTHREADS 4
#define ITERS 8
#define BYTES 65536

static MPI_Comm comms[NTHREADS];
static int errors[NTHREADS];

static void *run(void *arg)
{
    int t = (int)(long)arg, n, r;
    MPI_Comm c = comms[t];
    MPI_Comm_size(c, &n);
    MPI_Comm_rank(c, &r);
    unsigned char *b = malloc(BYTES);
    if (!b) {
        errors[t]++;
        return NULL;
    }
    /* The makers come last: the other threads are already waiting for them. */
    if (r == 0)
        tc_sleep_ms(50);
    for (int i = 0; i < ITERS * n; i++) {
        int root = i % n;
        for (int k = 0; k < BYTES; k++)
            b[k] = r == root ? (unsigned char)(k * 3 + i + t) : 0;
        if (MPI_Bcast(b, BYTES, MPI_BYTE, root, c) != MPI_SUCCESS)
            errors[t]++;
        for (int k = 0; k < BYTES; k++)
            if (b[k] != (unsigned char)(k * 3 + i + t)) {
                errors[t]++;
                break;
            }
    }
    free(b);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = 0;
    tc_name = "channels_first_call";
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
