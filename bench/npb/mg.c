/* NPB MG: a few V-cycles of multigrid on the periodic 3-D Poisson problem A u = v.
 * Written from the NPB specification (RNR-94-007, NAS-95-020).
 *
 * v is zero except for +1 at the ten grid points where the NPB random sequence (laid over
 * the grid with x fastest) is largest and -1 at the ten where it is smallest. Starting from
 * u = 0, each iteration computes r = v - A u and u = u + M r, where M is one V-cycle:
 * restrict r down to the 2x2x2 grid with P, smooth there with S, then on the way up
 * interpolate with Q, recompute the residual and smooth again. A, S, P and Q are 27-point
 * operators given by four coefficients (centre, 6 faces, 12 edges, 8 corners). The result is
 * the L2 norm of the final residual.
 *
 * Ranks hold equal blocks of the grid on a process grid that halves z, then y, then x.
 * Coarse grids whose blocks would have fewer than two points a side are kept whole on
 * every rank (they are tiny) and computed redundantly; the restriction into such a grid adds
 * up every rank's part with one allreduce. */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mg_class {
    char cls;
    int n, nit;
    double rnm2_verify;
};

static const struct mg_class classes[] = {
    {'S', 32, 4, 0.5307707005734e-04},
    {'W', 128, 4, 0.6467329375339e-05},
    {'A', 256, 4, 0.2433365309069e-05},
};

/* Operator coefficients: centre, faces, edges, corners. */
static const double coef_a[4] = {-8.0 / 3.0, 0.0, 1.0 / 6.0, 1.0 / 12.0};
static const double coef_s[4] = {-3.0 / 8.0, 1.0 / 32.0, -1.0 / 64.0, 0.0};

struct level {
    int k;                /* the grid has 2^k points a side */
    int distributed;      /* split over the process grid, or whole on every rank */
    int n[3], off[3];     /* interior points here and the global index of the first */
    long stride[3];       /* array strides of x, y, z; one ghost layer on every side */
    long len;
    double *u, *r;
};

static int pdims[3], pcoord[3], nbr_lo[3], nbr_hi[3];

static long at(const struct level *L, int i, int j, int k) {
    return i + L->stride[1] * j + L->stride[2] * k;
}

static void setup_level(struct level *L, int k) {
    int side = 1 << k;
    L->k = k;
    L->distributed = 1;
    for (int d = 0; d < 3; d++)
        if (side / pdims[d] < 2) L->distributed = 0;
    for (int d = 0; d < 3; d++) {
        L->n[d] = L->distributed ? side / pdims[d] : side;
        L->off[d] = L->distributed ? L->n[d] * pcoord[d] : 0;
    }
    L->stride[0] = 1;
    L->stride[1] = L->n[0] + 2;
    L->stride[2] = L->stride[1] * (L->n[1] + 2);
    L->len = L->stride[2] * (L->n[2] + 2);
    L->u = calloc(L->len, sizeof(double));
    L->r = calloc(L->len, sizeof(double));
}

/* Copy the plane at index `from` along dimension d (ghosts of the other dimensions
 * included) into a buffer, or the buffer into the plane `to`. */
static void plane_io(double *a, const struct level *L, int d, int idx, double *buf, int pack) {
    int d1 = d == 0 ? 1 : 0, d2 = d == 2 ? 1 : 2;
    long base = idx * L->stride[d], m = 0;
    for (int j2 = 0; j2 < L->n[d2] + 2; j2++)
        for (int j1 = 0; j1 < L->n[d1] + 2; j1++, m++) {
            long o = base + j1 * L->stride[d1] + j2 * L->stride[d2];
            if (pack) buf[m] = a[o];
            else a[o] = buf[m];
        }
}

static double *halo_send, *halo_recv;

/* Refresh the ghost layers of `a` (periodic boundaries). Dimensions are done one after the
 * other over whole planes, ghosts included, so edges and corners come along. */
static void comm3(const struct level *L, double *a) {
    for (int d = 0; d < 3; d++) {
        int nd = L->n[d];
        if (!L->distributed || pdims[d] == 1) {
            plane_io(a, L, d, nd, halo_send, 1);
            plane_io(a, L, d, 0, halo_send, 0);
            plane_io(a, L, d, 1, halo_send, 1);
            plane_io(a, L, d, nd + 1, halo_send, 0);
            continue;
        }
        int d1 = d == 0 ? 1 : 0, d2 = d == 2 ? 1 : 2;
        int count = (L->n[d1] + 2) * (L->n[d2] + 2);
        plane_io(a, L, d, nd, halo_send, 1);
        MPI_Sendrecv(halo_send, count, MPI_DOUBLE, nbr_hi[d], 2 * d, halo_recv, count,
                     MPI_DOUBLE, nbr_lo[d], 2 * d, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        plane_io(a, L, d, 0, halo_recv, 0);
        plane_io(a, L, d, 1, halo_send, 1);
        MPI_Sendrecv(halo_send, count, MPI_DOUBLE, nbr_lo[d], 2 * d + 1, halo_recv, count,
                     MPI_DOUBLE, nbr_hi[d], 2 * d + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        plane_io(a, L, d, nd + 1, halo_recv, 0);
    }
}

static double *line1, *line2;

/* For the x-line (j, k): face[i] = sum of the 4 y/z face neighbours of (i, j, k) and
 * edge[i] = sum of its 4 y/z diagonal neighbours, for i over the whole line. With these a
 * 27-point operator needs only x neighbours. */
static void yz_sums(const struct level *L, const double *a, int j, int k, double *face,
                    double *edge) {
    long sy = L->stride[1], sz = L->stride[2];
    const double *c = a + at(L, 0, j, k);
    for (int i = 0; i < L->n[0] + 2; i++) {
        face[i] = c[i - sy] + c[i + sy] + c[i - sz] + c[i + sz];
        edge[i] = c[i - sy - sz] + c[i + sy - sz] + c[i - sy + sz] + c[i + sy + sz];
    }
}

/* r = v - A u (r may be v). */
static void resid(const struct level *L, const double *u, const double *v, double *r) {
    const double *a = coef_a;
    for (int k = 1; k <= L->n[2]; k++)
        for (int j = 1; j <= L->n[1]; j++) {
            yz_sums(L, u, j, k, line1, line2);
            long o = at(L, 0, j, k);
            const double *uu = u + o;
            for (int i = 1; i <= L->n[0]; i++)
                r[o + i] = v[o + i] - a[0] * uu[i] - a[1] * (uu[i - 1] + uu[i + 1] + line1[i]) -
                           a[2] * (line2[i] + line1[i - 1] + line1[i + 1]) -
                           a[3] * (line2[i - 1] + line2[i + 1]);
        }
    comm3(L, r);
}

/* u = u + S r. */
static void psinv(const struct level *L, const double *r, double *u) {
    const double *c = coef_s;
    for (int k = 1; k <= L->n[2]; k++)
        for (int j = 1; j <= L->n[1]; j++) {
            yz_sums(L, r, j, k, line1, line2);
            long o = at(L, 0, j, k);
            const double *rr = r + o;
            for (int i = 1; i <= L->n[0]; i++)
                u[o + i] += c[0] * rr[i] + c[1] * (rr[i - 1] + rr[i + 1] + line1[i]) +
                            c[2] * (line2[i] + line1[i - 1] + line1[i + 1]) +
                            c[3] * (line2[i - 1] + line2[i + 1]);
        }
    comm3(L, u);
}

/* Coarse residual = P (fine residual). Coarse point j sits on fine point 2j+1 (global,
 * 0-based); P weighs it 1/2, faces 1/4, edges 1/8, corners 1/16. Each rank computes the
 * coarse points that sit in its fine block. */
static void rprj3(const struct level *F, const struct level *C) {
    int half[3], shift[3];
    for (int d = 0; d < 3; d++) {
        half[d] = F->n[d] / 2;
        shift[d] = F->off[d] / 2 - C->off[d];
    }
    int gather = F->distributed && !C->distributed;
    if (gather) memset(C->r, 0, C->len * sizeof(double));
    for (int jz = 0; jz < half[2]; jz++)
        for (int jy = 0; jy < half[1]; jy++) {
            yz_sums(F, F->r, 2 * jy + 2, 2 * jz + 2, line1, line2);
            const double *rr = F->r + at(F, 0, 2 * jy + 2, 2 * jz + 2);
            double *out = C->r + at(C, shift[0] + 1, shift[1] + jy + 1, shift[2] + jz + 1);
            for (int jx = 0; jx < half[0]; jx++) {
                int i = 2 * jx + 2;
                out[jx] = 0.5 * rr[i] + 0.25 * (rr[i - 1] + rr[i + 1] + line1[i]) +
                          0.125 * (line1[i - 1] + line1[i + 1] + line2[i]) +
                          0.0625 * (line2[i - 1] + line2[i + 1]);
            }
        }
    if (gather) MPI_Allreduce(MPI_IN_PLACE, C->r, (int)C->len, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    comm3(C, C->r);
}

/* Fine u += Q (coarse u): trilinear interpolation. A fine point on a coarse point takes
 * its value, one between two coarse points their mean, in each dimension. */
static void interp(const struct level *C, const struct level *F) {
    int *lo[3], *hi[3];
    for (int d = 0; d < 3; d++) {
        lo[d] = malloc(F->n[d] * sizeof(int));
        hi[d] = malloc(F->n[d] * sizeof(int));
        for (int i = 0; i < F->n[d]; i++) {
            int g = F->off[d] + i;
            int c0 = (g & 1) ? (g - 1) / 2 : g / 2 - 1, c1 = (g & 1) ? c0 : g / 2;
            lo[d][i] = c0 - C->off[d] + 1;   /* array index, ghost layer included */
            hi[d][i] = c1 - C->off[d] + 1;
        }
    }
    const double *z = C->u;
    for (int k = 0; k < F->n[2]; k++)
        for (int j = 0; j < F->n[1]; j++) {
            double *out = F->u + at(F, 1, j + 1, k + 1);
            long y0z0 = at(C, 0, lo[1][j], lo[2][k]), y1z0 = at(C, 0, hi[1][j], lo[2][k]);
            long y0z1 = at(C, 0, lo[1][j], hi[2][k]), y1z1 = at(C, 0, hi[1][j], hi[2][k]);
            for (int i = 0; i < F->n[0]; i++) {
                int x0 = lo[0][i], x1 = hi[0][i];
                double a = 0.5 * (z[y0z0 + x0] + z[y0z0 + x1]);
                double b = 0.5 * (z[y1z0 + x0] + z[y1z0 + x1]);
                double c = 0.5 * (z[y0z1 + x0] + z[y0z1 + x1]);
                double e = 0.5 * (z[y1z1 + x0] + z[y1z1 + x1]);
                out[i] += 0.5 * (0.5 * (a + b) + 0.5 * (c + e));
            }
        }
    for (int d = 0; d < 3; d++) {
        free(lo[d]);
        free(hi[d]);
    }
    comm3(F, F->u);
}

/* One V-cycle: u = u + M r on the finest level lt, where r = v - A u on entry;
 * on return r = v - A u for the new u. */
static void mg3p(struct level *lv, int lt, const double *v) {
    for (int k = lt; k > 1; k--) rprj3(&lv[k], &lv[k - 1]);
    memset(lv[1].u, 0, lv[1].len * sizeof(double));
    psinv(&lv[1], lv[1].r, lv[1].u);
    for (int k = 2; k < lt; k++) {
        memset(lv[k].u, 0, lv[k].len * sizeof(double));
        interp(&lv[k - 1], &lv[k]);
        resid(&lv[k], lv[k].u, lv[k].r, lv[k].r);
        psinv(&lv[k], lv[k].r, lv[k].u);
    }
    interp(&lv[lt - 1], &lv[lt]);
    resid(&lv[lt], lv[lt].u, v, lv[lt].r);
    psinv(&lv[lt], lv[lt].r, lv[lt].u);
}

struct extreme {
    double value;
    long long index;
};

/* Keep best[0..9] as the ten largest (sign = 1) or smallest (sign = -1) seen, best first. */
static void keep(struct extreme *best, int *count, double value, long long index, int sign) {
    if (*count == 10 && sign * value <= sign * best[9].value) return;
    int i = *count < 10 ? (*count)++ : 9;
    while (i > 0 && sign * value > sign * best[i - 1].value) {
        best[i] = best[i - 1];
        i--;
    }
    best[i] = (struct extreme){value, index};
}

/* v: +1 where the random field is among its ten largest values, -1 among the ten smallest.
 * Field point (x, y, z) holds the value number 1 + x + n (y + n z) of the sequence. */
static void zran3(const struct level *L, double *v, int n) {
    struct extreme hi[10], lo[10];
    int nhi = 0, nlo = 0;
    double *line = malloc(L->n[0] * sizeof(double));
    for (int k = 0; k < L->n[2]; k++)
        for (int j = 0; j < L->n[1]; j++) {
            long long first = L->off[0] + (long long)n * ((L->off[1] + j) + (long long)n * (L->off[2] + k));
            double x = npb_skip(NPB_SEED, first);
            npb_vranlc(L->n[0], &x, NPB_A, line);
            for (int i = 0; i < L->n[0]; i++) {
                keep(hi, &nhi, line[i], first + i, 1);
                keep(lo, &nlo, line[i], first + i, -1);
            }
        }
    free(line);

    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    struct extreme *all_hi = malloc(10 * size * sizeof *all_hi);
    struct extreme *all_lo = malloc(10 * size * sizeof *all_lo);
    MPI_Allgather(hi, (int)sizeof hi, MPI_BYTE, all_hi, (int)sizeof hi, MPI_BYTE, MPI_COMM_WORLD);
    MPI_Allgather(lo, (int)sizeof lo, MPI_BYTE, all_lo, (int)sizeof lo, MPI_BYTE, MPI_COMM_WORLD);
    nhi = nlo = 0;
    for (int m = 0; m < 10 * size; m++) {
        keep(hi, &nhi, all_hi[m].value, all_hi[m].index, 1);
        keep(lo, &nlo, all_lo[m].value, all_lo[m].index, -1);
    }
    free(all_hi);
    free(all_lo);

    memset(v, 0, L->len * sizeof(double));
    for (int m = 0; m < 20; m++) {
        long long g = m < 10 ? lo[m].index : hi[m - 10].index;
        int x = (int)(g % n), y = (int)(g / n % n), z = (int)(g / n / n);
        x -= L->off[0];
        y -= L->off[1];
        z -= L->off[2];
        if (x < 0 || x >= L->n[0] || y < 0 || y >= L->n[1] || z < 0 || z >= L->n[2]) continue;
        v[at(L, x + 1, y + 1, z + 1)] = m < 10 ? -1.0 : 1.0;
    }
    comm3(L, v);
}

/* sqrt(sum r^2 / points) and max |r| over the whole grid. */
static void norm2u3(const struct level *L, const double *r, double *rnm2, double *rnmu) {
    double sum = 0.0, max = 0.0;
    for (int k = 1; k <= L->n[2]; k++)
        for (int j = 1; j <= L->n[1]; j++)
            for (int i = 1; i <= L->n[0]; i++) {
                double x = r[at(L, i, j, k)];
                sum += x * x;
                if (fabs(x) > max) max = fabs(x);
            }
    double gsum, gmax;
    MPI_Allreduce(&sum, &gsum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&max, &gmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double points = pow(2.0, 3 * L->k);
    *rnm2 = sqrt(gsum / points);
    *rnmu = gmax;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char cls = npb_class(argc, argv, rank);
    const struct mg_class *c = NULL;
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
        if (classes[i].cls == cls) c = &classes[i];
    /* The finest grid must give every rank at least 2 points a side: n^3 / 8 ranks. */
    npb_require_pow2("MG", size, c->n * c->n * c->n / 8, rank);

    pdims[0] = pdims[1] = pdims[2] = 1;
    for (int f = 0, left = size; left > 1; f++, left /= 2) pdims[2 - f % 3] *= 2;
    pcoord[0] = rank % pdims[0];
    pcoord[1] = rank / pdims[0] % pdims[1];
    pcoord[2] = rank / pdims[0] / pdims[1];
    for (int d = 0; d < 3; d++) {
        int step = d == 0 ? 1 : d == 1 ? pdims[0] : pdims[0] * pdims[1];
        int lo = (pcoord[d] + pdims[d] - 1) % pdims[d], hi = (pcoord[d] + 1) % pdims[d];
        nbr_lo[d] = rank + (lo - pcoord[d]) * step;
        nbr_hi[d] = rank + (hi - pcoord[d]) * step;
    }

    int lt = npb_ilog2(c->n);
    struct level *lv = calloc(lt + 1, sizeof *lv);
    for (int k = 1; k <= lt; k++) setup_level(&lv[k], k);
    /* A coarse grid kept whole can be wider than the finest grid's block. */
    long plane = 0, line = 0;
    for (int k = 1; k <= lt; k++) {
        for (int d = 0; d < 3; d++) {
            long p = (long)(lv[k].n[(d + 1) % 3] + 2) * (lv[k].n[(d + 2) % 3] + 2);
            if (p > plane) plane = p;
        }
        if (lv[k].n[0] + 2 > line) line = lv[k].n[0] + 2;
    }
    halo_send = malloc(plane * sizeof(double));
    halo_recv = malloc(plane * sizeof(double));
    line1 = malloc(line * sizeof(double));
    line2 = malloc(line * sizeof(double));
    double *v = calloc(lv[lt].len, sizeof(double));
    struct level *top = &lv[lt];

    if (rank == 0) {
        printf("\n NAS Parallel Benchmarks - MG Benchmark\n\n");
        printf(" Size: %dx%dx%d  (class %c)\n Iterations: %d\n Number of processes: %d"
               " (process grid %dx%dx%d)\n\n",
               c->n, c->n, c->n, cls, c->nit, size, pdims[0], pdims[1], pdims[2]);
    }
    zran3(top, v, c->n);

    /* One untimed iteration brings every page in; u starts over afterwards. */
    resid(top, top->u, v, top->r);
    mg3p(lv, lt, v);
    resid(top, top->u, v, top->r);
    memset(top->u, 0, top->len * sizeof(double));

    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    resid(top, top->u, v, top->r);
    for (int it = 1; it <= c->nit; it++) {
        if (rank == 0 && (it == 1 || it == c->nit || it % 5 == 0)) printf("  iter %3d\n", it);
        mg3p(lv, lt, v);
        resid(top, top->u, v, top->r);
    }
    double rnm2, rnmu;
    norm2u3(top, top->r, &rnm2, &rnmu);
    double elapsed = MPI_Wtime() - start, slowest;
    MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    const double epsilon = 1.0e-8;
    double err = fabs(rnm2 - c->rnm2_verify) / c->rnm2_verify;
    int verified = err <= epsilon;
    if (rank == 0)
        printf("\n L2 norm of the residual = %20.13e, reference %20.13e, relative error %.3e"
               " (tolerance %.0e)\n",
               rnm2, c->rnm2_verify, err, epsilon);
    double points = (double)c->n * c->n * c->n;
    double mops = 58.0 * c->nit * points / slowest / 1e6;
    char sizebuf[48];
    snprintf(sizebuf, sizeof sizebuf, "%dx%dx%d", c->n, c->n, c->n);
    int status = npb_report("MG", cls, sizebuf, c->nit, slowest, mops, "floating point", verified,
                            size, rank);
    MPI_Finalize();
    return status;
}
