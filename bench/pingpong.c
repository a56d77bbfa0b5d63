/*
 * pingpong: point-to-point latency and bandwidth between ranks 0 and 1.
 *
 *   mpiexec -n 2 ./pingpong [-m MAXBYTES] [-b BATCHES] [-t BATCH_MS] [-s median|min] [-p] [-q]
 *
 * For each size 0, 1, 2, 4, ... MAXBYTES (default 8 MiB) rank 0 sends to
 * rank 1 which sends back; one exchange is checked byte by byte first (not
 * timed), then a timed warm-up that sets the repetition count so one batch
 * lasts about BATCH_MS (default 20 ms), then BATCHES (default 7) timed
 * batches. Latency is half the round trip, median over the batches;
 * bandwidth is size / latency (MB/s, 10^6 bytes).
 *
 * Output, one line per size, on rank 0:
 *   size_bytes latency_us bandwidth_MBps
 * Lines starting with '#' are comments.
 *
 * -s min reports the fastest batch instead of the median: on a machine shared
 *    with other work it shows what the MPI can do when it gets the CPUs.
 * -p pins rank r to the r-th CPU the process may run on, the same way for
 *    every MPI (launcher binding should then be off).
 * -q prints nothing but the data lines.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TAG 1

static int rank;

static void die(const char *msg)
{
    fprintf(stderr, "pingpong rank %d: %s\n", rank, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Pins this process to the (rank % n)-th CPU of its allowed set. */
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

/* Repetitions per timed batch: rank 0 times a short warm-up and picks a
 * count that makes a batch last about batch_ms (at least 4 repetitions, at
 * most 5000), then tells rank 1 so both run the same loop. */
static int calibrate(char *buf, size_t n, double batch_ms);

static void exchange(char *buf, size_t n, int reps)
{
    for (int i = 0; i < reps; i++) {
        if (rank == 0) {
            MPI_Send(buf, (int)n, MPI_BYTE, 1, TAG, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)n, MPI_BYTE, 1, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, (int)n, MPI_BYTE, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)n, MPI_BYTE, 0, TAG, MPI_COMM_WORLD);
        }
    }
}

static int calibrate(char *buf, size_t n, double batch_ms)
{
    int probe = n <= 65536 ? 50 : 2, reps = 0;
    double t0 = MPI_Wtime();
    exchange(buf, n, probe);
    double per = (MPI_Wtime() - t0) / probe * 1e3; /* ms per round trip */
    if (rank == 0) {
        double r = per > 0 ? batch_ms / per : 5000;
        reps = r < 4 ? 4 : r > 5000 ? 5000 : (int)r;
        MPI_Send(&reps, 1, MPI_INT, 1, TAG + 2, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Recv(&reps, 1, MPI_INT, 0, TAG + 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return reps;
}

/* One untimed exchange with a size-dependent pattern, checked on both
 * sides, so a fast but wrong transport cannot report numbers. */
static void check(char *buf, size_t n)
{
    unsigned char *p = (unsigned char *)buf;
    if (rank == 0) {
        for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 7 + n);
        MPI_Send(buf, (int)n, MPI_BYTE, 1, TAG + 1, MPI_COMM_WORLD);
        MPI_Recv(buf, (int)n, MPI_BYTE, 1, TAG + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (size_t i = 0; i < n; i++)
            if (p[i] != (unsigned char)(i * 13 + n)) die("data check failed on rank 0");
    } else if (rank == 1) {
        MPI_Recv(buf, (int)n, MPI_BYTE, 0, TAG + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (size_t i = 0; i < n; i++)
            if (p[i] != (unsigned char)(i * 7 + n)) die("data check failed on rank 1");
        for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 13 + n);
        MPI_Send(buf, (int)n, MPI_BYTE, 0, TAG + 1, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    size_t max = (size_t)8 << 20;
    int batches = 7, pin = 0, quiet = 0, size = 0;
    double batch_ms = 20;
    int use_min = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) max = (size_t)strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "-b") && i + 1 < argc) batches = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) batch_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) {
            const char *st = argv[++i];
            if (!strcmp(st, "min")) use_min = 1;
            else if (strcmp(st, "median")) die("-s takes median or min");
        }
        else if (!strcmp(argv[i], "-p")) pin = 1;
        else if (!strcmp(argv[i], "-q")) quiet = 1;
        else die("usage: pingpong [-m MAXBYTES] [-b BATCHES] [-t BATCH_MS] [-s median|min] [-p] [-q]");
    }
    if (size < 2) die("needs 2 ranks");
    if (batches < 1 || batches > 100) die("-b must be 1..100");
    if (batch_ms <= 0 || batch_ms > 10000) die("-t must be in (0, 10000] ms");
    int cpu = pin ? pin_self() : -1;

    char *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, max ? max : 1) != 0) die("out of memory");
    memset(buf, 0, max ? max : 1);
    double *t = malloc(sizeof(double) * (size_t)batches);
    if (!t) die("out of memory");

    if (rank == 0 && !quiet) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(lib, &len);
        char *nl = strchr(lib, '\n');
        if (nl) *nl = 0;
        printf("# %s\n# ranks %d, %s of %d batches of ~%.0f ms, pinned cpu of rank 0: %d\n", lib,
               size, use_min ? "fastest" : "median", batches, batch_ms, cpu);
        printf("# size_bytes latency_us bandwidth_MBps\n");
        fflush(stdout);
    }

    for (size_t n = 0; n <= max; n = n ? n * 2 : 1) {
        check(buf, n);
        int reps = calibrate(buf, n, batch_ms);
        for (int b = 0; b < batches; b++) {
            double t0 = MPI_Wtime();
            exchange(buf, n, reps);
            t[b] = (MPI_Wtime() - t0) / reps / 2.0 * 1e6;
        }
        if (rank == 0) {
            qsort(t, (size_t)batches, sizeof(double), cmp_double);
            double lat = use_min ? t[0] : t[batches / 2];
            printf("%zu %.3f %.2f\n", n, lat, lat > 0 ? (double)n / lat : 0.0);
            fflush(stdout);
        }
        if (n == max) break;
    }
    free(t);
    free(buf);
    MPI_Finalize();
    return 0;
}
