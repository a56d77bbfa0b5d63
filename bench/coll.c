/*
 * coll: small-collective latency, microseconds per call.
 *
 *   mpiexec -n 4 ./coll [-b BATCHES] [-t SECONDS_PER_BATCH] [-q]
 *
 * 8-byte MPI_Allreduce (one double, MPI_SUM) and 8-byte MPI_Bcast (root
 * rotating is not used: root 0, as most benchmarks do). The iteration
 * count is calibrated so a batch takes about -t seconds (default 0.2); the
 * reported time is the median batch, and the slowest rank's view of it
 * (reduced with MPI_MAX) so a fast root cannot hide slow leaves.
 * Results are checked: the Allreduce sum and the broadcast value.
 *
 * Output on rank 0:   op size_bytes us_per_call
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static void die(const char *msg)
{
    fprintf(stderr, "coll rank %d: %s\n", rank, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void run_allreduce(long iters)
{
    for (long i = 0; i < iters; i++) {
        double in = rank + (double)(i & 7), out = -1;
        MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double want = (double)size * (size - 1) / 2 + (double)size * (double)(i & 7);
        if (out != want) die("Allreduce result wrong");
    }
}

static void run_bcast(long iters)
{
    for (long i = 0; i < iters; i++) {
        double v = rank == 0 ? 1000.0 + (double)i : -1.0;
        MPI_Bcast(&v, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (v != 1000.0 + (double)i) die("Bcast result wrong");
    }
}

static double measure(void (*fn)(long), int batches, double target)
{
    double *t = malloc(sizeof(double) * (size_t)batches);
    if (!t) die("out of memory");
    fn(50); /* warm-up */
    /* Calibrate on rank 0's clock and agree on the count. */
    long iters = 20;
    for (;;) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        fn(iters);
        double dt = MPI_Wtime() - t0;
        MPI_Bcast(&dt, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (dt >= target / 4 || iters >= (1L << 24))
            break;
        iters *= 4;
    }
    for (int b = 0; b < batches; b++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        fn(iters);
        double dt = (MPI_Wtime() - t0) / (double)iters * 1e6, worst = 0;
        MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        t[b] = worst;
    }
    qsort(t, (size_t)batches, sizeof(double), cmp_double);
    double med = t[batches / 2];
    free(t);
    return med;
}

int main(int argc, char **argv)
{
    int batches = 5, quiet = 0;
    double target = 0.2;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-b") && i + 1 < argc) batches = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) target = atof(argv[++i]);
        else if (!strcmp(argv[i], "-q")) quiet = 1;
        else die("usage: coll [-b BATCHES] [-t SECONDS_PER_BATCH] [-q]");
    }
    if (batches < 1 || batches > 100 || target <= 0) die("bad arguments");
    if (rank == 0 && !quiet)
        printf("# ranks %d, batches %d\n# op size_bytes us_per_call\n", size, batches);
    double a = measure(run_allreduce, batches, target);
    if (rank == 0) { printf("allreduce 8 %.3f\n", a); fflush(stdout); }
    double b = measure(run_bcast, batches, target);
    if (rank == 0) { printf("bcast 8 %.3f\n", b); fflush(stdout); }
    MPI_Finalize();
    return 0;
}
