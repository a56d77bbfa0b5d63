/*
 * LU's problem classes, published reference values, grid decomposition and the messages
 * between neighbouring ranks (halo exchange for the right-hand side, one row or column per
 * k-plane for the pipelined sweeps). Only lu.c includes it.
 */
#ifndef LU_COMMON_H
#define LU_COMMON_H

#include <mpi.h>

#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define NVAR 5 /* density, three momenta, energy */

static inline int lu_min(int a, int b) { return a < b ? a : b; }
static inline int lu_max(int a, int b) { return a > b ? a : b; }

/* ---------------------------------------------------------------- classes */

typedef struct {
    char name;
    int n;     /* grid points per dimension */
    int itmax; /* SSOR iterations */
    double dt; /* pseudo-time step */
    /* Published reference values after itmax iterations: RMS norms of the residual and of
     * the solution error, and the surface integral. */
    double xcr[NVAR], xce[NVAR], xci;
} lu_class_t;

static const lu_class_t LU_CLASSES[] = {
    {'S', 12, 50, 0.5,
     {1.6196343210976702e-02, 2.1976745164821318e-03, 1.5179927653399185e-03,
      1.5029584435994323e-03, 3.4264073155896461e-02},
     {6.4223319957960924e-04, 8.4144342047347926e-05, 5.8588269616485186e-05,
      5.8474222595157350e-05, 1.3103347914111294e-03},
     7.8418928865937083e+00},
    {'W', 33, 300, 1.5e-3,
     {0.1236511638192e+02, 0.1317228477799e+01, 0.2550120713095e+01, 0.2326187750252e+01,
      0.2826799444189e+02},
     {0.4867877144216e+00, 0.5064652880982e-01, 0.9281818101960e-01, 0.8570126542733e-01,
      0.1084277417792e+01},
     0.1161399311023e+02},
    {'A', 64, 250, 2.0,
     {7.7902107606689367e+02, 6.3402765259692870e+01, 1.9499249727292479e+02,
      1.7845301160418537e+02, 1.8384760349464247e+03},
     {2.9964085685471943e+01, 2.8194576365003349e+00, 7.3473412698774742e+00,
      6.7139225687777051e+00, 7.0715315688392578e+01},
     2.6030925604886277e+01},
    {'B', 102, 250, 2.0,
     {3.5532672969982736e+03, 2.6214750795310692e+02, 8.8333721850952190e+02,
      7.7812774739425265e+02, 7.3087969592545314e+03},
     {1.1401176380212709e+02, 8.1098963655421574e+00, 2.8480597317698308e+01,
      2.5905394567832939e+01, 2.6054907504857413e+02},
     4.7887162703308227e+01},
    {'C', 162, 250, 2.0,
     {1.03766980323537846e+04, 8.92212458801008552e+02, 2.56238814582660871e+03,
      2.19194343857831427e+03, 1.78078057261061185e+04},
     {2.15986399716949279e+02, 1.55789559239863600e+01, 5.41318863077207766e+01,
      4.82262643154045421e+01, 4.55902910043250358e+02},
     6.66404553572181300e+01},
};

/* The specification's tolerance: every value within this relative difference. */
static const double LU_EPSILON = 1.0e-8;

static inline int lu_class_lookup(char name, lu_class_t *out)
{
    for (size_t c = 0; c < sizeof LU_CLASSES / sizeof LU_CLASSES[0]; c++)
        if (LU_CLASSES[c].name == toupper((unsigned char)name)) {
            *out = LU_CLASSES[c];
            return 0;
        }
    return -1;
}

/* Prints each value against its reference; 1 when all agree within LU_EPSILON. */
static inline int lu_verify_one(const char *what, int m, double got, double want)
{
    const double diff = fabs((got - want) / want);
    const int ok = diff <= LU_EPSILON; /* false for NaN too */
    printf("   %-9s %d  %22.15e %22.15e  %9.2e %s\n", what, m, got, want, diff, ok ? "" : "FAIL");
    return ok;
}

static inline int lu_verify(const lu_class_t *c, const double xcr[NVAR], const double xce[NVAR],
                            double xci)
{
    int ok = 1;
    printf("\n Verification for class %c, epsilon = %.1e\n", c->name, LU_EPSILON);
    printf("   %-9s %s  %22s %22s  %9s\n", "value", "m", "computed", "reference", "rel.diff");
    for (int m = 0; m < NVAR; m++)
        ok &= lu_verify_one("residual", m + 1, xcr[m], c->xcr[m]);
    for (int m = 0; m < NVAR; m++)
        ok &= lu_verify_one("error", m + 1, xce[m], c->xce[m]);
    ok &= lu_verify_one("surface", 0, xci, c->xci);
    return ok;
}

/* ---------------------------------------------------------------- decomposition */

/* Ranks are laid out px x py over the x-y plane; "west" is lower i, "north" is lower j. */
typedef struct {
    MPI_Comm comm;
    int px, py, cx, cy;
    int west, east, north, south; /* MPI_PROC_NULL at the edge of the grid */
    int i0, ni, j0, nj;           /* owned global points [i0, i0+ni) x [j0, j0+nj), all k */
    int lx, ly;                   /* local extents with two halo layers each side */
    ptrdiff_t sx, sy, sz;         /* strides in doubles */
    size_t len;                   /* doubles in one field */
    double *send[4], *recv[4];    /* halo buffers, one per side */
    size_t halo_len;
    double *sweep_send[2], *sweep_recv[2]; /* one column and one row for the sweeps */
    MPI_Request sweep_pending[2];
    /* Messages this rank sent: [0] sweeps, [1] halo exchange; counts and bytes. */
    double sent[2], sent_bytes[2];
} lu_grid_t;

/* Sub-box of owned points that are interior points of the whole grid, all in [lo, hi). */
typedef struct {
    int ilo, ihi, jlo, jhi;
} lu_range_t;

enum { LU_LOWER, LU_UPPER };

static inline ptrdiff_t lu_at(const lu_grid_t *g, int gi, int gj, int k)
{
    return (((ptrdiff_t)k * g->ly + (gj - g->j0 + 2)) * g->lx + (gi - g->i0 + 2)) * NVAR;
}

static inline lu_range_t lu_interior(const lu_grid_t *g, int n)
{
    lu_range_t r = {lu_max(g->i0, 1), lu_min(g->i0 + g->ni, n - 1), lu_max(g->j0, 1),
                    lu_min(g->j0 + g->nj, n - 1)};
    return r;
}

static inline void lu_split(int n, int parts, int index, int *start, int *count)
{
    *count = n / parts + (index < n % parts);
    *start = index * (n / parts) + lu_min(index, n % parts);
}

/* Chooses the squarest process grid (px >= py); -1 when a rank would get < 3 points a side. */
static inline int lu_grid_setup(lu_grid_t *g, MPI_Comm comm, int n)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int py = 1;
    for (int d = 1; d * d <= size; d++)
        if (size % d == 0)
            py = d;
    g->comm = comm;
    g->py = py;
    g->px = size / py;
    g->cx = rank % g->px;
    g->cy = rank / g->px;
    if (n / g->px < 3 || n / g->py < 3)
        return -1;
    g->west = g->cx > 0 ? rank - 1 : MPI_PROC_NULL;
    g->east = g->cx < g->px - 1 ? rank + 1 : MPI_PROC_NULL;
    g->north = g->cy > 0 ? rank - g->px : MPI_PROC_NULL;
    g->south = g->cy < g->py - 1 ? rank + g->px : MPI_PROC_NULL;
    lu_split(n, g->px, g->cx, &g->i0, &g->ni);
    lu_split(n, g->py, g->cy, &g->j0, &g->nj);
    g->lx = g->ni + 4;
    g->ly = g->nj + 4;
    g->sx = NVAR;
    g->sy = (ptrdiff_t)NVAR * g->lx;
    g->sz = (ptrdiff_t)NVAR * g->lx * g->ly;
    g->len = (size_t)g->sz * n;
    g->sent[0] = g->sent[1] = g->sent_bytes[0] = g->sent_bytes[1] = 0.0;
    g->halo_len = (size_t)2 * lu_max(g->ni, g->nj) * n * NVAR;
    for (int s = 0; s < 4; s++) {
        g->send[s] = malloc(g->halo_len * sizeof(double));
        g->recv[s] = malloc(g->halo_len * sizeof(double));
    }
    for (int s = 0; s < 2; s++) {
        g->sweep_send[s] = malloc((size_t)lu_max(g->ni, g->nj) * NVAR * sizeof(double));
        g->sweep_recv[s] = malloc((size_t)lu_max(g->ni, g->nj) * NVAR * sizeof(double));
        g->sweep_pending[s] = MPI_REQUEST_NULL;
    }
    return 0;
}

static inline void lu_grid_free(lu_grid_t *g)
{
    for (int s = 0; s < 4; s++) {
        free(g->send[s]);
        free(g->recv[s]);
    }
    for (int s = 0; s < 2; s++) {
        free(g->sweep_send[s]);
        free(g->sweep_recv[s]);
    }
}

/* ---------------------------------------------------------------- halo exchange */

enum { LU_SIDE_WEST, LU_SIDE_EAST, LU_SIDE_NORTH, LU_SIDE_SOUTH };

/* Copies the two layers [first, first+2) on one side between field and buffer. */
static inline size_t lu_halo_copy(const lu_grid_t *g, double *f, double *buf, int side, int first,
                                  int n, int to_buffer)
{
    size_t x = 0;
    const int along_i = side == LU_SIDE_NORTH || side == LU_SIDE_SOUTH;
    for (int k = 0; k < n; k++)
        for (int layer = first; layer < first + 2; layer++) {
            const int count = along_i ? g->ni : g->nj;
            for (int t = 0; t < count; t++) {
                const int gi = along_i ? g->i0 + t : layer;
                const int gj = along_i ? layer : g->j0 + t;
                double *p = f + lu_at(g, gi, gj, k);
                for (int m = 0; m < NVAR; m++, x++) {
                    if (to_buffer)
                        buf[x] = p[m];
                    else
                        p[m] = buf[x];
                }
            }
        }
    return x;
}

/* Fills the two halo layers of f on each side that has a neighbour. */
static inline void lu_exchange_halo(lu_grid_t *g, double *f, int n)
{
    const int peer[4] = {g->west, g->east, g->north, g->south};
    /* The owned layers a neighbour needs, and where its layers land here. */
    const int mine[4] = {g->i0, g->i0 + g->ni - 2, g->j0, g->j0 + g->nj - 2};
    const int theirs[4] = {g->i0 - 2, g->i0 + g->ni, g->j0 - 2, g->j0 + g->nj};
    MPI_Request req[8];
    int nreq = 0;
    for (int s = 0; s < 4; s++) {
        if (peer[s] == MPI_PROC_NULL)
            continue;
        /* A message sent towards side s arrives from the opposite side: tag by direction. */
        MPI_Irecv(g->recv[s], (int)g->halo_len, MPI_DOUBLE, peer[s], 200 + (s ^ 1), g->comm,
                  &req[nreq++]);
    }
    for (int s = 0; s < 4; s++) {
        if (peer[s] == MPI_PROC_NULL)
            continue;
        size_t count = lu_halo_copy(g, f, g->send[s], s, mine[s], n, 1);
        MPI_Isend(g->send[s], (int)count, MPI_DOUBLE, peer[s], 200 + s, g->comm, &req[nreq++]);
        g->sent[1] += 1;
        g->sent_bytes[1] += (double)count * sizeof(double);
    }
    MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
    for (int s = 0; s < 4; s++)
        if (peer[s] != MPI_PROC_NULL)
            lu_halo_copy(g, f, g->recv[s], s, theirs[s], n, 0);
}

/* ---------------------------------------------------------------- sweep messages */

/* Copies column gi (rows [r->jlo, r->jhi)) or row gj (columns [r->ilo, r->ihi)) of plane k. */
static inline int lu_line_copy(const lu_grid_t *g, double *f, double *buf, int k, int column,
                               int at, const lu_range_t *r, int to_buffer)
{
    int x = 0;
    const int lo = column ? r->jlo : r->ilo, hi = column ? r->jhi : r->ihi;
    for (int t = lo; t < hi; t++) {
        double *p = f + (column ? lu_at(g, at, t, k) : lu_at(g, t, at, k));
        for (int m = 0; m < NVAR; m++, x++) {
            if (to_buffer)
                buf[x] = p[m];
            else
                p[m] = buf[x];
        }
    }
    return x;
}

/*
 * Before sweeping plane k: the lower sweep needs the swept values just west and just north
 * of the owned block, the upper sweep those just east and just south.
 */
static inline void lu_wavefront_receive(lu_grid_t *g, double *f, int k, const lu_range_t *r,
                                        int sweep)
{
    const int from_x = sweep == LU_LOWER ? g->west : g->east;
    const int from_y = sweep == LU_LOWER ? g->north : g->south;
    const int col = sweep == LU_LOWER ? g->i0 - 1 : g->i0 + g->ni;
    const int row = sweep == LU_LOWER ? g->j0 - 1 : g->j0 + g->nj;
    const int tag = 100 + 2 * sweep;
    if (from_x != MPI_PROC_NULL) {
        MPI_Recv(g->sweep_recv[0], (r->jhi - r->jlo) * NVAR, MPI_DOUBLE, from_x, tag, g->comm,
                 MPI_STATUS_IGNORE);
        lu_line_copy(g, f, g->sweep_recv[0], k, 1, col, r, 0);
    }
    if (from_y != MPI_PROC_NULL) {
        MPI_Recv(g->sweep_recv[1], (r->ihi - r->ilo) * NVAR, MPI_DOUBLE, from_y, tag + 1, g->comm,
                 MPI_STATUS_IGNORE);
        lu_line_copy(g, f, g->sweep_recv[1], k, 0, row, r, 0);
    }
}

/* After sweeping plane k: pass the last swept column and row downstream. */
static inline void lu_wavefront_send(lu_grid_t *g, double *f, int k, const lu_range_t *r,
                                     int sweep)
{
    const int to_x = sweep == LU_LOWER ? g->east : g->west;
    const int to_y = sweep == LU_LOWER ? g->south : g->north;
    const int col = sweep == LU_LOWER ? r->ihi - 1 : r->ilo;
    const int row = sweep == LU_LOWER ? r->jhi - 1 : r->jlo;
    const int tag = 100 + 2 * sweep;
    const int dest[2] = {to_x, to_y};
    for (int s = 0; s < 2; s++) {
        if (dest[s] == MPI_PROC_NULL)
            continue;
        /* The previous plane's message may still be in flight from this buffer. */
        MPI_Wait(&g->sweep_pending[s], MPI_STATUS_IGNORE);
        int count = lu_line_copy(g, f, g->sweep_send[s], k, s == 0, s == 0 ? col : row, r, 1);
        MPI_Isend(g->sweep_send[s], count, MPI_DOUBLE, dest[s], tag + s, g->comm,
                  &g->sweep_pending[s]);
        g->sent[0] += 1;
        g->sent_bytes[0] += (double)count * sizeof(double);
    }
}

/* Completes the sweeps' last sends (before their buffers or the field are touched again). */
static inline void lu_wavefront_finish(lu_grid_t *g)
{
    MPI_Waitall(2, g->sweep_pending, MPI_STATUSES_IGNORE);
}

#endif
