/*
 * osu: micro-benchmarks in the style of the OSU micro-benchmarks, one program for every test,
 * built with each MPI's own mpicc so that the same loops run on every implementation.
 *
 *   mpiexec -n N ./osu -b LIST [-m MAXBYTES] [-M MINBYTES] [-f FACTOR] [-t MS_PER_SIZE]
 *                   [-k BATCHES] [-p] [-T]
 *
 * LIST is a comma-separated list of tests, run in that order in one launch:
 *   latency   ping-pong between ranks 0 and 1 (osu_latency): half round trip, µs
 *   bw        rank 0 streams windows of 64 MPI_Isend to rank 1, which answers every window
 *             with a 4-byte ack (osu_bw): MB/s (10^6 bytes)
 *   bibw      both ranks stream windows of 64 at each other (osu_bibw): MB/s, both directions
 *   mr        N/2 pairs (rank i sends to i + N/2) stream windows of 64 (osu_mbw_mr): total
 *             messages per second
 *   pairs     every rank ping-pongs with rank r xor 1, all pairs at once (with more ranks than
 *             CPUs, each hop hands a CPU from one process to another): half round trip of the
 *             slowest rank, µs
 *   ring      one message passed round the ranks 0 -> 1 -> ... -> N-1 -> 0: time per hop of
 *             the slowest rank, µs
 *   barrier bcast reduce allreduce gather scatter allgather alltoall reduce_scatter scan
 *             blocking collectives, timed as osu_<name> does: every call timed on its own with
 *             a barrier between calls, µs per call averaged over the ranks (min and max too)
 *   iallreduce ibcast
 *             the nonblocking overlap test (osu_iallreduce/osu_ibcast): pure communication time
 *             (start + wait), then start, compute for that long, wait; prints the overall time
 *             and the overlap percentage 100 * (1 - (overall - compute) / pure)
 *
 * Sizes go from MINBYTES (default 4; 0 is allowed, then 1 follows it) to MAXBYTES (default
 * 1 MiB), multiplied by FACTOR (default 2) each step; MAXBYTES itself is always measured. For collectives the size is what OSU uses: the message of Bcast, the
 * vector of Reduce/Allreduce/Reduce_scatter/Scan (MPI_FLOAT, MPI_SUM; Reduce_scatter gives each
 * rank size/N bytes), the block each rank sends in Gather/Scatter/Allgather/Alltoall.
 *
 * Iterations: rank 0 times a short warm-up and picks a count so that one size takes about
 * MS_PER_SIZE milliseconds (default 60) of wall time, at least 10 (3 where 10 would take over
 * 4 budgets) and at most 10000 (1000 above 8 KiB);
 * every rank runs that count (it is broadcast, untimed). With -k K (default 1) the timed loop
 * runs K times and each rank keeps its fastest batch: steadier on a machine shared with other
 * work (the regression check uses it), no longer quite OSU's single average. With -p, rank r pins itself to the
 * (r mod n)-th allowed CPU (launcher binding should then be off). With -T every rank asks
 * for MPI_THREAD_MULTIPLE (MPI_Init_thread), as mpi4py does by default.
 *
 * Output on rank 0, one line per test and size:
 *   test size value [min max]      (value: µs, MB/s or messages/s as above)
 *   iallreduce size overall_us overlap_pct pure_us compute_us
 * Lines starting with '#' are comments. A test that needs more ranks than it has (latency on
 * one rank) prints a comment and is skipped.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64
#define TAG 11

static int rank, nproc;
static char *sbuf, *rbuf;
static size_t cap;
static double ms_per_size = 60;
static size_t factor = 2;

static void die(const char *msg)
{
    fprintf(stderr, "osu rank %d: %s\n", rank, msg);
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

/* One timed unit of each test; returns the time this rank counts for it. */
typedef double (*unit_fn)(size_t n, int reps);

static double t_latency(size_t n, int reps)
{
    double t0 = MPI_Wtime();
    for (int i = 0; i < reps; i++) {
        if (rank == 0) {
            MPI_Send(sbuf, (int)n, MPI_CHAR, 1, TAG, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int)n, MPI_CHAR, 1, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(rbuf, (int)n, MPI_CHAR, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, (int)n, MPI_CHAR, 0, TAG, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - t0;
}

/* One window of WINDOW messages from `from` to `to`, then a 4-byte ack back (osu_bw). */
static double stream(size_t n, int reps, int from, int to)
{
    MPI_Request req[WINDOW];
    double t0 = MPI_Wtime();
    for (int i = 0; i < reps; i++) {
        for (int w = 0; w < WINDOW; w++) {
            if (rank == from)
                MPI_Isend(sbuf + (size_t)w * n, (int)n, MPI_CHAR, to, TAG, MPI_COMM_WORLD, &req[w]);
            else
                MPI_Irecv(rbuf + (size_t)w * n, (int)n, MPI_CHAR, from, TAG, MPI_COMM_WORLD, &req[w]);
        }
        MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
        if (rank == from)
            MPI_Recv(rbuf, 4, MPI_CHAR, to, TAG + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
            MPI_Send(sbuf, 4, MPI_CHAR, from, TAG + 1, MPI_COMM_WORLD);
    }
    return MPI_Wtime() - t0;
}

static double t_bw(size_t n, int reps)
{
    if (rank > 1)
        return 0;
    return stream(n, reps, 0, 1);
}

static double t_bibw(size_t n, int reps)
{
    if (rank > 1)
        return 0;
    MPI_Request req[2 * WINDOW];
    int peer = 1 - rank;
    double t0 = MPI_Wtime();
    for (int i = 0; i < reps; i++) {
        int k = 0;
        for (int w = 0; w < WINDOW; w++)
            MPI_Irecv(rbuf + (size_t)w * n, (int)n, MPI_CHAR, peer, TAG, MPI_COMM_WORLD, &req[k++]);
        for (int w = 0; w < WINDOW; w++)
            MPI_Isend(sbuf + (size_t)w * n, (int)n, MPI_CHAR, peer, TAG, MPI_COMM_WORLD, &req[k++]);
        MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
    }
    return MPI_Wtime() - t0;
}

static double t_mr(size_t n, int reps)
{
    int half = nproc / 2;
    if (rank >= 2 * half)
        return 0;
    int from = rank < half ? rank : rank - half;
    return stream(n, reps, from, from + half);
}

/* One hop of a ping-pong: send to `to` then receive from `from`, or the other way round. */
static void hop(size_t n, int to, int from, int send_first)
{
    if (send_first)
        MPI_Send(sbuf, (int)n, MPI_CHAR, to, TAG, MPI_COMM_WORLD);
    MPI_Recv(rbuf, (int)n, MPI_CHAR, from, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (!send_first)
        MPI_Send(sbuf, (int)n, MPI_CHAR, to, TAG, MPI_COMM_WORLD);
}

static double t_pairs(size_t n, int reps)
{
    int peer = rank ^ 1;
    if (peer >= nproc)
        return 0;
    double t0 = MPI_Wtime();
    for (int i = 0; i < reps; i++)
        hop(n, peer, peer, rank < peer);
    return MPI_Wtime() - t0;
}

static double t_ring(size_t n, int reps)
{
    int next = (rank + 1) % nproc, prev = (rank + nproc - 1) % nproc;
    double t0 = MPI_Wtime();
    for (int i = 0; i < reps; i++)
        hop(n, next, prev, rank == 0);
    return MPI_Wtime() - t0;
}

enum { BARRIER, BCAST, REDUCE, ALLREDUCE, GATHER, SCATTER, ALLGATHER, ALLTOALL, RSCATTER, SCAN,
       NCOLL };
static const char *coll_names[NCOLL] = {"barrier", "bcast", "reduce", "allreduce", "gather",
                                        "scatter", "allgather", "alltoall", "reduce_scatter",
                                        "scan"};
static int cur_coll;
static int *rcounts;

static void coll_call(int c, size_t n)
{
    int cnt = (int)(n / sizeof(float));
    switch (c) {
    case BARRIER: MPI_Barrier(MPI_COMM_WORLD); break;
    case BCAST: MPI_Bcast(sbuf, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD); break;
    case REDUCE: MPI_Reduce(sbuf, rbuf, cnt, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case ALLREDUCE: MPI_Allreduce(sbuf, rbuf, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case GATHER: MPI_Gather(sbuf, (int)n, MPI_CHAR, rbuf, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD); break;
    case SCATTER: MPI_Scatter(sbuf, (int)n, MPI_CHAR, rbuf, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD); break;
    case ALLGATHER: MPI_Allgather(sbuf, (int)n, MPI_CHAR, rbuf, (int)n, MPI_CHAR, MPI_COMM_WORLD); break;
    case ALLTOALL: MPI_Alltoall(sbuf, (int)n, MPI_CHAR, rbuf, (int)n, MPI_CHAR, MPI_COMM_WORLD); break;
    case RSCATTER: {
        int per = cnt / nproc > 0 ? cnt / nproc : 1;
        for (int i = 0; i < nproc; i++)
            rcounts[i] = per;
        MPI_Reduce_scatter(sbuf, rbuf, rcounts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    }
    default: MPI_Scan(sbuf, rbuf, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    }
}

/* As OSU: each call timed on its own, a barrier (untimed) between calls. */
static double t_coll(size_t n, int reps)
{
    double t = 0;
    for (int i = 0; i < reps; i++) {
        double t0 = MPI_Wtime();
        coll_call(cur_coll, n);
        t += MPI_Wtime() - t0;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    return t;
}

static int cur_nbc; /* 0 iallreduce, 1 ibcast */
static double compute_s;
static volatile double sink;

static void nbc_start(size_t n, MPI_Request *r)
{
    if (cur_nbc == 0)
        MPI_Iallreduce(sbuf, rbuf, (int)(n / sizeof(float)), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, r);
    else
        MPI_Ibcast(sbuf, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD, r);
}

/* Busy work for about `s` seconds, with no MPI call inside (as OSU's dummy_compute). */
static void compute(double s)
{
    double t0 = MPI_Wtime(), x = 1.0;
    while (MPI_Wtime() - t0 < s)
        for (int i = 0; i < 200; i++)
            x = x * 1.0000001 + 1e-9;
    sink = x;
}

static double t_nbc_pure(size_t n, int reps)
{
    double t = 0;
    for (int i = 0; i < reps; i++) {
        MPI_Request r;
        double t0 = MPI_Wtime();
        nbc_start(n, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        t += MPI_Wtime() - t0;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    return t;
}

static double t_nbc_overlap(size_t n, int reps)
{
    double t = 0;
    for (int i = 0; i < reps; i++) {
        MPI_Request r;
        double t0 = MPI_Wtime();
        nbc_start(n, &r);
        compute(compute_s);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        t += MPI_Wtime() - t0;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    return t;
}

/* Rank 0 times a warm-up of a few units and decides the count; every rank runs it. */
static int calibrate(unit_fn f, size_t n, int maxreps)
{
    int warm = n > 65536 ? 2 : 10;
    MPI_Barrier(MPI_COMM_WORLD);
    /* wall time, so that the untimed barriers between collective calls count too */
    double t0 = MPI_Wtime();
    f(n, warm);
    MPI_Barrier(MPI_COMM_WORLD);
    double per = (MPI_Wtime() - t0) / warm;
    int reps = 10;
    if (rank == 0 && per > 0) {
        /* at least 10 units, fewer only where even 10 would take over 4 budgets */
        double want = ms_per_size / 1000.0 / per, least = 10;
        if (least * per * 1000.0 > 4 * ms_per_size)
            least = 3;
        reps = want < least ? (int)least : want > maxreps ? maxreps : (int)want;
    }
    MPI_Bcast(&reps, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return reps;
}

static int batches = 1;

/* Runs `batches` batches of `reps` units and returns this rank's time per unit in its fastest
 * batch (one batch, as OSU, by default). */
static double measure(unit_fn f, size_t n, int reps)
{
    double best = 0;
    for (int b = 0; b < batches; b++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = f(n, reps) / reps;
        if (b == 0 || t < best)
            best = t;
    }
    return best;
}

static void stats(double mine, double *avg, double *mn, double *mx)
{
    MPI_Reduce(&mine, avg, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine, mn, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine, mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    *avg /= nproc;
}

static int maxreps_for(size_t n)
{
    return n > 8192 ? 1000 : 10000;
}

static void run_test(const char *name, size_t lo, size_t hi)
{
    int pt2pt = !strcmp(name, "latency") || !strcmp(name, "bw") || !strcmp(name, "bibw");
    int multi = !strcmp(name, "mr") || !strcmp(name, "pairs") || !strcmp(name, "ring");
    if ((pt2pt || multi) && nproc < 2) {
        if (rank == 0)
            printf("# %s needs at least 2 ranks; skipped\n", name);
        return;
    }
    unit_fn f = NULL;
    int c = -1;
    for (int i = 0; i < NCOLL; i++)
        if (!strcmp(name, coll_names[i]))
            c = i;
    int nbc = !strcmp(name, "iallreduce") ? 0 : !strcmp(name, "ibcast") ? 1 : -1;
    if (!strcmp(name, "latency")) f = t_latency;
    else if (!strcmp(name, "bw")) f = t_bw;
    else if (!strcmp(name, "bibw")) f = t_bibw;
    else if (!strcmp(name, "mr")) f = t_mr;
    else if (!strcmp(name, "pairs")) f = t_pairs;
    else if (!strcmp(name, "ring")) f = t_ring;
    else if (c >= 0) { f = t_coll; cur_coll = c; }
    else if (nbc >= 0) cur_nbc = nbc;
    else {
        if (rank == 0)
            fprintf(stderr, "osu: unknown test %s\n", name);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (c == BARRIER) {
        lo = hi = 0;
    }
    size_t n = lo;
    for (;;) {
        if (nbc >= 0) {
            int reps = calibrate(t_nbc_pure, n, maxreps_for(n));
            double pure = measure(t_nbc_pure, n, reps), pavg, pmn, pmx;
            stats(pure, &pavg, &pmn, &pmx);
            /* compute for as long as the slowest rank's pure communication, as OSU does */
            MPI_Bcast(&pmx, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            compute_s = pmx;
            double t0 = MPI_Wtime();
            compute(compute_s);
            double comp = MPI_Wtime() - t0;
            double all = measure(t_nbc_overlap, n, reps), oavg, omn, omx, cavg, cmn, cmx;
            stats(all, &oavg, &omn, &omx);
            stats(comp, &cavg, &cmn, &cmx);
            if (rank == 0) {
                double ov = pavg > 0 ? 100.0 * (1.0 - (oavg - cavg) / pavg) : 0;
                if (ov < 0) ov = 0;
                if (ov > 100) ov = 100;
                printf("%s %zu %.3f %.1f %.3f %.3f\n", name, n, oavg * 1e6, ov, pavg * 1e6,
                       cavg * 1e6);
            }
        } else {
            int reps = calibrate(f, n, maxreps_for(n));
            double t = measure(f, n, reps), avg, mn, mx;
            stats(t, &avg, &mn, &mx);
            if (rank == 0) {
                if (f == t_latency)
                    printf("%s %zu %.3f\n", name, n, t * 1e6 / 2);
                else if (f == t_bw || f == t_bibw) {
                    double bytes = (double)n * WINDOW * (f == t_bibw ? 2 : 1);
                    printf("%s %zu %.2f\n", name, n, t > 0 ? bytes / t / 1e6 : 0);
                } else if (f == t_mr) {
                    /* the slowest pair sets the aggregate rate */
                    double msgs = (double)WINDOW * (nproc / 2);
                    printf("%s %zu %.0f\n", name, n, mx > 0 ? msgs / mx : 0);
                } else if (f == t_pairs)
                    printf("%s %zu %.3f\n", name, n, mx * 1e6 / 2);
                else if (f == t_ring)
                    printf("%s %zu %.3f\n", name, n, mx * 1e6 / nproc);
                else
                    printf("%s %zu %.3f %.3f %.3f\n", name, n, avg * 1e6, mn * 1e6, mx * 1e6);
            }
        }
        fflush(stdout);
        if (n >= hi)
            break;
        n = n == 0 ? 1 : n * factor;
        if (n > hi)
            n = hi;
    }
}

int main(int argc, char **argv)
{
    /* -T: initialise with MPI_THREAD_MULTIPLE (as mpi4py does by default); read before
     * MPI_Init_thread, the other options after. */
    int multiple = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-T"))
            multiple = 1;
    if (multiple) {
        int provided = 0;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nproc);
    const char *list = "latency";
    size_t lo = 4, hi = 1 << 20;
    int pin = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-b") && i + 1 < argc) list = argv[++i];
        else if (!strcmp(argv[i], "-m") && i + 1 < argc) hi = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-M") && i + 1 < argc) lo = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-f") && i + 1 < argc) factor = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) ms_per_size = atof(argv[++i]);
        else if (!strcmp(argv[i], "-k") && i + 1 < argc) batches = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-p")) pin = 1;
        else if (!strcmp(argv[i], "-T")) continue;
        else {
            if (rank == 0)
                fprintf(stderr, "usage: osu -b TEST[,TEST...] [-m MAX] [-M MIN] [-f FACTOR] [-t MS] [-k BATCHES] [-p] [-T]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (lo > hi)
        lo = hi;
    if (factor < 2)
        factor = 2;
    if (batches < 1)
        batches = 1;
    if (pin && pin_self() < 0 && rank == 0)
        printf("# could not pin\n");
    /* Room for a window of messages, or N blocks for the rooted/all-to-all collectives. */
    size_t per = hi ? hi : 1;
    cap = per * (size_t)(WINDOW > nproc ? WINDOW : nproc) + 64;
    sbuf = malloc(cap);
    rbuf = malloc(cap);
    rcounts = malloc(sizeof(int) * (size_t)nproc);
    if (!sbuf || !rbuf || !rcounts)
        die("out of memory");
    /* small floats, so sums stay finite and normal */
    for (size_t i = 0; i + sizeof(float) <= cap; i += sizeof(float)) {
        float v = (float)((i / sizeof(float)) % 7 + 1);
        memcpy(sbuf + i, &v, sizeof v);
    }
    memset(rbuf, 0, cap);
    if (rank == 0)
        printf("# osu ranks %d sizes %zu..%zu ms_per_size %.0f\n", nproc, lo, hi, ms_per_size);
    char *copy = strdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        run_test(tok, lo, hi);
    free(copy);
    free(sbuf);
    free(rbuf);
    free(rcounts);
    MPI_Finalize();
    return 0;
}
