/*
 * Test program for process images (tests/ckpt/run.sh).  Computes a checksum over memory it
 * keeps in several kinds of places, takes an image half-way with
 * MPIX_Steadfast_image_checkpoint, optionally kills itself right after (as a crash would),
 * and finishes.  A run restored from the image must print exactly what an uninterrupted
 * run prints.
 *
 *   image_prog IMAGE HEAP_MIB [kill|killall|thread]
 *
 * Two images are taken: IMAGE at step 100000 and IMAGE.2 at step 150000.  `kill`: SIGKILL
 * right after the first image (in the original process); `killall`: after every image taken
 * by a process that was not just restored from it (so a process restored from IMAGE takes
 * IMAGE.2 and is killed too); `thread` starts a second thread first: the checkpoint must be
 * refused (exit status 3).
 *
 * What lives across the checkpoint: a small-block heap (brk) structure, a large malloc of
 * HEAP_MIB MiB (its own mapping), libm loaded with dlopen and called through a function
 * pointer, a partly filled stdio buffer (text printed before the checkpoint and not yet
 * flushed), and locals on the stack.  After the checkpoint the heap grows further.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include <mpi.h>
#include <mpi-ext.h>

struct node {
    struct node *next;
    uint64_t value;
};

static void *sleeper(void *arg) {
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s IMAGE HEAP_MIB [kill|killall|thread]\n", argv[0]);
        return 2;
    }
    const char *image = argv[1];
    size_t big_len = (size_t)atol(argv[2]) << 20;
    int kill_after = argc > 3 && strcmp(argv[3], "kill") == 0;
    int kill_all = argc > 3 && strcmp(argv[3], "killall") == 0;
    char image2[4096];
    snprintf(image2, sizeof image2, "%s.2", image);
    if (argc > 3 && strcmp(argv[3], "thread") == 0) {
        pthread_t t;
        pthread_create(&t, NULL, sleeper, NULL);
    }

    /* stdout is a file or pipe here: fully buffered, so this line sits in the buffer
     * (in the heap) at the checkpoint. */
    printf("start big=%zu\n", big_len);

    void *libm = dlopen("libm.so.6", RTLD_NOW);
    if (!libm) {
        fprintf(stderr, "dlopen libm: %s\n", dlerror());
        return 2;
    }
    double (*cosp)(double) = (double (*)(double))dlsym(libm, "cos");
    double (*sqrtp)(double) = (double (*)(double))dlsym(libm, "sqrt");
    if (!cosp || !sqrtp) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 2;
    }

    unsigned char *big = big_len ? malloc(big_len) : NULL;
    for (size_t i = 0; i < big_len; i++)
        big[i] = (unsigned char)(i * 131 + 7);

    struct node *list = NULL;
    uint64_t h = 1469598103934665603ULL;
    double acc = 0.0;
    int restored = -1;
    for (int step = 0; step < 200000; step++) {
        struct node *n = malloc(sizeof *n);
        n->value = (uint64_t)step * 2654435761u;
        n->next = list;
        list = n;
        acc += cosp(step * 0.001) * sqrtp((double)step);
        h = mix(h, n->value);
        if (step == 100000 || step == 150000) {
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            int rc = MPIX_Steadfast_image_checkpoint(step == 100000 ? image : image2, &restored);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            if (rc != MPI_SUCCESS) {
                fprintf(stderr, "checkpoint failed: %d\n", rc);
                return 3;
            }
            /* Only on stderr: stdout must be the same in every kind of run. */
            fprintf(stderr, "checkpoint returned restored=%d", restored);
            if (!restored)
                fprintf(stderr, " after %.1f ms",
                        (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
            fprintf(stderr, "\n");
            if (!restored && ((kill_after && step == 100000) || kill_all))
                raise(SIGKILL);
        }
        if (step % 50000 == 0)
            printf("step %d h=%016llx\n", step, (unsigned long long)h);
    }
    /* Heap growth after the checkpoint: many more blocks and a few large ones. */
    char *grown[64];
    for (int i = 0; i < 64; i++) {
        grown[i] = malloc(4096 * (size_t)(i + 1));
        memset(grown[i], i, 4096 * (size_t)(i + 1));
        h = mix(h, (uint64_t)grown[i][i]);
    }
    uint64_t bigsum = 0;
    for (size_t i = 0; i < big_len; i += 4093)
        bigsum += big[i];
    uint64_t listsum = 0;
    for (struct node *n = list; n; n = n->next)
        listsum = mix(listsum, n->value);
    printf("done h=%016llx list=%016llx big=%llu acc=%.6f\n", (unsigned long long)h,
           (unsigned long long)listsum, (unsigned long long)bigsum, acc);
    for (int i = 0; i < 64; i++)
        free(grown[i]);
    free(big);
    dlclose(libm);
    return 0;
}
