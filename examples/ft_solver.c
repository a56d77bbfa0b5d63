/*
 * ft_solver: a parallel conjugate-gradient solver that survives the death of ranks.
 *
 * The problem: -u'' = 2 on (0,1), u(0) = u(1) = 0, on N interior grid points
 * x_i = i h, h = 1/(N+1).  The three-point stencil A = tridiag(-1, 2, -1) is exact
 * for quadratics, so the discrete solution is exactly u_i = x_i (1 - x_i): the program
 * can check its answer at the end.
 *
 * Each rank owns a contiguous block of the vector.  Run-through fault tolerance
 * (ULFM: mpi-ext.h) keeps the job alive when a rank dies; the recovery is
 *
 *   1. detect:  any MPI call returns an error (MPI_ERRORS_RETURN on our communicator);
 *   2. revoke:  MPIX_Comm_revoke, so every rank, wherever it is blocked, gets an error
 *               too and joins the recovery;
 *   3. shrink:  MPIX_Comm_shrink builds a communicator of the survivors;
 *   4. restore: the survivors agree on the newest checkpoint every one of them holds and
 *               rebuild the solution vector from it.  Checkpoints are in memory: every
 *               few iterations each rank copies its block to its right neighbour (its
 *               "buddy"), so a dead rank's block is still held by its buddy;
 *   5. re-partition the vector over the survivors, confirm the whole recovery with
 *               MPIX_Comm_agree (a rank may die during the recovery too: then shrink
 *               again and redo it), and continue the iteration.
 *
 * If a rank and its buddy both die, their block is lost: it is restarted from the
 * initial guess (zero).  CG still converges to the right answer, just later.
 *
 * Build and run (see README.md, "Surviving failures"):
 *   install/bin/mpicc -O2 -o ft_solver examples/ft_solver.c -lm
 *   install/bin/mpiexec --ft run-through -n 4 ./ft_solver --kill-rank 2 --kill-iter 50
 *
 * Options:
 *   --n N               unknowns (default 400)
 *   --ckpt K            checkpoint every K iterations (default 10)
 *   --tol T             stop when ||r|| / ||b|| < T (default 1e-12)
 *   --kill-rank R       world rank R kills itself (SIGKILL) ...
 *   --kill-iter I       ... when it reaches iteration I (pairs; repeat for more victims);
 *                       I = -K: during the K-th recovery, right after the shrink (tests
 *                       a failure in the middle of a recovery)
 *   --delay-ms MS       sleep MS milliseconds per iteration (time to `kill -9` by hand)
 *   --pids              every rank prints "rank R pid P" at start
 *
 * Rank 0 of the final communicator prints the result; every survivor exits 0 if the
 * answer is correct, 1 if not.  The launcher itself exits non-zero because a rank failed.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_KILLS 16

/* One in-memory checkpoint: my block and a copy of my left neighbour's block. */
struct ckpt {
    int version;        /* iteration it was taken at; -1: slot empty or incomplete */
    double *own;        /* my block of x */
    double *buddy;      /* left neighbour's block of x */
};

/* Everything a rank holds: the layout of the vector over the communicator, the CG
 * vectors of its block, and two checkpoint slots (the newest may be incomplete when a
 * failure strikes during the copy, so the previous one is kept). */
struct solver {
    MPI_Comm comm;
    int rank, size;
    long n;                     /* global unknowns */
    long lo, hi;                /* my block: global indices [lo, hi) */
    double *x, *r, *p, *ap;     /* p has one ghost cell on each side: p[0], p[hi-lo+1] */
    struct ckpt ck[2];
    int latest;                 /* slot of the newest complete checkpoint */
    int iter;                   /* global iteration count (rolls back on recovery) */
};

static long opt_n = 400;
static int opt_ckpt = 10;
static double opt_tol = 1e-12;
static int kill_rank[MAX_KILLS], kill_iter[MAX_KILLS], nkills;
static int opt_delay_ms;
static int opt_pids;
static int world_rank;
static int recoveries;          /* recoveries started so far */

/* First global index of block k when n unknowns are split over size ranks. */
static long block_lo(long n, int size, int k) { return (long)((long long)k * n / size); }
static double xcoord(long i, long n) { return (double)(i + 1) / (double)(n + 1); }
static double exact(long i, long n) { double x = xcoord(i, n); return x * (1.0 - x); }
static double rhs(long n) { double h = 1.0 / (double)(n + 1); return 2.0 * h * h; }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    fprintf(stderr, "ft_solver (world rank %d): %s\n", world_rank, what);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz);
    if (!p)
        die("out of memory");
    return p;
}

/* (Re)allocate the vectors for the block [lo, hi) of communicator comm. */
static void set_layout(struct solver *s, MPI_Comm comm)
{
    s->comm = comm;
    MPI_Comm_rank(comm, &s->rank);
    MPI_Comm_size(comm, &s->size);
    s->lo = block_lo(s->n, s->size, s->rank);
    s->hi = block_lo(s->n, s->size, s->rank + 1);
    long m = s->hi - s->lo, left = (s->rank + s->size - 1) % s->size;
    long mb = block_lo(s->n, s->size, left + 1) - block_lo(s->n, s->size, left);
    free(s->x); free(s->r); free(s->p); free(s->ap);
    s->x = xcalloc(m, sizeof(double));
    s->r = xcalloc(m, sizeof(double));
    s->p = xcalloc(m + 2, sizeof(double));
    s->ap = xcalloc(m, sizeof(double));
    for (int k = 0; k < 2; k++) {
        free(s->ck[k].own); free(s->ck[k].buddy);
        s->ck[k].own = xcalloc(m, sizeof(double));
        s->ck[k].buddy = xcalloc(mb, sizeof(double));
        s->ck[k].version = -1;
    }
}

/* y = A v on my block; v has ghost cells v[0] and v[m+1] filled by halo(). */
static void apply_a(const struct solver *s, const double *v, double *y)
{
    long m = s->hi - s->lo;
    for (long i = 0; i < m; i++)
        y[i] = 2.0 * v[i + 1] - v[i] - v[i + 2];
}

/* Fill the ghost cells of v (length m + 2) from the neighbouring blocks. */
static int halo(struct solver *s, double *v)
{
    long m = s->hi - s->lo;
    int left = s->rank > 0 ? s->rank - 1 : MPI_PROC_NULL;
    int right = s->rank < s->size - 1 ? s->rank + 1 : MPI_PROC_NULL;
    v[0] = v[m + 1] = 0.0;      /* boundary condition at the ends of the domain */
    int rc = MPI_Sendrecv(&v[1], 1, MPI_DOUBLE, left, 1, &v[m + 1], 1, MPI_DOUBLE, right, 1,
                          s->comm, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        return rc;
    return MPI_Sendrecv(&v[m], 1, MPI_DOUBLE, right, 2, &v[0], 1, MPI_DOUBLE, left, 2,
                        s->comm, MPI_STATUS_IGNORE);
}

static int dot(struct solver *s, const double *a, const double *b, double *out)
{
    double local = 0.0;
    for (long i = 0; i < s->hi - s->lo; i++)
        local += a[i] * b[i];
    return MPI_Allreduce(&local, out, 1, MPI_DOUBLE, MPI_SUM, s->comm);
}

/* Take a checkpoint of x: keep my block, send it to my right neighbour, receive my left
 * neighbour's.  The slot counts only once both copies are in place. */
static int checkpoint(struct solver *s)
{
    int slot = 1 - s->latest;
    struct ckpt *c = &s->ck[slot];
    long m = s->hi - s->lo;
    int left = (s->rank + s->size - 1) % s->size, right = (s->rank + 1) % s->size;
    long mb = block_lo(s->n, s->size, left + 1) - block_lo(s->n, s->size, left);
    c->version = -1;
    memcpy(c->own, s->x, m * sizeof(double));
    int rc = MPI_Sendrecv(c->own, (int)m, MPI_DOUBLE, right, 3, c->buddy, (int)mb, MPI_DOUBLE,
                          left, 3, s->comm, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        return rc;
    c->version = s->iter;
    s->latest = slot;
    return MPI_SUCCESS;
}

/* The crash this rank was asked for at this point, if any (iter < 0: in recovery -iter). */
static void maybe_die(int iter)
{
    for (int k = 0; k < nkills; k++)
        if (kill_rank[k] == world_rank && kill_iter[k] == iter) {
            fflush(stdout);
            raise(SIGKILL);     /* a crash: no goodbye, no cleanup */
        }
}

/* Run CG from the current x until converged (returns MPI_SUCCESS) or an MPI call fails
 * (returns its error code: the caller recovers and calls again).  After a recovery CG
 * restarts from the restored x: r = b - A x, p = r. */
static int solve(struct solver *s, double bnorm)
{
    long m = s->hi - s->lo;
    double rr, pap, rr_new;
    int rc;

    memcpy(&s->p[1], s->x, m * sizeof(double));
    if ((rc = halo(s, s->p)) != MPI_SUCCESS)
        return rc;
    apply_a(s, s->p, s->ap);
    for (long i = 0; i < m; i++) {
        s->r[i] = rhs(s->n) - s->ap[i];
        s->p[i + 1] = s->r[i];
    }
    if ((rc = dot(s, s->r, s->r, &rr)) != MPI_SUCCESS)
        return rc;

    for (;;) {
        maybe_die(s->iter);
        if (opt_delay_ms > 0)
            usleep(opt_delay_ms * 1000);
        if (s->iter % opt_ckpt == 0 && s->ck[s->latest].version != s->iter)
            if ((rc = checkpoint(s)) != MPI_SUCCESS)
                return rc;
        if (sqrt(rr) / bnorm < opt_tol)
            return MPI_SUCCESS;
        if (s->iter > 100 * s->n)
            die("CG does not converge");

        if ((rc = halo(s, s->p)) != MPI_SUCCESS)
            return rc;
        apply_a(s, s->p, s->ap);
        if ((rc = dot(s, &s->p[1], s->ap, &pap)) != MPI_SUCCESS)
            return rc;
        double alpha = rr / pap;
        for (long i = 0; i < m; i++) {
            s->x[i] += alpha * s->p[i + 1];
            s->r[i] -= alpha * s->ap[i];
        }
        if ((rc = dot(s, s->r, s->r, &rr_new)) != MPI_SUCCESS)
            return rc;
        double beta = rr_new / rr;
        for (long i = 0; i < m; i++)
            s->p[i + 1] = s->r[i] + beta * s->p[i + 1];
        rr = rr_new;
        s->iter++;
    }
}

/* What recover() reports to the caller. */
struct recovery {
    int version;        /* checkpoint iteration the survivors restarted from */
    int from_buddy;     /* blocks restored from the buddy's copy */
    int lost;           /* blocks lost (rank and buddy dead): restarted from zero */
    int dead[64], ndead; /* world ranks of the old communicator's members that were gone */
};

/* Steps 2-5 of the recovery.  Returns the survivors' communicator with s re-partitioned
 * over it.  The old layout (s->comm, s->ck) stays untouched until the survivors all
 * confirmed the new one, so a failure during the recovery just starts it again. */
static void recover(struct solver *s, struct recovery *out)
{
    MPI_Comm old = s->comm, cur = old, next;
    int n_old = s->size;
    MPI_Group g_old;
    MPI_Comm_group(old, &g_old);
    int *alive = xcalloc(n_old, sizeof(int));
    double *g = xcalloc(s->n, sizeof(double));

    MPIX_Comm_revoke(old);                      /* everyone must join the recovery */
    for (int attempt = 0;; attempt++) {
        if (attempt > n_old)
            die("recovery keeps failing");
        /* 3. Shrink: the survivors' communicator. */
        if (MPIX_Comm_shrink(cur, &next) != MPI_SUCCESS)
            die("MPIX_Comm_shrink failed");
        if (cur != old)
            MPI_Comm_free(&cur);
        cur = next;
        MPI_Comm_set_errhandler(cur, MPI_ERRORS_RETURN);
        maybe_die(-recoveries);

        /* Which ranks of the old communicator survive (and so hold their checkpoints)? */
        int n_new, *mine, *theirs;
        MPI_Group g_new;
        MPI_Comm_size(cur, &n_new);
        MPI_Comm_group(cur, &g_new);
        mine = xcalloc(n_new, sizeof(int));
        theirs = xcalloc(n_new, sizeof(int));
        for (int j = 0; j < n_new; j++)
            mine[j] = j;
        MPI_Group_translate_ranks(g_new, n_new, mine, g_old, theirs);
        memset(alive, 0, n_old * sizeof(int));
        for (int j = 0; j < n_new; j++)
            alive[theirs[j]] = 1;
        MPI_Group_free(&g_new);
        free(mine); free(theirs);

        /* 4. The newest checkpoint every survivor has complete.  Versions differ by at
         * most one checkpoint (CG's reductions keep ranks in step), and each rank keeps
         * the previous one too. */
        int have = s->ck[s->latest].version, v;
        int ok = MPI_Allreduce(&have, &v, 1, MPI_INT, MPI_MIN, cur) == MPI_SUCCESS;
        int slot = -1;
        if (ok) {
            for (int k = 0; k < 2; k++)
                if (s->ck[k].version == v)
                    slot = k;
            if (slot < 0)
                die("no checkpoint slot holds the agreed version");
        }

        /* Rebuild the whole vector x from the checkpoints: every old block comes from its
         * owner if it lives, else from its buddy (the right neighbour); a real code
         * would move only the pieces each rank needs (MPI_Alltoallv), this keeps the
         * example short.  Each entry has exactly one contributor, so the sum is exact. */
        int from_buddy = 0, lost = 0;
        if (ok) {
            memset(g, 0, s->n * sizeof(double));
            int me_old = s->rank;
            for (int k = 0; k < n_old; k++) {
                long lo = block_lo(s->n, n_old, k), hi = block_lo(s->n, n_old, k + 1);
                int buddy = (k + 1) % n_old;
                if (alive[k]) {
                    if (k == me_old)
                        memcpy(&g[lo], s->ck[slot].own, (hi - lo) * sizeof(double));
                } else if (alive[buddy] && buddy != k) {
                    from_buddy++;
                    if (buddy == me_old)
                        memcpy(&g[lo], s->ck[slot].buddy, (hi - lo) * sizeof(double));
                } else {
                    lost++;     /* stays at the initial guess, 0 */
                }
            }
            ok = MPI_Allreduce(MPI_IN_PLACE, g, (int)s->n, MPI_DOUBLE, MPI_SUM, cur) == MPI_SUCCESS;
        }

        /* 5. Everybody got here with everything?  MPIX_Comm_agree is a fault-tolerant
         * AND: its result is the same at every survivor, so all commit or all retry. */
        int flag = ok;
        int rc = MPIX_Comm_agree(cur, &flag);
        if (rc == MPI_SUCCESS && flag) {
            out->version = v;
            out->from_buddy = from_buddy;
            out->lost = lost;
            out->ndead = 0;
            MPI_Group g_world;
            MPI_Comm_group(MPI_COMM_WORLD, &g_world);
            for (int k = 0; k < n_old; k++)
                if (!alive[k] && out->ndead < 64)
                    MPI_Group_translate_ranks(g_old, 1, &k, g_world, &out->dead[out->ndead++]);
            MPI_Group_free(&g_world);
            break;
        }
        /* Someone failed during the recovery: acknowledge and shrink again. */
        MPIX_Comm_failure_ack(cur);
        MPIX_Comm_revoke(cur);
    }

    /* Commit: the new layout, x from the rebuilt vector, and a first checkpoint of it
     * (both slots) built locally, since every rank has the whole vector right now. */
    set_layout(s, cur);
    memcpy(s->x, &g[s->lo], (s->hi - s->lo) * sizeof(double));
    int left = (s->rank + s->size - 1) % s->size;
    long blo = block_lo(s->n, s->size, left), bhi = block_lo(s->n, s->size, left + 1);
    for (int k = 0; k < 2; k++) {
        memcpy(s->ck[k].own, s->x, (s->hi - s->lo) * sizeof(double));
        memcpy(s->ck[k].buddy, &g[blo], (bhi - blo) * sizeof(double));
    }
    s->ck[0].version = out->version;
    s->latest = 0;
    s->iter = out->version;
    MPI_Comm_free(&old);
    MPI_Group_free(&g_old);
    free(alive);
    free(g);
}

static void usage(void)
{
    if (world_rank == 0)
        fprintf(stderr, "usage: ft_solver [--n N] [--ckpt K] [--tol T] [--kill-rank R --kill-iter I]... "
                        "[--delay-ms MS] [--pids]\n");
    MPI_Finalize();
    exit(2);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    setvbuf(stdout, NULL, _IOLBF, 0);

    int nkr = 0, nki = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--pids")) { opt_pids = 1; continue; }
        if (!v) usage();
        if (!strcmp(a, "--n")) opt_n = atol(v);
        else if (!strcmp(a, "--ckpt")) opt_ckpt = atoi(v);
        else if (!strcmp(a, "--tol")) opt_tol = atof(v);
        else if (!strcmp(a, "--delay-ms")) opt_delay_ms = atoi(v);
        else if (!strcmp(a, "--kill-rank") && nkr < MAX_KILLS) kill_rank[nkr++] = atoi(v);
        else if (!strcmp(a, "--kill-iter") && nki < MAX_KILLS) kill_iter[nki++] = atoi(v);
        else usage();
        i++;
    }
    nkills = nkr < nki ? nkr : nki;

    int world_size;
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (opt_n < world_size || opt_ckpt < 1 || opt_n > 100000000)
        usage();
    if (opt_pids) {
        printf("rank %d pid %ld\n", world_rank, (long)getpid());
        fflush(stdout);
    }

    /* Work on a duplicate with MPI_ERRORS_RETURN: errors come back as return codes
     * instead of aborting the job (the default MPI_ERRORS_ARE_FATAL). */
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);

    struct solver s;
    memset(&s, 0, sizeof s);
    s.n = opt_n;
    set_layout(&s, comm);
    /* The initial guess x = 0 is checkpoint 0: every rank knows it without copying. */
    s.ck[0].version = 0;
    s.latest = 0;
    double bnorm = rhs(s.n) * sqrt((double)s.n);

    if (world_rank == 0)
        printf("ft_solver: %ld unknowns on %d ranks, checkpoint every %d iterations\n", s.n,
               world_size, opt_ckpt);
    double t0 = now();
    int redone = 0;
    for (;;) {
        int rc = solve(&s, bnorm);
        if (rc == MPI_SUCCESS)
            break;
        int cls;
        MPI_Error_class(rc, &cls);
        if (cls != MPIX_ERR_PROC_FAILED && cls != MPIX_ERR_REVOKED && cls != MPIX_ERR_PROC_FAILED_PENDING) {
            char msg[MPI_MAX_ERROR_STRING];
            int len;
            MPI_Error_string(rc, msg, &len);
            die(msg);
        }
        /* 1. A peer failed (or someone else revoked): recover and continue. */
        int at = s.iter, before = s.size;
        double tr = now();
        struct recovery rec;
        recoveries++;
        recover(&s, &rec);
        redone += at - rec.version;
        if (s.rank == 0) {
            char dead[256] = "";
            for (int k = 0; k < rec.ndead; k++)
                snprintf(dead + strlen(dead), sizeof dead - strlen(dead), "%s%d", k ? "," : "", rec.dead[k]);
            printf("iteration %d: world rank(s) %s failed (%d ranks before); %d survivors rolled back "
                   "to the checkpoint of iteration %d (%d block(s) from buddies, %d lost) in %.1f ms\n",
                   at, dead, before, s.size, rec.version, rec.from_buddy, rec.lost,
                   (now() - tr) * 1e3);
        }
    }
    double secs = now() - t0;

    /* Check the answer: the true residual ||b - A x|| / ||b|| and the error against the
     * exact solution, over the whole vector. */
    long m = s.hi - s.lo;
    double res2 = 0.0, err = 0.0, gerr, gres2;
    memcpy(&s.p[1], s.x, m * sizeof(double));
    int rc = halo(&s, s.p);
    apply_a(&s, s.p, s.ap);
    for (long i = 0; i < m; i++) {
        double d = rhs(s.n) - s.ap[i];
        res2 += d * d;
        double e = fabs(s.x[i] - exact(s.lo + i, s.n));
        if (e > err)
            err = e;
    }
    if (rc == MPI_SUCCESS)
        rc = MPI_Allreduce(&res2, &gres2, 1, MPI_DOUBLE, MPI_SUM, s.comm);
    if (rc == MPI_SUCCESS)
        rc = MPI_Allreduce(&err, &gerr, 1, MPI_DOUBLE, MPI_MAX, s.comm);
    if (rc != MPI_SUCCESS)
        die("a rank failed during the final check (not covered by this example)");
    double res = sqrt(gres2) / bnorm;
    int correct = res < 1e-9 && gerr < 1e-9;
    if (s.rank == 0)
        printf("converged after %d iterations (%d redone after %d failure(s)) in %.2f s: "
               "residual %.1e, max error %.1e, answer %s (%d ranks started, %d finished)\n",
               s.iter, redone, recoveries, secs, res, gerr, correct ? "correct" : "WRONG",
               world_size, s.size);
    MPI_Comm_free(&s.comm);
    MPI_Finalize();
    return correct ? 0 : 1;
}
