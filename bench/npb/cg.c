/* NPB CG: estimate the smallest eigenvalue of a large sparse symmetric positive definite
 * matrix by inverse power iteration, each step solving A z = x with 25 conjugate gradient
 * iterations. Written from the NPB specification (RNR-94-007, NAS-95-020).
 *
 * The matrix is A = sum_i w_i v_i v_i^T + (rcond - shift) I, where v_i is a sparse vector
 * with `nonzer` random entries at random positions plus 0.5 at position i, and
 * w_i = rcond^((i-1)/n). Every rank draws the whole random sequence (it is cheap) and keeps
 * the rows it owns: ranks hold contiguous blocks of rows and all columns, so a product A p
 * needs the whole of p, gathered once per CG iteration. */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CG_ITERATIONS 25

struct cg_class {
    char cls;
    int na, nonzer, niter;
    double shift, rcond, zeta_verify;
};

static const struct cg_class classes[] = {
    {'S', 1400, 7, 15, 10.0, 0.1, 8.5971775078648},
    {'W', 7000, 8, 15, 12.0, 0.1, 10.362595087124},
    {'A', 14000, 11, 15, 20.0, 0.1, 17.130235054029},
};

struct triplet {
    int row, col;
    size_t order; /* generation order: duplicates are summed in the order they were drawn */
    double val;
};

/* Local rows in compressed sparse row form; column indices are global. */
struct csr {
    int nrows;
    int *rowstart, *col;
    double *val;
};

static int by_row_then_col(const void *pa, const void *pb) {
    const struct triplet *a = pa, *b = pb;
    if (a->row != b->row) return a->row < b->row ? -1 : 1;
    if (a->col != b->col) return a->col < b->col ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* One sparse vector of the specification: `nonzer` distinct random positions (drawn in
 * [0, nn1), a power of two, and redrawn when >= n or already taken), each with a random
 * value, then element `diag` set to 0.5 (added when not among them). Returns its length. */
static int sparse_vector(int n, int nn1, int nonzer, int diag, double *seed, double *v,
                         int *iv) {
    int nz = 0;
    while (nz < nonzer) {
        double value = npb_randlc(seed, NPB_A);
        double where = npb_randlc(seed, NPB_A);
        int i = (int)(where * nn1);
        if (i >= n) continue;
        int taken = 0;
        for (int k = 0; k < nz; k++)
            if (iv[k] == i) { taken = 1; break; }
        if (taken) continue;
        v[nz] = value;
        iv[nz] = i;
        nz++;
    }
    for (int k = 0; k < nz; k++)
        if (iv[k] == diag) { v[k] = 0.5; return nz; }
    v[nz] = 0.5;
    iv[nz] = diag;
    return nz + 1;
}

/* Rows [row_lo, row_hi) of the class's matrix. */
static struct csr make_matrix(const struct cg_class *c, int row_lo, int row_hi) {
    int n = c->na, nn1 = 1;
    while (nn1 < n) nn1 *= 2;
    double seed = NPB_SEED;
    npb_randlc(&seed, NPB_A);   /* the specification draws one value before the matrix */

    size_t cap = 1024, count = 0;
    struct triplet *t = malloc(cap * sizeof *t);
    double *v = malloc((c->nonzer + 1) * sizeof *v);
    int *iv = malloc((c->nonzer + 1) * sizeof *iv);
    double ratio = pow(c->rcond, 1.0 / n), weight = 1.0;
    for (int i = 0; i < n; i++) {
        int nz = sparse_vector(n, nn1, c->nonzer, i, &seed, v, iv);
        for (int a = 0; a < nz; a++) {
            if (iv[a] < row_lo || iv[a] >= row_hi) continue;
            for (int b = 0; b < nz; b++) {
                if (count == cap) t = realloc(t, (cap *= 2) * sizeof *t);
                t[count] = (struct triplet){iv[a], iv[b], count, v[a] * (weight * v[b])};
                count++;
            }
        }
        weight *= ratio;
    }
    free(v);
    free(iv);
    qsort(t, count, sizeof *t, by_row_then_col);

    struct csr m;
    m.nrows = row_hi - row_lo;
    m.rowstart = calloc(m.nrows + 1, sizeof(int));
    m.col = malloc((count + m.nrows) * sizeof(int));
    m.val = malloc((count + m.nrows) * sizeof(double));
    size_t out = 0, k = 0;
    for (int r = row_lo; r < row_hi; r++) {
        m.rowstart[r - row_lo] = (int)out;
        int has_diag = 0;
        while (k < count && t[k].row == r) {
            int col = t[k].col;
            double sum = 0.0;
            while (k < count && t[k].row == r && t[k].col == col) sum += t[k++].val;
            if (col == r) { sum += c->rcond - c->shift; has_diag = 1; }
            m.col[out] = col;
            m.val[out++] = sum;
        }
        if (!has_diag) {   /* every v_r holds element r, so this does not happen */
            m.col[out] = r;
            m.val[out++] = c->rcond - c->shift;
        }
    }
    m.rowstart[m.nrows] = (int)out;
    free(t);
    return m;
}

static void matvec(const struct csr *m, const double *full, double *out) {
    for (int r = 0; r < m->nrows; r++) {
        double sum = 0.0;
        for (int k = m->rowstart[r]; k < m->rowstart[r + 1]; k++) sum += m->val[k] * full[m->col[k]];
        out[r] = sum;
    }
}

static double dot(const double *a, const double *b, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static double global_sum(double local) {
    double sum;
    MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum;
}

struct layout {
    int lo, n;            /* first owned row and how many */
    int *counts, *displs; /* every rank's block, for gathering vectors */
};

static void gather(const struct layout *l, const double *local, double *full) {
    MPI_Allgatherv(local, l->n, MPI_DOUBLE, full, l->counts, l->displs, MPI_DOUBLE,
                   MPI_COMM_WORLD);
}

/* 25 CG iterations on A z = x from z = 0; returns ||x - A z||. */
static double conj_grad(const struct csr *m, const struct layout *l, const double *x,
                        double *z, double *r, double *p, double *q, double *pfull) {
    int n = l->n;
    for (int i = 0; i < n; i++) {
        z[i] = 0.0;
        r[i] = x[i];
        p[i] = x[i];
    }
    double rho = global_sum(dot(r, r, n));
    for (int it = 0; it < CG_ITERATIONS; it++) {
        gather(l, p, pfull);
        matvec(m, pfull, q);
        double alpha = rho / global_sum(dot(p, q, n));
        for (int i = 0; i < n; i++) {
            z[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        double rho_old = rho;
        rho = global_sum(dot(r, r, n));
        double beta = rho / rho_old;
        for (int i = 0; i < n; i++) p[i] = r[i] + beta * p[i];
    }
    gather(l, z, pfull);
    matvec(m, pfull, r);
    double local = 0.0;
    for (int i = 0; i < n; i++) {
        double d = x[i] - r[i];
        local += d * d;
    }
    return sqrt(global_sum(local));
}

/* One step of inverse power iteration: solve A z = x, return zeta = shift + 1 / (x . z)
 * and replace x by z / ||z||. */
static double power_step(const struct cg_class *c, const struct csr *m, const struct layout *l,
                         double *x, double *z, double *r, double *p, double *q, double *pfull,
                         double *rnorm) {
    *rnorm = conj_grad(m, l, x, z, r, p, q, pfull);
    double local[2] = {dot(x, z, l->n), dot(z, z, l->n)}, sums[2];
    MPI_Allreduce(local, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double scale = 1.0 / sqrt(sums[1]);
    for (int i = 0; i < l->n; i++) x[i] = scale * z[i];
    return c->shift + 1.0 / sums[0];
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char cls = npb_class(argc, argv, rank);
    npb_require_pow2("CG", size, 1024, rank);
    const struct cg_class *c = NULL;
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
        if (classes[i].cls == cls) c = &classes[i];

    struct layout l;
    l.counts = malloc(size * sizeof(int));
    l.displs = malloc(size * sizeof(int));
    for (int r = 0; r < size; r++) {
        l.displs[r] = (int)((long long)c->na * r / size);
        l.counts[r] = (int)((long long)c->na * (r + 1) / size) - l.displs[r];
    }
    l.lo = l.displs[rank];
    l.n = l.counts[rank];

    if (rank == 0) {
        printf("\n NAS Parallel Benchmarks - CG Benchmark\n\n");
        printf(" Size: %11d\n Iterations: %5d\n Number of processes: %5d\n\n", c->na, c->niter,
               size);
    }
    struct csr m = make_matrix(c, l.lo, l.lo + l.n);
    double *x = malloc(l.n * sizeof(double)), *z = malloc(l.n * sizeof(double));
    double *r = malloc(l.n * sizeof(double)), *p = malloc(l.n * sizeof(double));
    double *q = malloc(l.n * sizeof(double)), *pfull = malloc(c->na * sizeof(double));

    /* One untimed step touches every page and code path; x starts over afterwards. */
    double rnorm, zeta = 0.0;
    for (int i = 0; i < l.n; i++) x[i] = 1.0;
    power_step(c, &m, &l, x, z, r, p, q, pfull, &rnorm);
    for (int i = 0; i < l.n; i++) x[i] = 1.0;

    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int it = 1; it <= c->niter; it++) {
        zeta = power_step(c, &m, &l, x, z, r, p, q, pfull, &rnorm);
        if (rank == 0) {
            if (it == 1) printf("   iteration           ||r||                 zeta\n");
            printf("    %5d       %20.14e%20.13e\n", it, rnorm, zeta);
        }
    }
    double elapsed = MPI_Wtime() - start, slowest;
    MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    const double epsilon = 1.0e-10;
    double err = fabs(zeta - c->zeta_verify) / c->zeta_verify;
    int verified = err <= epsilon;
    if (rank == 0) {
        printf("\n zeta = %20.13e, reference %20.13e, relative error %.3e (tolerance %.0e)\n",
               zeta, c->zeta_verify, err, epsilon);
    }
    double nz2 = (double)c->nonzer * (c->nonzer + 1);
    double mops = 2.0 * c->niter * c->na * (3.0 + nz2 + 25.0 * (5.0 + nz2) + 3.0) / slowest / 1e6;
    char sizebuf[32];
    snprintf(sizebuf, sizeof sizebuf, "%d", c->na);
    int status = npb_report("CG", cls, sizebuf, c->niter, slowest, mops, "floating point",
                            verified, size, rank);
    MPI_Finalize();
    return status;
}
