/*
 * ft_latency: costs of run-through fault tolerance, in microseconds.
 * Run by scripts/bench-ft.sh; all ranks must share one machine (CLOCK_MONOTONIC).
 *
 *   mpiexec --ft run-through -n N ./ft_latency detect recv|barrier
 *       The last rank is the victim.  After a barrier every survivor blocks in
 *       MPI_Recv from the victim (recv) or in MPI_Barrier (barrier); 200 ms later the
 *       victim stores CLOCK_MONOTONIC into the file named by $FT_T0_FILE (a shared
 *       mapping, so the store survives its death) and raises SIGKILL.  Each survivor
 *       prints "detect RANK US ERRCLASS": microseconds from the victim's timestamp to
 *       the return of its pending call, and the call's error class name.
 *
 *   mpiexec --ft run-through -n N ./ft_latency ops
 *       MPIX_Comm_agree and MPIX_Comm_shrink (+ MPI_Comm_free) per call, fault-free,
 *       then again on the same communicator after the last rank died and every
 *       survivor acknowledged it (MPIX_Comm_failure_ack).  Prints
 *       "ops agree|shrink none|1-acked US" (median of 5 batches, slowest rank).
 *
 *   mpiexec [--ft run-through] -n N ./ft_latency bcast
 *       8-byte MPI_Bcast from rank 0, fault-free; in run-through mode also with rank
 *       N/2 dead and then with ranks N/2 and 1 dead (the survivors know and have
 *       acknowledged the failures).  Prints "bcast DEAD US" or, when a survivor's
 *       MPI_Bcast returned an error, "bcast DEAD error CLASS US": the class seen first
 *       and how long the slowest survivor's call took to return (no further timing).
 *
 * Synchronisation between survivors goes over a communicator of the survivors
 * (MPIX_Comm_shrink), never over the one with the dead member.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BATCHES 5

static int rank, size;
static MPI_Comm comm;          /* dup of MPI_COMM_WORLD, MPI_ERRORS_RETURN */

static void die(const char *msg)
{
    fprintf(stderr, "ft_latency rank %d: %s\n", rank, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *class_name(int rc)
{
    int cls;
    static char buf[32];
    if (rc == MPI_SUCCESS)
        return "MPI_SUCCESS";
    MPI_Error_class(rc, &cls);
    switch (cls) {
    case MPIX_ERR_PROC_FAILED: return "MPIX_ERR_PROC_FAILED";
    case MPIX_ERR_PROC_FAILED_PENDING: return "MPIX_ERR_PROC_FAILED_PENDING";
    case MPIX_ERR_REVOKED: return "MPIX_ERR_REVOKED";
    default: snprintf(buf, sizeof buf, "class_%d", cls); return buf;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Number of failed members of c this rank knows of. */
static int nfailed(MPI_Comm c)
{
    MPI_Group g;
    int n = 0;
    if (MPIX_Comm_get_failed(c, &g) != MPI_SUCCESS)
        die("MPIX_Comm_get_failed failed");
    MPI_Group_size(g, &n);
    MPI_Group_free(&g);
    return n;
}

/* Kill world rank `victim` (it calls this too) and return, at the survivors, once they
 * know of `want` failures on comm and acknowledged them.  `live` (a communicator of
 * the survivors) is replaced by a shrink of comm. */
static void kill_and_ack(int victim, int want, MPI_Comm *live)
{
    if (rank == victim) {
        fflush(stdout);
        raise(SIGKILL);
    }
    /* A blocking receive from the victim returns once this rank learned of the death.
     * (Polling MPIX_Comm_get_failed alone does not work: it never learns a failure while
     * nothing blocks, see tests/c/ft/get_failed_poll.c.) */
    int x, rc = MPI_Recv(&x, 1, MPI_INT, victim, 99, comm, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS)
        die("receive from a dead rank succeeded");
    if (nfailed(comm) < want)
        die("the failure is not listed by MPIX_Comm_get_failed");
    if (MPIX_Comm_failure_ack(comm) != MPI_SUCCESS)
        die("MPIX_Comm_failure_ack failed");
    if (*live != MPI_COMM_NULL)
        MPI_Comm_free(live);
    if (MPIX_Comm_shrink(comm, live) != MPI_SUCCESS)
        die("MPIX_Comm_shrink failed");
    MPI_Comm_set_errhandler(*live, MPI_ERRORS_RETURN);
}

/* ---- detect -------------------------------------------------------------- */

static void detect(int barrier)
{
    const char *path = getenv("FT_T0_FILE");
    int victim = size - 1;
    double *t0 = NULL;
    if (!path)
        die("FT_T0_FILE is not set");
    if (rank == victim) {
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || ftruncate(fd, sizeof(double)) != 0)
            die("cannot create FT_T0_FILE");
        t0 = mmap(NULL, sizeof(double), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (t0 == MAP_FAILED)
            die("mmap failed");
        *t0 = 0;
    }
    /* Warm up the paths to the victim, then get everyone into the pending call. */
    for (int i = 0; i < 3; i++)
        if (MPI_Barrier(comm) != MPI_SUCCESS)
            die("warm-up barrier failed");
    if (rank == victim) {
        usleep(200 * 1000);
        *t0 = mono();
        raise(SIGKILL);
    }
    int rc, x;
    if (barrier)
        rc = MPI_Barrier(comm);
    else
        rc = MPI_Recv(&x, 1, MPI_INT, victim, 0, comm, MPI_STATUS_IGNORE);
    double t1 = mono();
    /* The victim's store is in the page cache once it is dead; wait for the file. */
    double v = 0;
    for (int i = 0; i < 5000 && v == 0; i++) {
        FILE *f = fopen(path, "rb");
        if (f) {
            if (fread(&v, sizeof v, 1, f) != 1)
                v = 0;
            fclose(f);
        }
        if (v == 0)
            usleep(1000);
    }
    if (v == 0)
        die("no timestamp from the victim");
    printf("detect %d %.1f %s\n", rank, (t1 - v) * 1e6, class_name(rc));
    fflush(stdout);
}

/* ---- ops ----------------------------------------------------------------- */

/* Median over batches of the slowest survivor's time per call of op(), in µs. */
static double time_op(int (*op)(void), int reps, MPI_Comm live)
{
    double t[BATCHES];
    for (int i = 0; i < 2; i++)
        if (op() != MPI_SUCCESS)
            return -1;
    for (int b = 0; b < BATCHES; b++) {
        MPI_Barrier(live);
        double s = mono();
        int bad = 0;
        for (int i = 0; i < reps; i++)
            bad |= op() != MPI_SUCCESS;
        double mine = (mono() - s) / reps * 1e6, worst;
        int anybad;
        MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, live);
        if (anybad)
            return -1;
        MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, live);
        t[b] = worst;
    }
    qsort(t, BATCHES, sizeof t[0], cmp_double);
    return t[BATCHES / 2];
}

static int op_agree(void)
{
    int flag = 1;
    int rc = MPIX_Comm_agree(comm, &flag);
    return rc != MPI_SUCCESS ? rc : (flag == 1 ? MPI_SUCCESS : MPI_ERR_OTHER);
}

static int op_shrink(void)
{
    MPI_Comm c;
    int rc = MPIX_Comm_shrink(comm, &c);
    if (rc == MPI_SUCCESS)
        MPI_Comm_free(&c);
    return rc;
}

static void report(const char *what, const char *cond, double us, MPI_Comm live)
{
    int r;
    MPI_Comm_rank(live, &r);
    if (r == 0) {
        if (us < 0)
            printf("ops %s %s error\n", what, cond);
        else
            printf("ops %s %s %.1f\n", what, cond, us);
        fflush(stdout);
    }
}

static void ops(void)
{
    MPI_Comm live = MPI_COMM_NULL;
    int ra = 40, rs = 10;
    MPI_Comm_dup(comm, &live);
    report("agree", "none", time_op(op_agree, ra, live), live);
    report("shrink", "none", time_op(op_shrink, rs, live), live);
    kill_and_ack(size - 1, 1, &live);
    report("agree", "1-acked", time_op(op_agree, ra, live), live);
    report("shrink", "1-acked", time_op(op_shrink, rs, live), live);
    MPI_Comm_free(&live);
}

/* ---- bcast --------------------------------------------------------------- */

/* µs per 8-byte MPI_Bcast from rank 0 on comm, median batch, slowest survivor; on an
 * error prints it and returns -1.  The first call is a probe whose outcome every
 * survivor learns over `live` before anyone goes on. */
static void time_bcast(const char *label, MPI_Comm live)
{
    double v = 0, t[BATCHES];
    int reps = 200, lr;
    MPI_Comm_rank(live, &lr);
    MPI_Barrier(live);
    double p0 = mono();
    int rc = MPI_Bcast(&v, 1, MPI_DOUBLE, 0, comm), worst_rc;
    double probe = (mono() - p0) * 1e6, worst_probe;
    int err = rc != MPI_SUCCESS;
    MPI_Allreduce(&err, &worst_rc, 1, MPI_INT, MPI_MAX, live);
    MPI_Allreduce(&probe, &worst_probe, 1, MPI_DOUBLE, MPI_MAX, live);
    if (worst_rc) {
        /* Name the error seen at the first survivor that had one, and how long the
         * slowest survivor's call took to return. */
        int who = err ? lr : size, first;
        MPI_Allreduce(&who, &first, 1, MPI_INT, MPI_MIN, live);
        if (lr == first)
            printf("bcast %s error %s %.1f\n", label, class_name(rc), worst_probe);
        fflush(stdout);
        return;
    }
    for (int b = 0; b < BATCHES; b++) {
        MPI_Barrier(live);
        double s = mono();
        int bad = 0;
        for (int i = 0; i < reps; i++) {
            v = rank == 0 ? 1000.0 + i : -1.0;
            rc = MPI_Bcast(&v, 1, MPI_DOUBLE, 0, comm);
            bad |= rc != MPI_SUCCESS || v != 1000.0 + i;
        }
        double mine = (mono() - s) / reps * 1e6, worst;
        MPI_Allreduce(&bad, &worst_rc, 1, MPI_INT, MPI_MAX, live);
        if (worst_rc) {
            if (lr == 0)
                printf("bcast %s error wrong-value-or-failed-call\n", label);
            fflush(stdout);
            return;
        }
        MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, live);
        t[b] = worst;
    }
    qsort(t, BATCHES, sizeof t[0], cmp_double);
    if (lr == 0)
        printf("bcast %s %.2f\n", label, t[BATCHES / 2]);
    fflush(stdout);
}

static void bcast(int run_through)
{
    MPI_Comm live = MPI_COMM_NULL;
    MPI_Comm_dup(comm, &live);
    MPI_Comm_set_errhandler(live, MPI_ERRORS_RETURN);
    time_bcast("0", live);
    if (!run_through || size < 4) {
        MPI_Comm_free(&live);
        return;
    }
    /* Rank size/2 roots the largest subtree of a binomial tree from 0; rank 1 is a leaf. */
    kill_and_ack(size / 2, 1, &live);
    time_bcast("1", live);
    kill_and_ack(1, 2, &live);
    time_bcast("2", live);
    MPI_Comm_free(&live);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (argc < 2)
        die("usage: ft_latency detect recv|barrier | ops | bcast [run-through]");
    if (!strcmp(argv[1], "detect") && argc > 2)
        detect(!strcmp(argv[2], "barrier"));
    else if (!strcmp(argv[1], "ops"))
        ops();
    else if (!strcmp(argv[1], "bcast"))
        bcast(argc > 2 && !strcmp(argv[2], "run-through"));
    else
        die("unknown mode");
    MPI_Finalize();
    return 0;
}
