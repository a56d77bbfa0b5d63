/*
 * coll_sizes: per-call time of the main collectives over a range of message sizes.
 *
 *   mpiexec -n 4 ./coll_sizes [-t SECONDS_PER_POINT] [-b BATCHES]
 *
 * For each collective and size (bytes per rank, in doubles), the iteration count is
 * calibrated to about -t seconds per batch (default 0.05); the reported time is the median
 * batch of the slowest rank (MPI_MAX), in microseconds per call.
 *
 * Output on rank 0:   collective bytes us_per_call
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;
static double *sbuf, *rbuf;

enum { ALLREDUCE, BCAST, REDUCE, ALLGATHER, ALLTOALL, REDUCE_SCATTER, NCOLL };
static const char *names[NCOLL] = {"allreduce", "bcast", "reduce", "allgather", "alltoall", "reduce_scatter_block"};

static void run(int c, int n, long iters)
{
    for (long i = 0; i < iters; i++) {
        switch (c) {
        case ALLREDUCE: MPI_Allreduce(sbuf, rbuf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
        case BCAST: MPI_Bcast(sbuf, n, MPI_DOUBLE, 0, MPI_COMM_WORLD); break;
        case REDUCE: MPI_Reduce(sbuf, rbuf, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD); break;
        case ALLGATHER: MPI_Allgather(sbuf, n, MPI_DOUBLE, rbuf, n, MPI_DOUBLE, MPI_COMM_WORLD); break;
        case ALLTOALL: MPI_Alltoall(sbuf, n, MPI_DOUBLE, rbuf, n, MPI_DOUBLE, MPI_COMM_WORLD); break;
        default: MPI_Reduce_scatter_block(sbuf, rbuf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
        }
    }
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    double target = 0.05;
    int batches = 5;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) target = atof(argv[++i]);
        else if (!strcmp(argv[i], "-b") && i + 1 < argc) batches = atoi(argv[++i]);
    }
    if (batches < 1 || batches > 50) batches = 5;
    const int max = 1 << 17; /* doubles per rank: 1 MiB */
    sbuf = calloc((size_t)max * size, sizeof(double));
    rbuf = calloc((size_t)max * size, sizeof(double));
    if (!sbuf || !rbuf) MPI_Abort(MPI_COMM_WORLD, 1);
    static const int counts[] = {1, 128, 8192, 131072};
    if (rank == 0) printf("# ranks %d\n# collective bytes us_per_call\n", size);
    for (int c = 0; c < NCOLL; c++) {
        for (int k = 0; k < 4; k++) {
            int n = counts[k];
            if ((c == ALLTOALL || c == ALLGATHER || c == REDUCE_SCATTER) && n > max / size) n = max / size;
            run(c, n, 3);
            long iters = 1;
            for (;;) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                run(c, n, iters);
                double dt = MPI_Wtime() - t0;
                MPI_Bcast(&dt, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
                if (dt >= target / 4 || iters >= (1L << 22)) break;
                iters *= 4;
            }
            double t[50];
            for (int b = 0; b < batches; b++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                run(c, n, iters);
                double dt = (MPI_Wtime() - t0) / (double)iters * 1e6, worst = 0;
                MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                t[b] = worst;
            }
            qsort(t, (size_t)batches, sizeof(double), cmp);
            if (rank == 0) {
                printf("%s %ld %.3f\n", names[c], (long)n * 8, t[batches / 2]);
                fflush(stdout);
            }
        }
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
