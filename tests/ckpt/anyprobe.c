/* An unmodified MPI program whose run depends on the order messages arrive in: a master
 * (rank 0) hands out tasks to workers and takes their results with MPI_Iprobe polling
 * (ANY_SOURCE, ANY_TAG; the number of unsuccessful probes before each success counts),
 * then with MPI_Waitany and MPI_Testsome over one receive per worker. It prints every
 * choice it made and, at the end, a hash of all of them; a worker's results depend on the
 * tasks it was given. A run that is replayed after a failure must make the same choices
 * as before it (message logging), so the printed choices and the final hash agree:
 * tests/ckpt/logging.sh recomputes the hash from the printed lines. The sum of all results
 * is the same in every run.
 * Arguments: tasks per phase, microseconds of work per task. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void spin_us(long us) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 1099511628211ULL; }

static uint64_t work(uint64_t task, long us) {
    spin_us(us);
    uint64_t x = task * 2654435761u + 1;
    for (int i = 0; i < 1000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x % 1000003;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int ntasks = argc > 1 ? atoi(argv[1]) : 200;
    long us = argc > 2 ? atol(argv[2]) : 2000;
    int workers = size - 1;
    enum { TASK = 1, STOP = 2, RESULT = 3, PHASE2 = 4 };
    if (rank == 0) {
        uint64_t hash = 14695981039346656037ULL, total = 0;
        /* Phase 1: polling with MPI_Iprobe. */
        uint64_t next = 0;
        int out = 0;
        for (int w = 1; w <= workers && next < (uint64_t)ntasks; w++, out++) {
            MPI_Send(&next, 1, MPI_UINT64_T, w, TASK, MPI_COMM_WORLD);
            next++;
        }
        while (out > 0) {
            int flag = 0;
            long misses = 0;
            MPI_Status st;
            while (!flag) {
                MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
                if (!flag) misses++;
            }
            uint64_t res[2];
            MPI_Recv(res, 2, MPI_UINT64_T, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            out--;
            total += res[1];
            printf("probe task %llu from %d after %ld misses\n", (unsigned long long)res[0], st.MPI_SOURCE, misses);
            hash = mix(mix(mix(hash, res[0]), (uint64_t)st.MPI_SOURCE), (uint64_t)misses);
            if (next < (uint64_t)ntasks) {
                MPI_Send(&next, 1, MPI_UINT64_T, st.MPI_SOURCE, TASK, MPI_COMM_WORLD);
                next++;
                out++;
            }
        }
        /* Phase 2: one receive per worker, MPI_Waitany and MPI_Testsome. */
        MPI_Request *rq = malloc(sizeof(MPI_Request) * workers);
        uint64_t (*res)[2] = malloc(sizeof(uint64_t[2]) * workers);
        int *idx = malloc(sizeof(int) * workers);
        next = 0;
        for (int w = 1; w <= workers; w++) {
            MPI_Send(&next, 1, MPI_UINT64_T, w, PHASE2, MPI_COMM_WORLD);
            next++;
            MPI_Irecv(res[w - 1], 2, MPI_UINT64_T, w, RESULT, MPI_COMM_WORLD, &rq[w - 1]);
        }
        int round = 0;
        while (1) {
            int got = 0;
            if (round++ % 2 == 0) {
                int i;
                MPI_Waitany(workers, rq, &i, MPI_STATUS_IGNORE);
                if (i == MPI_UNDEFINED) break;
                idx[0] = i;
                got = 1;
                printf("waitany worker %d task %llu\n", i + 1, (unsigned long long)res[i][0]);
            } else {
                long misses = 0;
                while (got == 0) {
                    MPI_Testsome(workers, rq, &got, idx, MPI_STATUSES_IGNORE);
                    if (got == MPI_UNDEFINED) break;
                    if (got == 0) misses++;
                }
                if (got == MPI_UNDEFINED) break;
                printf("testsome %d after %ld misses:", got, misses);
                for (int k = 0; k < got; k++) printf(" %d/%llu", idx[k] + 1, (unsigned long long)res[idx[k]][0]);
                printf("\n");
                hash = mix(hash, (uint64_t)misses);
            }
            for (int k = 0; k < got; k++) {
                int i = idx[k];
                total += res[i][1];
                hash = mix(mix(hash, res[i][0]), (uint64_t)i);
                if (next < (uint64_t)ntasks) {
                    MPI_Send(&next, 1, MPI_UINT64_T, i + 1, PHASE2, MPI_COMM_WORLD);
                    next++;
                    MPI_Irecv(res[i], 2, MPI_UINT64_T, i + 1, RESULT, MPI_COMM_WORLD, &rq[i]);
                }
            }
        }
        for (int w = 1; w <= workers; w++) MPI_Send(&next, 1, MPI_UINT64_T, w, STOP, MPI_COMM_WORLD);
        printf("total %llu\n", (unsigned long long)total);
        printf("hash %llu\n", (unsigned long long)hash);
        free(rq);
        free(res);
        free(idx);
    } else {
        /* A task with tag TASK is of phase 1 (its result goes back with tag 100+rank, so
         * the master's probe sees several tags), PHASE2 of phase 2; STOP ends. */
        while (1) {
            uint64_t task;
            MPI_Status st;
            MPI_Recv(&task, 1, MPI_UINT64_T, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            if (st.MPI_TAG == STOP) break;
            int phase = st.MPI_TAG == TASK ? 1 : 2;
            uint64_t r[2] = {task, work(task * (uint64_t)phase, us)};
            MPI_Send(r, 2, MPI_UINT64_T, 0, phase == 1 ? 100 + rank : RESULT, MPI_COMM_WORLD);
        }
    }
    MPI_Finalize();
    return 0;
}
