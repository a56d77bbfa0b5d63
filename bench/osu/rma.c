/*
 * rma: one-sided micro-benchmarks in the style of the OSU micro-benchmarks (osu_put_latency,
 * osu_get_latency, osu_acc_latency, osu_fop_latency, osu_cas_latency, osu_put_bw, osu_get_bw),
 * one program built with each MPI's own mpicc so that the same loops run on every
 * implementation. Rank 0 is the origin, rank 1 the target; further ranks only take part in
 * window creation and the barriers.
 *
 *   mpiexec -n 2 ./rma -b LIST [-s SYNCS] [-w WINDOWS] [-m MAXBYTES] [-M MINBYTES]
 *                      [-f FACTOR] [-t MS_PER_SIZE] [-k BATCHES] [-p]
 *
 * LIST (comma-separated; for every window, then every synchronization, the listed tests run
 * in the order below):
 *   put_lat get_lat acc_lat   one operation of `size` bytes per epoch: µs per operation
 *                             (accumulate: MPI_SUM on MPI_UNSIGNED_CHAR, an integer type
 *                             every MPI accepts with MPI_SUM for any byte count)
 *   fop_lat cas_lat           MPI_Fetch_and_op (MPI_SUM) and MPI_Compare_and_swap on one
 *                             MPI_LONG_LONG: µs per operation, printed as size 8
 *   put_bw get_bw             windows of 64 operations to consecutive displacements, then
 *                             one synchronization: MB/s (10^6 bytes)
 * SYNCS (default lock,flush,fence), as OSU's -s:
 *   lock    every epoch is MPI_Win_lock(MPI_LOCK_SHARED) ... MPI_Win_unlock (OSU's lock)
 *   flush   one lock around the timed loop, MPI_Win_flush ends each epoch (OSU's flush)
 *   fence   MPI_Win_fence ends each epoch; for the latency tests both ranks take turns as
 *           origin (put to 1, fence, fence; rank 1: fence, put to 0, fence) and the time is
 *           per operation, total / (2 * iterations), as osu_put_latency -s fence does
 * WINDOWS (default allocate,create): memory from MPI_Win_allocate, or malloc'ed memory
 * exposed with MPI_Win_create (the flavor that cannot be one shared segment).
 *
 * Sizes go from MINBYTES (default 1) to MAXBYTES (default 1 MiB), multiplied by FACTOR
 * (default 2); MAXBYTES itself is always measured. Iterations: rank 0 times a short warm-up
 * and picks a count so that one size takes about MS_PER_SIZE milliseconds (default 60), at
 * least 10 and at most 10000 (1000 above 8 KiB; a tenth of that for the bw tests, whose
 * unit is 64 operations). With -k K the timed loop runs K times and the fastest is kept.
 * -p pins rank r to the (r mod n)-th allowed CPU (launcher binding should then be off).
 *
 * Output on rank 0, one line per test and size (rank 0's time, as OSU reports it):
 *   TEST/SYNC/WINDOW size value
 * Lines starting with '#' are comments.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64

enum sync { LOCK, FLUSH, FENCE };
static const char *sync_names[] = {"lock", "flush", "fence"};

static int rank, nproc;
static char *sbuf, *rbuf, *wbuf;
static MPI_Win win;
static double ms_per_size = 60;
static size_t factor = 2;
static int batches = 1;

static void die(const char *msg)
{
    fprintf(stderr, "rma rank %d: %s\n", rank, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static int pin_self(void)
{
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return -1;
    int n = CPU_COUNT(&allowed), want = rank % (n > 0 ? n : 1), seen = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &allowed))
            continue;
        if (seen++ == want) {
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            return sched_setaffinity(0, sizeof one, &one) == 0 ? c : -1;
        }
    }
    return -1;
}

/* One operation of n bytes at displacement off of `target`'s window. */
typedef void (*op_fn)(size_t n, int target, size_t off);

static void op_put(size_t n, int target, size_t off)
{
    MPI_Put(sbuf + off, (int)n, MPI_CHAR, target, (MPI_Aint)off, (int)n, MPI_CHAR, win);
}

static void op_get(size_t n, int target, size_t off)
{
    MPI_Get(rbuf + off, (int)n, MPI_CHAR, target, (MPI_Aint)off, (int)n, MPI_CHAR, win);
}

static void op_acc(size_t n, int target, size_t off)
{
    MPI_Accumulate(sbuf + off, (int)n, MPI_UNSIGNED_CHAR, target, (MPI_Aint)off, (int)n,
                   MPI_UNSIGNED_CHAR, MPI_SUM, win);
}

static void op_fop(size_t n, int target, size_t off)
{
    (void)n;
    (void)off;
    MPI_Fetch_and_op(sbuf, rbuf, MPI_LONG_LONG, target, 0, MPI_SUM, win);
}

static void op_cas(size_t n, int target, size_t off)
{
    (void)n;
    (void)off;
    MPI_Compare_and_swap(sbuf, sbuf + sizeof(long long), rbuf, MPI_LONG_LONG, target, 0, win);
}

static const struct test {
    const char *name;
    op_fn op;
    int burst;      /* operations per epoch: 1 for latency, WINDOW for bandwidth */
    int fixed_size; /* the atomics work on one element whatever the size range */
} tests[] = {
    {"put_lat", op_put, 1, 0}, {"get_lat", op_get, 1, 0}, {"acc_lat", op_acc, 1, 0},
    {"fop_lat", op_fop, 1, 8}, {"cas_lat", op_cas, 1, 8},
    {"put_bw", op_put, WINDOW, 0}, {"get_bw", op_get, WINDOW, 0},
};

static const struct test *cur;
static enum sync cur_sync;

/* `reps` epochs of the current test; returns rank 0's time for them (other ranks: 0). Opening
 * and closing the access epoch (the lock of flush, the first and last fence) are not timed. */
static double unit(size_t n, int reps)
{
    if (rank > 1) {
        if (cur_sync == FENCE) {
            MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
            for (int i = 0; i < reps * (cur->burst == 1 ? 2 : 1); i++)
                MPI_Win_fence(0, win);
            MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
        }
        return 0;
    }
    int b = cur->burst;
    double t = 0, t0;
    switch (cur_sync) {
    case LOCK:
        if (rank != 0)
            return 0;
        t0 = MPI_Wtime();
        for (int i = 0; i < reps; i++) {
            MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
            for (int j = 0; j < b; j++)
                cur->op(n, 1, (size_t)j * n);
            MPI_Win_unlock(1, win);
        }
        t = MPI_Wtime() - t0;
        break;
    case FLUSH:
        if (rank != 0)
            return 0;
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
        t0 = MPI_Wtime();
        for (int i = 0; i < reps; i++) {
            for (int j = 0; j < b; j++)
                cur->op(n, 1, (size_t)j * n);
            MPI_Win_flush(1, win);
        }
        t = MPI_Wtime() - t0;
        MPI_Win_unlock(1, win);
        break;
    case FENCE:
        MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
        t0 = MPI_Wtime();
        for (int i = 0; i < reps; i++) {
            if (b == 1) {
                /* ping-pong of operations: each rank is origin every other epoch */
                if (rank == 0)
                    cur->op(n, 1, 0);
                MPI_Win_fence(0, win);
                if (rank == 1)
                    cur->op(n, 0, 0);
                MPI_Win_fence(0, win);
            } else {
                if (rank == 0)
                    for (int j = 0; j < b; j++)
                        cur->op(n, 1, (size_t)j * n);
                MPI_Win_fence(0, win);
            }
        }
        t = MPI_Wtime() - t0;
        MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
        if (b == 1)
            t /= 2;
        break;
    }
    return rank == 0 ? t : 0;
}

/* Rank 0 times a warm-up of a few units and decides the count; every rank runs it. */
static int calibrate(size_t n, int maxreps)
{
    int warm = n > 65536 || cur->burst > 1 ? 2 : 10;
    MPI_Barrier(MPI_COMM_WORLD);
    double per = unit(n, warm) / warm;
    MPI_Barrier(MPI_COMM_WORLD);
    int reps = 10;
    if (rank == 0 && per > 0) {
        double want = ms_per_size / 1000.0 / per, least = 10;
        if (least * per * 1000.0 > 4 * ms_per_size)
            least = 3;
        reps = want < least ? (int)least : want > maxreps ? maxreps : (int)want;
    }
    MPI_Bcast(&reps, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return reps;
}

/* The fastest of `batches` batches, in seconds per unit (rank 0). */
static double measure(size_t n, int reps)
{
    double best = 0;
    for (int k = 0; k < batches; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = unit(n, reps) / reps;
        if (k == 0 || t < best)
            best = t;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return best;
}

static void run(const char *wname, size_t lo, size_t hi)
{
    if (cur->fixed_size)
        lo = hi = (size_t)cur->fixed_size;
    /* An untimed budget of the first size: the first epochs of a test pay for setting up
     * (page faults, an implementation's first lock or connection), up to 1000x an epoch. */
    unit(lo, calibrate(lo, cur->burst > 1 ? 1000 : 10000));
    MPI_Barrier(MPI_COMM_WORLD);
    size_t n = lo;
    for (;;) {
        int maxreps = n > 8192 ? 1000 : 10000;
        if (cur->burst > 1)
            maxreps /= 10;
        int reps = calibrate(n, maxreps);
        double t = measure(n, reps);
        if (rank == 0) {
            if (cur->burst > 1)
                printf("%s/%s/%s %zu %.2f\n", cur->name, sync_names[cur_sync], wname, n,
                       t > 0 ? (double)n * cur->burst / t / 1e6 : 0);
            else
                printf("%s/%s/%s %zu %.3f\n", cur->name, sync_names[cur_sync], wname, n,
                       t * 1e6);
            fflush(stdout);
        }
        if (n >= hi)
            break;
        n = n == 0 ? 1 : n * factor;
        if (n > hi)
            n = hi;
    }
}

static int listed(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += len)
        if ((p == list || p[-1] == ',') && (p[len] == ',' || p[len] == '\0'))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nproc);
    const char *list = "put_lat,get_lat", *syncs = "lock,flush,fence",
               *windows = "allocate,create";
    size_t lo = 1, hi = 1 << 20;
    int pin = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-b") && i + 1 < argc) list = argv[++i];
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) syncs = argv[++i];
        else if (!strcmp(argv[i], "-w") && i + 1 < argc) windows = argv[++i];
        else if (!strcmp(argv[i], "-m") && i + 1 < argc) hi = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-M") && i + 1 < argc) lo = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-f") && i + 1 < argc) factor = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) ms_per_size = atof(argv[++i]);
        else if (!strcmp(argv[i], "-k") && i + 1 < argc) batches = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-p")) pin = 1;
        else {
            if (rank == 0)
                fprintf(stderr, "usage: rma -b TEST[,TEST...] [-s lock,flush,fence] "
                        "[-w allocate,create] [-m MAX] [-M MIN] [-f FACTOR] [-t MS] "
                        "[-k BATCHES] [-p]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (nproc < 2) {
        if (rank == 0)
            printf("# rma needs at least 2 ranks; nothing run\n");
        MPI_Finalize();
        return 0;
    }
    if (lo < 1)
        lo = 1;
    if (hi < sizeof(long long))
        hi = sizeof(long long);
    if (lo > hi)
        lo = hi;
    if (factor < 2)
        factor = 2;
    if (batches < 1)
        batches = 1;
    char *copy = strdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < sizeof tests / sizeof tests[0] && strcmp(tests[i].name, tok))
            i++;
        if (i == sizeof tests / sizeof tests[0]) {
            if (rank == 0)
                fprintf(stderr, "rma: unknown test %s\n", tok);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    free(copy);
    if (pin && pin_self() < 0 && rank == 0)
        printf("# could not pin\n");
    /* Room for a bandwidth window of the largest size; the atomics use the first 16 bytes. */
    size_t cap = hi * WINDOW;
    sbuf = malloc(cap);
    rbuf = malloc(cap);
    if (!sbuf || !rbuf)
        die("out of memory");
    memset(sbuf, 1, cap);
    memset(rbuf, 0, cap);
    /* the atomics add 1 and compare with 0: small values that never overflow */
    long long one = 1, zero = 0;
    memcpy(sbuf, &one, sizeof one);
    memcpy(sbuf + sizeof one, &zero, sizeof zero);
    if (rank == 0)
        printf("# rma ranks %d sizes %zu..%zu ms_per_size %.0f\n", nproc, lo, hi, ms_per_size);
    for (int w = 0; w < 2; w++) {
        const char *wname = w == 0 ? "allocate" : "create";
        if (!listed(windows, wname))
            continue;
        MPI_Info info = MPI_INFO_NULL;
        if (w == 0) {
            if (MPI_Win_allocate((MPI_Aint)cap, 1, info, MPI_COMM_WORLD, &wbuf, &win) != MPI_SUCCESS)
                die("MPI_Win_allocate failed");
        } else {
            wbuf = malloc(cap);
            if (!wbuf)
                die("out of memory");
            if (MPI_Win_create(wbuf, (MPI_Aint)cap, 1, info, MPI_COMM_WORLD, &win) != MPI_SUCCESS)
                die("MPI_Win_create failed");
        }
        /* zero through an epoch of our own, so the atomics start from a defined value */
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
        memset(wbuf, 0, cap);
        MPI_Win_unlock(rank, win);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int s = LOCK; s <= FENCE; s++) {
            if (!listed(syncs, sync_names[s]))
                continue;
            cur_sync = (enum sync)s;
            for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
                if (!listed(list, tests[i].name))
                    continue;
                cur = &tests[i];
                run(wname, lo, hi);
            }
        }
        MPI_Win_free(&win);
        if (w == 1)
            free(wbuf);
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
