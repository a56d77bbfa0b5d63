/* An unmodified MPI program for the coordinated-checkpoint tests: a 2-D Jacobi stencil on
 * a grid split into row blocks (a 1-D decomposition). Each iteration exchanges halo rows
 * with both neighbours, alternately with MPI_Sendrecv and with MPI_Isend/MPI_Irecv whose
 * messages stay in flight while the interior is computed (MPI_Waitall after it); every
 * CHECK iterations the ranks reduce a checksum of their block (exact: a hash of the bits,
 * combined with MPI_BXOR and an integer MPI_SUM) and the largest change (MPI_MAX), and
 * rank 0 prints them. Every rank appends a line per check to its own file with write(2)
 * on an O_APPEND descriptor. At the end rank 0 gathers and prints every rank's checksum.
 * Any lost, duplicated or stale halo changes the printed numbers.
 * Arguments: iterations, rows per rank, columns (a halo row is COLS doubles: 8 KB per 1024
 * columns, so 40000 columns are 320 KB rendezvous messages), CHECK, microseconds of extra
 * computation per iteration, and a prefix for the per-rank files (PREFIX.RANK). */
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void spin_us(long us) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

/* FNV-1a over the bits of rows [lo, hi) of a block with `cols` columns. */
static uint64_t hash_rows(const double *g, int lo, int hi, int cols) {
    uint64_t h = 1469598103934665603ULL;
    for (int i = lo; i < hi; i++) {
        for (int j = 0; j < cols; j++) {
            uint64_t v;
            memcpy(&v, &g[(size_t)i * cols + j], sizeof v);
            h = (h ^ v) * 1099511628211ULL;
        }
    }
    return h;
}

/* One Jacobi update of rows [lo, hi) of the interior (rows 1..n of a block with halo rows 0
 * and n+1); the first and last columns are fixed boundary values. Returns the largest change. */
static double update(const double *g, double *ng, int lo, int hi, int cols) {
    double dmax = 0;
    for (int i = lo; i < hi; i++) {
        const double *up = g + (size_t)(i - 1) * cols, *mid = g + (size_t)i * cols, *dn = g + (size_t)(i + 1) * cols;
        double *out = ng + (size_t)i * cols;
        out[0] = mid[0];
        out[cols - 1] = mid[cols - 1];
        for (int j = 1; j < cols - 1; j++) {
            out[j] = 0.25 * (up[j] + dn[j] + mid[j - 1] + mid[j + 1]);
            double d = out[j] > mid[j] ? out[j] - mid[j] : mid[j] - out[j];
            if (d > dmax) dmax = d;
        }
    }
    return dmax;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 300;
    int n = argc > 2 ? atoi(argv[2]) : 40;
    int cols = argc > 3 ? atoi(argv[3]) : 40000;
    int check = argc > 4 ? atoi(argv[4]) : 10;
    long work_us = argc > 5 ? atol(argv[5]) : 0;
    if (n < 2 || cols < 3 || check < 1) MPI_Abort(MPI_COMM_WORLD, 2);
    int fd = -1;
    if (argc > 6) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%d", argv[6], rank);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
        if (fd < 0) MPI_Abort(MPI_COMM_WORLD, 3);
    }
    size_t cells = (size_t)(n + 2) * cols;
    double *g = calloc(cells, sizeof(double)), *ng = calloc(cells, sizeof(double));
    /* Hot top edge of the whole grid, a warm left edge: heat flows across rank borders. */
    for (int i = 0; i < n + 2; i++) g[(size_t)i * cols] = ng[(size_t)i * cols] = 50.0;
    if (rank == 0)
        for (int j = 0; j < cols; j++) g[j] = ng[j] = 100.0;
    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL, down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    for (int it = 0; it < iters; it++) {
        double *first = g + cols, *last = g + (size_t)n * cols;
        double *top = g, *bottom = g + (size_t)(n + 1) * cols;
        double dmax;
        if (it % 2 == 0) {
            MPI_Sendrecv(first, cols, MPI_DOUBLE, up, 2 * it, bottom, cols, MPI_DOUBLE, down, 2 * it, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Sendrecv(last, cols, MPI_DOUBLE, down, 2 * it + 1, top, cols, MPI_DOUBLE, up, 2 * it + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            dmax = update(g, ng, 1, n + 1, cols);
        } else {
            MPI_Request rq[4];
            MPI_Irecv(top, cols, MPI_DOUBLE, up, 2 * it + 1, MPI_COMM_WORLD, &rq[0]);
            MPI_Irecv(bottom, cols, MPI_DOUBLE, down, 2 * it, MPI_COMM_WORLD, &rq[1]);
            MPI_Isend(first, cols, MPI_DOUBLE, up, 2 * it, MPI_COMM_WORLD, &rq[2]);
            MPI_Isend(last, cols, MPI_DOUBLE, down, 2 * it + 1, MPI_COMM_WORLD, &rq[3]);
            /* The interior rows need no halo: computed while the halos are in flight. */
            dmax = update(g, ng, 2, n, cols);
            MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
            double d1 = update(g, ng, 1, 2, cols), d2 = update(g, ng, n, n + 1, cols);
            if (d1 > dmax) dmax = d1;
            if (d2 > dmax) dmax = d2;
        }
        /* The halo rows of the old grid stay as they are (overwritten next iteration). */
        double *t = g;
        g = ng;
        ng = t;
        if ((it + 1) % check == 0) {
            uint64_t h = hash_rows(g, 1, n + 1, cols), x = 0, s = 0;
            double gmax = 0;
            MPI_Allreduce(&h, &x, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
            MPI_Allreduce(&h, &s, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
            MPI_Allreduce(&dmax, &gmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (rank == 0) {
                printf("iteration %d xor %016llx sum %016llx change %.17g\n", it + 1, (unsigned long long)x, (unsigned long long)s, gmax);
                fflush(stdout);
            }
            if (fd >= 0) {
                char line[128];
                int len = snprintf(line, sizeof line, "iteration %d rank %d hash %016llx\n", it + 1, rank, (unsigned long long)h);
                if (write(fd, line, (size_t)len) != len) MPI_Abort(MPI_COMM_WORLD, 4);
            }
        }
        spin_us(work_us);
    }
    uint64_t h = hash_rows(g, 1, n + 1, cols);
    uint64_t *all = rank == 0 ? malloc(sizeof(uint64_t) * (size_t)size) : NULL;
    MPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size; r++) printf("final rank %d %016llx\n", r, (unsigned long long)all[r]);
        free(all);
    }
    if (fd >= 0) close(fd);
    free(g);
    free(ng);
    MPI_Finalize();
    return 0;
}
