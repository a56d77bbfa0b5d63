/*
 * LU: the NAS Parallel Benchmarks' lower-upper symmetric Gauss-Seidel pseudo-application,
 * written from the published specification (NAS RNR-94-007 and NAS-95-020).
 *
 * It solves the steady 3-D compressible Navier-Stokes equations on the unit cube, in the five
 * conserved variables (density, three momenta, energy), with a manufactured exact solution:
 * the forcing term is the discrete operator applied to that solution, so the discrete steady
 * state is known. The spatial operator uses central differences for the Euler and viscous
 * fluxes plus second- and fourth-difference artificial dissipation; the pseudo-time march is
 * SSOR (omega = 1.2) with a block lower sweep and a block upper sweep over 5x5 blocks.
 *
 * Parallel layout: the x-y plane is split over a px x py process grid; z stays whole. The
 * lower sweep is a pipelined wavefront: for each k-plane a rank waits for one column from
 * its west neighbour and one row from its north neighbour, sweeps its part of the plane, and
 * passes its last column east and last row south; the upper sweep runs the same way in
 * reverse. The right-hand side needs two layers of halo in x and y, exchanged each iteration.
 *
 * Usage: lu [S|W|A|B|C]     exits 0 when the result verifies, 1 when not, 2 on bad usage.
 */
#include "lu_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- problem constants */

static const double C1 = 1.4, C2 = 0.4, C3 = 0.1, C4 = 1.0, C5 = 1.4;
static const double OMEGA = 1.2;
static const double R43 = 4.0 / 3.0;
static const double DSSP = 0.25; /* max of the second-difference coefficients, over four */

/* Coefficients of the exact solution: u_m = sum_n CE[m][n] * monomial_n(xi, eta, zeta). */
static const double CE[NVAR][13] = {
    {2.0, 0.0, 0.0, 4.0, 5.0, 3.0, 0.5, 0.02, 0.01, 0.03, 0.5, 0.4, 0.3},
    {1.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 0.01, 0.03, 0.02, 0.4, 0.3, 0.5},
    {2.0, 2.0, 0.0, 0.0, 0.0, 2.0, 3.0, 0.04, 0.03, 0.05, 0.3, 0.5, 0.4},
    {2.0, 2.0, 0.0, 0.0, 0.0, 2.0, 3.0, 0.03, 0.05, 0.04, 0.2, 0.1, 0.3},
    {5.0, 4.0, 3.0, 2.0, 0.1, 0.4, 0.3, 0.05, 0.04, 0.03, 0.1, 0.3, 0.2},
};

/* Per-direction constants: 1/h^2, 1/(2h), 1/h, and the second-difference dissipation. */
typedef struct {
    double t1, t2, t3;
    double diss[NVAR];
} direction_t;

static direction_t dir[3];
static double c34, c1345, c1c5;

/* ---------------------------------------------------------------- the run's state */

static lu_class_t cls;
static lu_grid_t g;
static double *u, *rsd, *frct;

static void exact_solution(int gi, int gj, int k, double out[NVAR])
{
    const double h = 1.0 / (double)(cls.n - 1);
    const double xi = gi * h, eta = gj * h, zeta = k * h;
    for (int m = 0; m < NVAR; m++) {
        const double *c = CE[m];
        out[m] = c[0] + c[1] * xi + c[2] * eta + c[3] * zeta
               + c[4] * xi * xi + c[5] * eta * eta + c[6] * zeta * zeta
               + c[7] * xi * xi * xi + c[8] * eta * eta * eta + c[9] * zeta * zeta * zeta
               + c[10] * xi * xi * xi * xi + c[11] * eta * eta * eta * eta
               + c[12] * zeta * zeta * zeta * zeta;
    }
}

static void set_constants(void)
{
    const double h = 1.0 / (double)(cls.n - 1);
    const double diss[3] = {0.75, 0.75, 1.0};
    for (int d = 0; d < 3; d++) {
        dir[d].t1 = 1.0 / (h * h);
        dir[d].t2 = 1.0 / (2.0 * h);
        dir[d].t3 = 1.0 / h;
        for (int m = 0; m < NVAR; m++)
            dir[d].diss[m] = diss[d];
    }
    c34 = C3 * C4;
    c1c5 = C1 * C5;
    c1345 = c34 * c1c5;
}

/*
 * Initial state: the exact solution on the six faces; inside, the transfinite interpolation
 * of the face values along the three coordinate lines through the point.
 */
static void initial_state(void)
{
    const int n = cls.n;
    const double h = 1.0 / (double)(n - 1);
    for (int k = 0; k < n; k++)
        for (int gj = g.j0; gj < g.j0 + g.nj; gj++)
            for (int gi = g.i0; gi < g.i0 + g.ni; gi++) {
                double *p = u + lu_at(&g, gi, gj, k);
                int on_face = gi == 0 || gi == n - 1 || gj == 0 || gj == n - 1 || k == 0 || k == n - 1;
                if (on_face) {
                    exact_solution(gi, gj, k, p);
                    continue;
                }
                double xw[NVAR], xe[NVAR], ys[NVAR], yn[NVAR], zb[NVAR], zt[NVAR];
                exact_solution(0, gj, k, xw);
                exact_solution(n - 1, gj, k, xe);
                exact_solution(gi, 0, k, ys);
                exact_solution(gi, n - 1, k, yn);
                exact_solution(gi, gj, 0, zb);
                exact_solution(gi, gj, n - 1, zt);
                const double xi = gi * h, eta = gj * h, zeta = k * h;
                for (int m = 0; m < NVAR; m++) {
                    double px = (1.0 - xi) * xw[m] + xi * xe[m];
                    double py = (1.0 - eta) * ys[m] + eta * yn[m];
                    double pz = (1.0 - zeta) * zb[m] + zeta * zt[m];
                    p[m] = px + py + pz - px * py - py * pz - pz * px + px * py * pz;
                }
            }
}

/* ---------------------------------------------------------------- spatial operator */

/* Euler flux along the direction whose momentum component is c (1, 2 or 3). */
static void euler_flux(const double *w, int c, double f[NVAR])
{
    const double vn = w[c] / w[0];
    const double q = 0.5 * (w[1] * w[1] + w[2] * w[2] + w[3] * w[3]) / w[0];
    f[0] = w[c];
    for (int m = 1; m <= 3; m++)
        f[m] = w[m] * vn;
    f[c] += C2 * (w[4] - q);
    f[4] = (C1 * w[4] - C2 * q) * vn;
}

/*
 * Viscous flux across the face between points a and b = a - stride, along the direction whose
 * momentum component is c, without the common factor c3*c4 (components 1..4; density has none).
 */
static void viscous_face_flux(const double *a, const double *b, int c, double t3, double f[NVAR])
{
    const double ra = 1.0 / a[0], rb = 1.0 / b[0];
    double va[4], vb[4];
    for (int m = 1; m <= 3; m++) {
        va[m] = a[m] * ra;
        vb[m] = b[m] * rb;
    }
    f[0] = 0.0;
    for (int m = 1; m <= 3; m++)
        f[m] = t3 * (va[m] - vb[m]) * (m == c ? R43 : 1.0);
    const double ka = va[1] * va[1] + va[2] * va[2] + va[3] * va[3];
    const double kb = vb[1] * vb[1] + vb[2] * vb[2] + vb[3] * vb[3];
    f[4] = 0.5 * (1.0 - c1c5) * t3 * (ka - kb)
         + (1.0 / 6.0) * t3 * (va[c] * va[c] - vb[c] * vb[c])
         + c1c5 * t3 * (a[4] * ra - b[4] * rb);
}

/*
 * Fourth difference of w along a line at position pos (0 < pos < n-1). Within two points of
 * either end the stencil is cut short so that it never uses the boundary point itself.
 */
static double fourth_difference(const double *w, ptrdiff_t s, int pos, int n)
{
    if (pos == 1)
        return 5.0 * w[0] - 4.0 * w[s] + w[2 * s];
    if (pos == 2)
        return -4.0 * w[-s] + 6.0 * w[0] - 4.0 * w[s] + w[2 * s];
    if (pos == n - 3)
        return w[-2 * s] - 4.0 * w[-s] + 6.0 * w[0] - 4.0 * w[s];
    if (pos == n - 2)
        return w[-2 * s] - 4.0 * w[-s] + 5.0 * w[0];
    return w[-2 * s] - 4.0 * w[-s] + 6.0 * w[0] - 4.0 * w[s] + w[2 * s];
}

/*
 * out += L(w) at every interior point this rank owns, where L is the discrete spatial
 * operator (minus the flux divergence, plus viscous terms and dissipation). w must hold
 * valid values two points deep around the owned block (or up to the boundary).
 */
static void add_operator(const double *w, double *out)
{
    const int n = cls.n;
    const lu_range_t r = lu_interior(&g, n);
    const ptrdiff_t stride[3] = {g.sx, g.sy, g.sz};
    /* Fluxes along one line, computed once per point (Euler) or face (viscous). */
    double (*flux)[NVAR] = malloc((size_t)(n + 2) * sizeof *flux);
    double (*face)[NVAR] = malloc((size_t)(n + 2) * sizeof *face);
    if (!flux || !face) {
        fprintf(stderr, "lu: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int d = 0; d < 3; d++) {
        const direction_t *D = &dir[d];
        const ptrdiff_t s = stride[d];
        const int c = d + 1;
        const int lo[3] = {r.ilo, r.jlo, 1}, hi[3] = {r.ihi, r.jhi, n - 1};
        /* One start per line: the other two coordinates range over the interior. */
        int end[3] = {hi[0], hi[1], hi[2]};
        end[d] = lo[d] + 1;
        const int len = hi[d] - lo[d];
        for (int k = lo[2]; k < end[2]; k++)
            for (int gj = lo[1]; gj < end[1]; gj++)
                for (int gi = lo[0]; gi < end[0]; gi++) {
                    const double *w0 = w + lu_at(&g, gi, gj, k);
                    double *o0 = out + lu_at(&g, gi, gj, k);
                    /* flux[t + 1] at point t, t = -1 .. len; face[t] between t - 1 and t. */
                    for (int t = -1; t <= len; t++)
                        euler_flux(w0 + t * s, c, flux[t + 1]);
                    for (int t = 0; t <= len; t++)
                        viscous_face_flux(w0 + t * s, w0 + (t - 1) * s, c, D->t3, face[t]);
                    for (int t = 0; t < len; t++) {
                        const int pos = lo[d] + t;
                        for (int m = 0; m < NVAR; m++) {
                            const double *wm = w0 + t * s + m;
                            o0[t * s + m] += -D->t2 * (flux[t + 2][m] - flux[t][m])
                                           + D->t3 * c34 * (face[t + 1][m] - face[t][m])
                                           + D->diss[m] * D->t1 * (wm[-s] - 2.0 * wm[0] + wm[s])
                                           - DSSP * fourth_difference(wm, s, pos, n);
                        }
                    }
                }
    }
    free(flux);
    free(face);
}

/* The forcing term: the operator applied to the exact solution (rsd serves as scratch). */
static void compute_forcing(void)
{
    const int n = cls.n;
    for (int k = 0; k < n; k++)
        for (int gj = lu_max(g.j0 - 2, 0); gj < lu_min(g.j0 + g.nj + 2, n); gj++)
            for (int gi = lu_max(g.i0 - 2, 0); gi < lu_min(g.i0 + g.ni + 2, n); gi++)
                exact_solution(gi, gj, k, rsd + lu_at(&g, gi, gj, k));
    memset(frct, 0, g.len * sizeof(double));
    add_operator(rsd, frct);
}

/* rsd = L(u) - L(u_exact), zero on the boundary; exchanges u's halo first. */
static void compute_residual(void)
{
    lu_exchange_halo(&g, u, cls.n);
    for (size_t x = 0; x < g.len; x++)
        rsd[x] = -frct[x];
    add_operator(u, rsd);
}

/* ---------------------------------------------------------------- SSOR blocks */

/*
 * The implicit operator couples each interior point to its six neighbours through 5x5
 * blocks. The block towards neighbour w along a direction is
 *     side * dt * t2 * A(w)  -  dt * t1 * (V(w) + diss * I),
 * where A is the Jacobian of the Euler flux, V that of the viscous terms (both evaluated
 * at the neighbour), side -1 for the lower and +1 for the upper neighbour. The blocks are
 * only ever multiplied by a vector, so the products are formed directly.
 */

/* acc += scale * A(w) v, A the Jacobian of the Euler flux along momentum component c. */
static void add_euler_product(const double *w, int c, const double *v, double scale,
                              double acc[NVAR])
{
    const double r = 1.0 / w[0];
    const double vel[4] = {0.0, w[1] * r, w[2] * r, w[3] * r};
    const double vn = vel[c], e = w[4] * r;
    const double v2 = vel[1] * vel[1] + vel[2] * vel[2] + vel[3] * vel[3];
    const double vdot = vel[1] * v[1] + vel[2] * v[2] + vel[3] * v[3];
    double out[NVAR];
    out[0] = v[c];
    for (int m = 1; m <= 3; m++)
        out[m] = vn * v[m] + vel[m] * v[c] - vel[m] * vn * v[0];
    out[c] = (0.5 * C2 * v2 - vn * vn) * v[0] - C2 * vdot + 2.0 * vn * v[c] + C2 * v[4];
    out[4] = (C2 * v2 - C1 * e) * vn * v[0] - C2 * vn * vdot + (C1 * e - 0.5 * C2 * v2) * v[c]
           + C1 * vn * v[4];
    for (int m = 0; m < NVAR; m++)
        acc[m] += scale * out[m];
}

/*
 * acc += scale * V(w) v, V the Jacobian (times c3*c4) of what the viscous terms difference:
 * the velocities (4/3 for the one along the direction) and, for energy, the squared
 * velocities, each weighted by half of (its momentum's coefficient - c1*c3*c4*c5), plus the
 * internal energy weighted by c1*c3*c4*c5.
 */
static void add_viscous_product(const double *w, int c, const double *v, double scale,
                                double acc[NVAR])
{
    const double r = 1.0 / w[0];
    double energy = c1345 * (v[4] - w[4] * r * v[0]);
    for (int m = 1; m <= 3; m++) {
        const double vel = w[m] * r;
        const double dv = v[m] - vel * v[0]; /* (d velocity) * density */
        const double mom = c34 * (m == c ? R43 : 1.0);
        acc[m] += scale * mom * r * dv;
        energy += (mom - c1345) * vel * dv;
    }
    acc[4] += scale * r * energy;
}

/* acc += scale * B v for the block B towards neighbour w along direction d. */
static void add_neighbour_product(const double *w, int d, int side, const double *v,
                                  double scale, double acc[NVAR])
{
    const direction_t *D = &dir[d];
    const double dt = cls.dt;
    add_euler_product(w, d + 1, v, scale * side * dt * D->t2, acc);
    add_viscous_product(w, d + 1, v, -scale * dt * D->t1, acc);
    for (int m = 0; m < NVAR; m++)
        acc[m] -= scale * dt * D->t1 * D->diss[m] * v[m];
}

/*
 * The diagonal block I + 2 dt sum_d t1_d (V_d(w) + diss_d I). Its nonzeros are the diagonal,
 * column 0 and the last row, so it is kept in that shape and solved by substitution.
 */
typedef struct {
    double diag[NVAR];
    double col0[NVAR]; /* rows 1..4 */
    double last[4];    /* row 4, columns 1..3 */
} diagonal_t;

static void diagonal_block(const double *w, diagonal_t *b)
{
    const double dt = cls.dt;
    const double r = 1.0 / w[0], e = w[4] * r;
    const double vel[4] = {0.0, w[1] * r, w[2] * r, w[3] * r};
    for (int m = 0; m < NVAR; m++) {
        b->diag[m] = 1.0;
        b->col0[m] = 0.0;
    }
    for (int m = 0; m < 4; m++)
        b->last[m] = 0.0;
    for (int d = 0; d < 3; d++) {
        const direction_t *D = &dir[d];
        const double s = 2.0 * dt * D->t1;
        double energy0 = -c1345 * r * e;
        for (int m = 1; m <= 3; m++) {
            const double mom = c34 * (d + 1 == m ? R43 : 1.0);
            b->diag[m] += s * mom * r;
            b->col0[m] -= s * mom * r * vel[m];
            b->last[m] += s * (mom - c1345) * r * vel[m];
            energy0 -= (mom - c1345) * r * vel[m] * vel[m];
        }
        b->col0[4] += s * energy0;
        b->diag[4] += s * c1345 * r;
        for (int m = 0; m < NVAR; m++)
            b->diag[m] += s * D->diss[m];
    }
}

/* Solves b x = v in place. */
static void solve_diagonal(const diagonal_t *b, double v[NVAR])
{
    v[0] /= b->diag[0];
    for (int m = 1; m <= 3; m++)
        v[m] = (v[m] - b->col0[m] * v[0]) / b->diag[m];
    v[4] = (v[4] - b->col0[4] * v[0] - b->last[1] * v[1] - b->last[2] * v[2] - b->last[3] * v[3])
         / b->diag[4];
}

/*
 * Lower sweep over plane k: v <- D^-1 (v - omega * (L v)) in increasing i and j, where L
 * couples each point to its i-1, j-1 and k-1 neighbours (already swept). The boundary
 * values of v are zero, so boundary neighbours contribute nothing.
 */
static void lower_plane(int k, const lu_range_t *r)
{
    const ptrdiff_t stride[3] = {g.sx, g.sy, g.sz};
    for (int gj = r->jlo; gj < r->jhi; gj++)
        for (int gi = r->ilo; gi < r->ihi; gi++) {
            const ptrdiff_t p = lu_at(&g, gi, gj, k);
            double acc[NVAR];
            diagonal_t b;
            memcpy(acc, rsd + p, sizeof acc);
            for (int d = 0; d < 3; d++)
                add_neighbour_product(u + p - stride[d], d, -1, rsd + p - stride[d], -OMEGA, acc);
            diagonal_block(u + p, &b);
            solve_diagonal(&b, acc);
            memcpy(rsd + p, acc, sizeof acc);
        }
}

/* Upper sweep over plane k: v <- v - D^-1 (omega * U v) in decreasing i and j. */
static void upper_plane(int k, const lu_range_t *r)
{
    const ptrdiff_t stride[3] = {g.sx, g.sy, g.sz};
    for (int gj = r->jhi - 1; gj >= r->jlo; gj--)
        for (int gi = r->ihi - 1; gi >= r->ilo; gi--) {
            const ptrdiff_t p = lu_at(&g, gi, gj, k);
            double acc[NVAR] = {0};
            diagonal_t b;
            for (int d = 0; d < 3; d++)
                add_neighbour_product(u + p + stride[d], d, +1, rsd + p + stride[d], OMEGA, acc);
            diagonal_block(u + p, &b);
            solve_diagonal(&b, acc);
            for (int m = 0; m < NVAR; m++)
                rsd[p + m] -= acc[m];
        }
}

/* ---------------------------------------------------------------- norms and checks */

/* Root-mean-square over the interior points of the whole grid, per component. */
static void rms_norm(const double *v, double out[NVAR])
{
    const int n = cls.n;
    const lu_range_t r = lu_interior(&g, n);
    double local[NVAR] = {0};
    for (int k = 1; k < n - 1; k++)
        for (int gj = r.jlo; gj < r.jhi; gj++)
            for (int gi = r.ilo; gi < r.ihi; gi++) {
                const double *p = v + lu_at(&g, gi, gj, k);
                for (int m = 0; m < NVAR; m++)
                    local[m] += p[m] * p[m];
            }
    MPI_Allreduce(local, out, NVAR, MPI_DOUBLE, MPI_SUM, g.comm);
    const double points = (double)(n - 2) * (n - 2) * (n - 2);
    for (int m = 0; m < NVAR; m++)
        out[m] = sqrt(out[m] / points);
}

static void solution_error(double out[NVAR])
{
    const int n = cls.n;
    const lu_range_t r = lu_interior(&g, n);
    double local[NVAR] = {0};
    for (int k = 1; k < n - 1; k++)
        for (int gj = r.jlo; gj < r.jhi; gj++)
            for (int gi = r.ilo; gi < r.ihi; gi++) {
                double e[NVAR];
                exact_solution(gi, gj, k, e);
                const double *p = u + lu_at(&g, gi, gj, k);
                for (int m = 0; m < NVAR; m++)
                    local[m] += (e[m] - p[m]) * (e[m] - p[m]);
            }
    MPI_Allreduce(local, out, NVAR, MPI_DOUBLE, MPI_SUM, g.comm);
    const double points = (double)(n - 2) * (n - 2) * (n - 2);
    for (int m = 0; m < NVAR; m++)
        out[m] = sqrt(out[m] / points);
}

static double pressure(const double *w)
{
    return C2 * (w[4] - 0.5 * (w[1] * w[1] + w[2] * w[2] + w[3] * w[3]) / w[0]);
}

/*
 * Trapezoidal weight of grid point x in the cells [lo, hi] along one axis: the number of
 * cells [c, c+1] with lo <= c < hi that have x as a corner (0, 1 or 2).
 */
static int cell_weight(int x, int lo, int hi)
{
    if (x < lo || x > hi)
        return 0;
    return (x > lo) + (x < hi);
}

/*
 * The surface integral of the pressure over the faces of the box
 * [1, n-2] x [1, n-3] x [2, n-2] (in grid indices), by the trapezoidal rule on each face
 * pair: each cell adds the sum of its four corner values, scaled at the end by 1/4 and by
 * the cell area. Each rank adds the corners it owns, weighted by how many cells share them.
 */
static double surface_integral(void)
{
    const int n = cls.n;
    const int ilo = 1, ihi = n - 2, jlo = 1, jhi = n - 3, klo = 2, khi = n - 2;
    const double h = 1.0 / (double)(n - 1);
    double part[3] = {0, 0, 0};
    for (int k = 0; k < n; k++)
        for (int gj = g.j0; gj < g.j0 + g.nj; gj++)
            for (int gi = g.i0; gi < g.i0 + g.ni; gi++) {
                const double p = pressure(u + lu_at(&g, gi, gj, k));
                if (k == klo || k == khi)
                    part[0] += cell_weight(gi, ilo, ihi) * cell_weight(gj, jlo, jhi) * p;
                if (gj == jlo || gj == jhi)
                    part[1] += cell_weight(gi, ilo, ihi) * cell_weight(k, klo, khi) * p;
                if (gi == ilo || gi == ihi)
                    part[2] += cell_weight(gj, jlo, jhi) * cell_weight(k, klo, khi) * p;
            }
    double sum[3];
    MPI_Allreduce(part, sum, 3, MPI_DOUBLE, MPI_SUM, g.comm);
    return 0.25 * (sum[0] + sum[1] + sum[2]) * h * h;
}

/* ---------------------------------------------------------------- the iteration */

/* One SSOR step: scale, lower sweep, upper sweep, update u, recompute the residual. */
static void ssor_step(void)
{
    const int n = cls.n;
    const lu_range_t r = lu_interior(&g, n);
    for (int k = 1; k < n - 1; k++)
        for (int gj = r.jlo; gj < r.jhi; gj++)
            for (int gi = r.ilo; gi < r.ihi; gi++) {
                double *p = rsd + lu_at(&g, gi, gj, k);
                for (int m = 0; m < NVAR; m++)
                    p[m] *= cls.dt;
            }
    for (int k = 1; k < n - 1; k++) {
        lu_wavefront_receive(&g, rsd, k, &r, LU_LOWER);
        lower_plane(k, &r);
        lu_wavefront_send(&g, rsd, k, &r, LU_LOWER);
    }
    lu_wavefront_finish(&g);
    for (int k = n - 2; k >= 1; k--) {
        lu_wavefront_receive(&g, rsd, k, &r, LU_UPPER);
        upper_plane(k, &r);
        lu_wavefront_send(&g, rsd, k, &r, LU_UPPER);
    }
    lu_wavefront_finish(&g);
    const double scale = 1.0 / (OMEGA * (2.0 - OMEGA));
    for (int k = 1; k < n - 1; k++)
        for (int gj = r.jlo; gj < r.jhi; gj++)
            for (int gi = r.ilo; gi < r.ihi; gi++) {
                const ptrdiff_t p = lu_at(&g, gi, gj, k);
                for (int m = 0; m < NVAR; m++)
                    u[p + m] += scale * rsd[p + m];
            }
    compute_residual();
}

static void start_from_scratch(void)
{
    memset(u, 0, g.len * sizeof(double));
    memset(rsd, 0, g.len * sizeof(double));
    initial_state();
    compute_forcing();
    memset(rsd, 0, g.len * sizeof(double));
    compute_residual();
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    if (argc != 2 || lu_class_lookup(argv[1][0], &cls) != 0 || argv[1][1] != '\0') {
        if (rank == 0)
            fprintf(stderr, "usage: %s CLASS   (CLASS: S, W, A, B or C)\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    if (lu_grid_setup(&g, MPI_COMM_WORLD, cls.n) != 0) {
        if (rank == 0)
            fprintf(stderr, "lu: %d ranks is too many for a %d^3 grid (each rank needs at least "
                            "3 points in x and in y)\n", size, cls.n);
        MPI_Finalize();
        return 2;
    }
    set_constants();
    u = calloc(g.len, sizeof(double));
    rsd = calloc(g.len, sizeof(double));
    frct = calloc(g.len, sizeof(double));
    if (!u || !rsd || !frct) {
        fprintf(stderr, "lu: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (rank == 0) {
        printf("\n NAS Parallel Benchmarks LU (written from the specification)\n\n");
        printf(" Size: %d x %d x %d   Iterations: %d   dt: %g\n", cls.n, cls.n, cls.n, cls.itmax,
               cls.dt);
        printf(" Ranks: %d (process grid %d x %d)\n\n", size, g.px, g.py);
    }

    /* One untimed step first so that page faults and connection setup are not timed. */
    start_from_scratch();
    ssor_step();
    start_from_scratch();

    g.sent[0] = g.sent[1] = g.sent_bytes[0] = g.sent_bytes[1] = 0.0;
    MPI_Barrier(g.comm);
    const double t0 = MPI_Wtime();
    for (int it = 1; it <= cls.itmax; it++) {
        ssor_step();
        if (rank == 0 && (it == 1 || it % 50 == 0 || it == cls.itmax))
            printf(" step %4d\n", it), fflush(stdout);
    }
    double elapsed = MPI_Wtime() - t0, slowest;
    MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, g.comm);

    double sent[4], local_sent[4] = {g.sent[0], g.sent_bytes[0], g.sent[1], g.sent_bytes[1]};
    MPI_Reduce(local_sent, sent, 4, MPI_DOUBLE, MPI_SUM, 0, g.comm);

    double rsdnm[NVAR], errnm[NVAR];
    rms_norm(rsd, rsdnm);
    solution_error(errnm);
    const double frc = surface_integral();

    int ok = 1;
    if (rank == 0) {
        ok = lu_verify(&cls, rsdnm, errnm, frc);
        const double nn = cls.n;
        const double mops = cls.itmax
                          * (1984.77 * nn * nn * nn - 10923.3 * nn * nn + 27770.9 * nn - 144010.0)
                          / (slowest * 1.0e6);
        printf("\n LU Benchmark Completed.\n");
        printf(" Class           = %c\n", cls.name);
        printf(" Size            = %d x %d x %d\n", cls.n, cls.n, cls.n);
        printf(" Iterations      = %d\n", cls.itmax);
        printf(" Ranks           = %d\n", size);
        printf(" Time in seconds = %.3f\n", slowest);
        printf(" Mop/s total     = %.2f\n", mops);
        printf(" Mop/s/rank      = %.2f\n", mops / size);
        for (int kind = 0; kind < 2; kind++)
            if (sent[2 * kind] > 0)
                printf(" %s = %.0f per iteration, %.0f bytes each on average\n",
                       kind == 0 ? "Sweep messages " : "Halo messages  ", sent[2 * kind] / cls.itmax,
                       sent[2 * kind + 1] / sent[2 * kind]);
        printf(" Verification    = %s\n", ok ? "SUCCESSFUL" : "UNSUCCESSFUL");
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, g.comm);
    lu_grid_free(&g);
    free(u);
    free(rsd);
    free(frct);
    MPI_Finalize();
    return ok ? 0 : 1;
}
