/* NPB FT: solve the 3-D heat equation du/dt = alpha laplacian(u) on a periodic grid
 * spectrally, with forward and inverse 3-D FFTs. Written from the NPB specification
 * (RNR-94-007, NAS-95-020).
 *
 * U0 takes complex values from the NPB random sequence (real then imaginary part, x fastest,
 * then y, then z). V = FFT(U0); for t = 1..niter, X_t = IFFT(V exp(-4 alpha pi^2 |k|^2 t)),
 * where k_d = j for j < n_d/2 and j - n_d otherwise, and the checksum of step t is
 * sum_{j=1..1024} X_t(j mod nx, 3j mod ny, 5j mod nz) / (nx ny nz), with the inverse
 * transform unnormalised. The six checksums are compared with the published ones.
 *
 * Ranks hold slabs of whole z planes ("A" layout: [z][y][x]) while transforming along x and
 * y, and slabs of whole y planes ("B" layout: [y][z][x]) while transforming along z and
 * evolving; one all-to-all moves between the two, so each time step costs one all-to-all. */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECKSUM_POINTS 1024
#define MAX_NITER 6

struct ft_class {
    char cls;
    int nx, ny, nz, niter;
    double re[MAX_NITER], im[MAX_NITER];
};

static const struct ft_class classes[] = {
    {'S', 64, 64, 64, 6,
     {5.546087004964e+02, 5.546385409189e+02, 5.546148406171e+02, 5.545423607415e+02,
      5.544255039624e+02, 5.542683411902e+02},
     {4.845363331978e+02, 4.865304269511e+02, 4.883910722336e+02, 4.901273169046e+02,
      4.917475857993e+02, 4.932597244941e+02}},
    {'W', 128, 128, 32, 6,
     {5.673612178944e+02, 5.631436885271e+02, 5.594024089970e+02, 5.560698047020e+02,
      5.530898991250e+02, 5.504159734538e+02},
     {5.293246849175e+02, 5.282149986629e+02, 5.270996558037e+02, 5.260027904925e+02,
      5.249400845633e+02, 5.239212247086e+02}},
    {'A', 256, 256, 128, 6,
     {5.046735008193e+02, 5.059412319734e+02, 5.069376896287e+02, 5.077892868474e+02,
      5.085233095391e+02, 5.091487099959e+02},
     {5.114047905510e+02, 5.098809666433e+02, 5.098144042213e+02, 5.101336130759e+02,
      5.104914655194e+02, 5.107917842803e+02}},
};

typedef struct {
    double re, im;
} cplx;

/* A radix-2 transform of length n: roots exp(-2 pi i j / n) for j < n/2 and the
 * bit-reversal permutation. */
struct plan {
    int n;
    cplx *root;
    int *rev;
};

static struct plan make_plan(int n) {
    struct plan p = {n, malloc((n / 2 + 1) * sizeof(cplx)), malloc(n * sizeof(int))};
    const double pi = acos(-1.0);
    for (int j = 0; j < n / 2; j++) {
        p.root[j].re = cos(2.0 * pi * j / n);
        p.root[j].im = -sin(2.0 * pi * j / n);
    }
    int bits = npb_ilog2(n);
    for (int i = 0; i < n; i++) {
        int r = 0;
        for (int b = 0; b < bits; b++)
            if (i & (1 << b)) r |= 1 << (bits - 1 - b);
        p.rev[i] = r;
    }
    return p;
}

/* Transform the n rows of a[n][m] as m independent sequences (element j of sequence b is
 * a[j*m + b]), in place: sign -1 forward, +1 inverse (unnormalised). Working on whole rows
 * keeps the inner loop contiguous whatever the stride of the transformed dimension. */
static void fft_rows(cplx *a, int m, int sign, const struct plan *p) {
    int n = p->n;
    for (int i = 0; i < n; i++) {
        int j = p->rev[i];
        if (i >= j) continue;
        cplx *x = a + (long)i * m, *y = a + (long)j * m;
        for (int b = 0; b < m; b++) {
            cplx t = x[b];
            x[b] = y[b];
            y[b] = t;
        }
    }
    for (int len = 2; len <= n; len *= 2) {
        int half = len / 2, step = n / len;
        for (int s = 0; s < n; s += len)
            for (int k = 0; k < half; k++) {
                double wr = p->root[k * step].re, wi = sign < 0 ? p->root[k * step].im : -p->root[k * step].im;
                cplx *x = a + (long)(s + k) * m, *y = a + (long)(s + k + half) * m;
                for (int b = 0; b < m; b++) {
                    double tr = wr * y[b].re - wi * y[b].im;
                    double ti = wr * y[b].im + wi * y[b].re;
                    y[b].re = x[b].re - tr;
                    y[b].im = x[b].im - ti;
                    x[b].re += tr;
                    x[b].im += ti;
                }
            }
    }
}

/* Transform along the fast (contiguous) dimension of plane[rows][n]: turn the plane so
 * that dimension runs over rows, transform, turn it back. */
static void fft_fast_dim(cplx *plane, int rows, int sign, const struct plan *p, cplx *scratch) {
    int n = p->n;
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) scratch[(long)i * rows + r] = plane[(long)r * n + i];
    fft_rows(scratch, rows, sign, p);
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) plane[(long)r * n + i] = scratch[(long)i * rows + r];
}

struct ft {
    const struct ft_class *c;
    int rank, size;
    int nzl, nyl, z0, y0;          /* z planes held in A layout, y planes held in B layout */
    long local;                    /* complex values held, either layout */
    struct plan px, py, pz;
    cplx *sendbuf, *recvbuf, *scratch;
};

/* A layout [zl][y][x] -> B layout [yl][z][x]. */
static void a_to_b(struct ft *f, const cplx *a, cplx *b) {
    int nx = f->c->nx, ny = f->c->ny, nz = f->c->nz, P = f->size;
    long block = (long)f->nzl * f->nyl * nx;
    for (int s = 0; s < P; s++)
        for (int zl = 0; zl < f->nzl; zl++)
            memcpy(f->sendbuf + s * block + (long)zl * f->nyl * nx,
                   a + ((long)zl * ny + (long)s * f->nyl) * nx, (size_t)f->nyl * nx * sizeof(cplx));
    MPI_Alltoall(f->sendbuf, (int)(2 * block), MPI_DOUBLE, f->recvbuf, (int)(2 * block), MPI_DOUBLE,
                 MPI_COMM_WORLD);
    for (int r = 0; r < P; r++)
        for (int zl = 0; zl < f->nzl; zl++)
            for (int yl = 0; yl < f->nyl; yl++)
                memcpy(b + ((long)yl * nz + (long)r * f->nzl + zl) * nx,
                       f->recvbuf + r * block + ((long)zl * f->nyl + yl) * nx, nx * sizeof(cplx));
}

/* B layout [yl][z][x] -> A layout [zl][y][x]. */
static void b_to_a(struct ft *f, const cplx *b, cplx *a) {
    int nx = f->c->nx, ny = f->c->ny, nz = f->c->nz, P = f->size;
    long block = (long)f->nzl * f->nyl * nx;
    for (int s = 0; s < P; s++)
        for (int yl = 0; yl < f->nyl; yl++)
            memcpy(f->sendbuf + s * block + (long)yl * f->nzl * nx,
                   b + ((long)yl * nz + (long)s * f->nzl) * nx, (size_t)f->nzl * nx * sizeof(cplx));
    MPI_Alltoall(f->sendbuf, (int)(2 * block), MPI_DOUBLE, f->recvbuf, (int)(2 * block), MPI_DOUBLE,
                 MPI_COMM_WORLD);
    for (int r = 0; r < P; r++)
        for (int yl = 0; yl < f->nyl; yl++)
            for (int zl = 0; zl < f->nzl; zl++)
                memcpy(a + ((long)zl * ny + (long)r * f->nyl + yl) * nx,
                       f->recvbuf + r * block + ((long)yl * f->nzl + zl) * nx, nx * sizeof(cplx));
}

/* Forward transform: `a` (A layout, overwritten) -> `b` (B layout). */
static void forward(struct ft *f, cplx *a, cplx *b) {
    int nx = f->c->nx, ny = f->c->ny, nz = f->c->nz;
    for (int zl = 0; zl < f->nzl; zl++) {
        cplx *plane = a + (long)zl * ny * nx;
        fft_fast_dim(plane, ny, -1, &f->px, f->scratch);
        fft_rows(plane, nx, -1, &f->py);
    }
    a_to_b(f, a, b);
    for (int yl = 0; yl < f->nyl; yl++) fft_rows(b + (long)yl * nz * nx, nx, -1, &f->pz);
}

/* Inverse transform, unnormalised: `b` (B layout, overwritten) -> `a` (A layout). */
static void inverse(struct ft *f, cplx *b, cplx *a) {
    int nx = f->c->nx, ny = f->c->ny, nz = f->c->nz;
    for (int yl = 0; yl < f->nyl; yl++) {
        cplx *plane = b + (long)yl * nz * nx;
        fft_rows(plane, nx, 1, &f->pz);
        fft_fast_dim(plane, nz, 1, &f->px, f->scratch);
    }
    b_to_a(f, b, a);
    for (int zl = 0; zl < f->nzl; zl++) fft_rows(a + (long)zl * ny * nx, nx, 1, &f->py);
}

static int wavenumber(int j, int n) {
    return j < n / 2 ? j : j - n;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    struct ft f;
    memset(&f, 0, sizeof f);
    MPI_Comm_rank(MPI_COMM_WORLD, &f.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &f.size);
    char cls = npb_class(argc, argv, f.rank);
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
        if (classes[i].cls == cls) f.c = &classes[i];
    const struct ft_class *c = f.c;
    /* Both slab layouts split whole planes: at most min(ny, nz) ranks. */
    npb_require_pow2("FT", f.size, c->ny < c->nz ? c->ny : c->nz, f.rank);

    int nx = c->nx, ny = c->ny, nz = c->nz;
    f.nzl = nz / f.size;
    f.nyl = ny / f.size;
    f.z0 = f.nzl * f.rank;
    f.y0 = f.nyl * f.rank;
    f.local = (long)nx * ny * nz / f.size;
    f.px = make_plan(nx);
    f.py = make_plan(ny);
    f.pz = make_plan(nz);
    f.sendbuf = malloc(f.local * sizeof(cplx));
    f.recvbuf = malloc(f.local * sizeof(cplx));
    int widest = nx * (ny > nz ? ny : nz);
    f.scratch = malloc((size_t)widest * sizeof(cplx));
    cplx *ua = malloc(f.local * sizeof(cplx));   /* A layout: initial values, then results */
    cplx *u0 = malloc(f.local * sizeof(cplx));   /* B layout: V exp(-4 alpha pi^2 |k|^2 t) */
    cplx *u1 = malloc(f.local * sizeof(cplx));   /* B layout: scratch for the inverse */
    double *decay = malloc(f.local * sizeof(double));
    double ntotal = (double)nx * ny * nz;

    if (f.rank == 0) {
        printf("\n NAS Parallel Benchmarks - FT Benchmark\n\n");
        printf(" Size: %dx%dx%d  (class %c)\n Iterations: %d\n Number of processes: %d\n\n", nx,
               ny, nz, cls, c->niter, f.size);
    }

    cplx sums[MAX_NITER];
    double elapsed = 0.0;
    /* The first round is untimed and brings every page in; the second is measured. */
    for (int round = 0; round < 2; round++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();

        const double pi = acos(-1.0), alpha = 1.0e-6, ap = -4.0 * alpha * pi * pi;
        for (int yl = 0; yl < f.nyl; yl++) {
            int ky = wavenumber(f.y0 + yl, ny);
            for (int z = 0; z < nz; z++) {
                int kz = wavenumber(z, nz);
                double *row = decay + ((long)yl * nz + z) * nx;
                for (int x = 0; x < nx; x++) {
                    int kx = wavenumber(x, nx);
                    row[x] = exp(ap * (double)(kx * kx + ky * ky + kz * kz));
                }
            }
        }
        for (int zl = 0; zl < f.nzl; zl++) {
            double seed = npb_skip(NPB_SEED, 2LL * nx * ny * (f.z0 + zl));
            npb_vranlc(2L * nx * ny, &seed, NPB_A, (double *)(ua + (long)zl * nx * ny));
        }
        forward(&f, ua, u0);

        for (int t = 0; t < c->niter; t++) {
            for (long i = 0; i < f.local; i++) {
                u0[i].re *= decay[i];
                u0[i].im *= decay[i];
            }
            memcpy(u1, u0, f.local * sizeof(cplx));
            inverse(&f, u1, ua);
            double local[2] = {0.0, 0.0}, global[2];
            for (int j = 1; j <= CHECKSUM_POINTS; j++) {
                int q = j % nx, r = 3 * j % ny, s = 5 * j % nz;
                if (s < f.z0 || s >= f.z0 + f.nzl) continue;
                cplx v = ua[((long)(s - f.z0) * ny + r) * nx + q];
                local[0] += v.re;
                local[1] += v.im;
            }
            MPI_Allreduce(local, global, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            sums[t].re = global[0] / ntotal;
            sums[t].im = global[1] / ntotal;
            if (round == 1 && f.rank == 0)
                printf(" T = %5d     Checksum = %22.12e %22.12e\n", t + 1, sums[t].re, sums[t].im);
        }
        elapsed = MPI_Wtime() - start;
    }
    double slowest;
    MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    /* The specification's tolerance: relative error of each complex checksum. */
    const double epsilon = 1.0e-12;
    int verified = 1;
    double worst = 0.0;
    for (int t = 0; t < c->niter; t++) {
        double dr = sums[t].re - c->re[t], di = sums[t].im - c->im[t];
        double err = sqrt(dr * dr + di * di) / sqrt(c->re[t] * c->re[t] + c->im[t] * c->im[t]);
        if (!(err <= epsilon)) {
            verified = 0;
            if (f.rank == 0)
                printf(" checksum %d off by %.3e (tolerance %.0e)\n", t + 1, err, epsilon);
        }
        if (err > worst) worst = err;
    }
    if (f.rank == 0)
        printf("\n largest relative error of the %d checksums: %.3e (tolerance %.0e)\n", c->niter,
               worst, epsilon);
    double lg = log(ntotal);
    double mops = ntotal * (14.8157 + 7.19641 * lg + (5.23518 + 7.21113 * lg) * c->niter) /
                  slowest / 1e6;
    char sizebuf[48];
    snprintf(sizebuf, sizeof sizebuf, "%dx%dx%d", nx, ny, nz);
    int status = npb_report("FT", cls, sizebuf, c->niter, slowest, mops, "floating point", verified,
                            f.size, f.rank);
    MPI_Finalize();
    return status;
}
