/* view_kill: ranks are killed with SIGKILL; every survivor must install the same
 * membership view, whose members are exactly the survivors, within a bound.
 * ranks: 16
 * launcher: --on-failure continue
 * driver: cargo test -p steadfast-capi --test ft_kill (needs arguments; not run by run-tests.sh)
 *
 * usage: view_kill VICTIMS OUTDIR [TIMEOUT_S [SETTLE_S [FLOOD]]]
 *   VICTIMS   comma-separated world ranks that kill themselves (e.g. "1", "1,2", "0", "0,1")
 *   OUTDIR    each survivor writes OUTDIR/view.<rank>:
 *               "epoch E members M r0 r1 ... seconds S"
 *             every survivor writes OUTDIR/done.<rank> (MPI_Finalize's result) at the end,
 *             each victim writes OUTDIR/killed.<rank> (its MPI_Wtime just before dying),
 *             and the lowest survivor, after comparing every survivor's view with its
 *             own over MPI point-to-point, writes OUTDIR/verdict ("ok ..." or "FAIL ...")
 *   TIMEOUT_S how long a survivor waits for the view without the victims (default 10)
 *   SETTLE_S  how long every rank sleeps before the kill, so the job is in a steady state
 *             (default 0; the measurement scripts use it)
 *   FLOOD     1: before MPI_Finalize every survivor queues 4 MiB of sends to the lowest
 *             victim (more than a shared-memory ring holds) and frees the requests:
 *             MPI_Finalize must not wait for output to a failed rank (shm path only)
 *
 * Before the kill every rank takes part in a ring exchange (so the data path has live
 * connections to the victims) and a barrier; after the view change the survivors run a
 * ring over the live ranks only, then finalize. Exit status: 0 when this rank's checks
 * passed. Run by crates/capi/tests/ft_kill.rs and scripts/membership-kill-test.sh.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXR 1024

static int rank, size;

static void die(const char *msg)
{
    fprintf(stderr, "[view_kill rank %d] FATAL: %s\n", rank, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static int parse_victims(const char *s, int *is_victim)
{
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= size)
            die("bad victim list");
        if (!is_victim[v])
            n++;
        is_victim[v] = 1;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            die("bad victim list");
    }
    return n;
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3 || size > MAXR)
        die("usage: view_kill VICTIMS OUTDIR [TIMEOUT_S] (at most 1024 ranks)");
    const char *outdir = argv[2];
    double limit = argc > 3 ? atof(argv[3]) : 10.0;
    double settle = argc > 4 ? atof(argv[4]) : 0.0;
    int flood = argc > 5 ? atoi(argv[5]) : 0;
    if (flood)
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    static int is_victim[MAXR];
    int nvictims = parse_victims(argv[1], is_victim);
    int expected = size - nvictims;
    if (expected < 1)
        die("no survivor left");

    /* Everybody alive: one ring exchange and a barrier. */
    int token = rank, got = -1;
    MPI_Sendrecv(&token, 1, MPI_INT, (rank + 1) % size, 0, &got, 1, MPI_INT,
                 (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (got != (rank + size - 1) % size)
        die("ring exchange before the kill delivered the wrong token");
    if (settle > 0) {
        struct timespec ts = {(time_t)settle, (long)((settle - (double)(time_t)settle) * 1e9)};
        nanosleep(&ts, NULL);
    }
    /* A victim may die right after leaving the barrier with its last message still unsent;
     * a survivor still inside may then get MPIX_ERR_PROC_FAILED, which ULFM allows. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int brc = MPI_Barrier(MPI_COMM_WORLD), bclass = MPI_SUCCESS;
    if (brc != MPI_SUCCESS)
        MPI_Error_class(brc, &bclass);
    if (bclass != MPI_SUCCESS && bclass != MPIX_ERR_PROC_FAILED)
        die("barrier before the kill failed with an unexpected error");
    if (!flood)
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

    if (is_victim[rank]) {
        /* The kill time (CLOCK_MONOTONIC, as MPI_Wtime), for detection-latency measurements. */
        char path[4096], text[64];
        snprintf(path, sizeof path, "%s/killed.%d", argv[2], rank);
        snprintf(text, sizeof text, "%.9f\n", MPI_Wtime());
        write_file(path, text);
        fflush(stdout);
        raise(SIGKILL);
    }
    double t0 = MPI_Wtime();

    /* Wait for the view without the victims. */
    int epoch = 0, nlive = 0, live[MAXR];
    for (;;) {
        MPIX_Steadfast_view(&epoch, &nlive, live, MAXR);
        double left = limit - (MPI_Wtime() - t0);
        if (nlive == expected || left <= 0)
            break;
        int e;
        MPIX_Steadfast_wait_view(epoch + 1, left, &e);
    }
    double took = MPI_Wtime() - t0;
    int errs = 0;
    if (nlive != expected) {
        fprintf(stderr, "[view_kill rank %d] view has %d members after %.1f s, expected %d\n",
                rank, nlive, took, expected);
        errs++;
    }
    for (int i = 0; i < nlive && i < MAXR; i++)
        if (is_victim[live[i]]) {
            fprintf(stderr, "[view_kill rank %d] killed rank %d is still in the view\n", rank, live[i]);
            errs++;
        }
    int nfailed = 0, failed[MAXR];
    MPIX_Steadfast_failed(&nfailed, failed, MAXR);
    if (nfailed + nlive != size) {
        fprintf(stderr, "[view_kill rank %d] %d failed + %d live != %d ranks\n", rank, nfailed, nlive, size);
        errs++;
    }

    char text[16 * MAXR];
    int n = snprintf(text, sizeof text, "epoch %d members %d", epoch, nlive);
    for (int i = 0; i < nlive && n < (int)sizeof text - 16; i++)
        n += snprintf(text + n, sizeof text - n, " %d", live[i]);
    snprintf(text + n, sizeof text - n, " seconds %.6f\n", took);
    char path[4096];
    snprintf(path, sizeof path, "%s/view.%d", outdir, rank);
    if (write_file(path, text) != 0) {
        fprintf(stderr, "[view_kill rank %d] cannot write %s\n", rank, path);
        errs++;
    }

    /* The survivors compare their views over MPI point-to-point (lowest survivor collects). */
    int lowest = -1;
    for (int r = 0; r < size; r++)
        if (!is_victim[r]) {
            lowest = r;
            break;
        }
    int mine[2 + MAXR] = {0};
    mine[0] = epoch;
    mine[1] = nlive;
    memcpy(mine + 2, live, sizeof(int) * (size_t)nlive);
    if (rank == lowest) {
        int bad = errs;
        char why[256] = "";
        for (int r = 0; r < size; r++) {
            if (is_victim[r] || r == rank)
                continue;
            int theirs[2 + MAXR];
            MPI_Recv(theirs, 2 + MAXR, MPI_INT, r, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (theirs[0] != epoch || theirs[1] != nlive ||
                memcmp(theirs + 2, live, sizeof(int) * (size_t)nlive) != 0) {
                if (!bad)
                    snprintf(why, sizeof why, "rank %d has epoch %d with %d members, rank %d epoch %d with %d",
                             r, theirs[0], theirs[1], rank, epoch, nlive);
                bad++;
            }
            if (theirs[2 + MAXR - 1] != 0) /* the sender's own error count */
                bad++;
        }
        /* Communication goes on among the survivors: a ring over the live ranks. */
        char verdict[512];
        if (bad)
            snprintf(verdict, sizeof verdict, "FAIL %d problem(s) %s\n", bad, why);
        else
            snprintf(verdict, sizeof verdict, "ok survivors %d epoch %d seconds %.6f\n", nlive, epoch, took);
        snprintf(path, sizeof path, "%s/verdict", outdir);
        write_file(path, verdict);
        printf("view_kill: %s", verdict);
        if (!bad)
            printf(" No Errors\n");
        errs += bad;
    } else {
        mine[2 + MAXR - 1] = errs;
        MPI_Send(mine, 2 + MAXR, MPI_INT, lowest, 1, MPI_COMM_WORLD);
    }
    if (nlive == expected && !errs) {
        int me = -1;
        for (int i = 0; i < nlive; i++)
            if (live[i] == rank)
                me = i;
        if (me < 0)
            die("this rank is not in its own view");
        int right = live[(me + 1) % nlive], left = live[(me + nlive - 1) % nlive];
        token = rank * 7 + 1;
        got = -1;
        MPI_Sendrecv(&token, 1, MPI_INT, right, 2, &got, 1, MPI_INT, left, 2, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        if (got != left * 7 + 1) {
            fprintf(stderr, "[view_kill rank %d] ring among survivors: got %d from %d\n", rank, got, left);
            errs++;
        }
    }
    if (flood && !errs) {
        int victim = -1;
        for (int r = 0; r < size && victim < 0; r++)
            if (is_victim[r])
                victim = r;
        /* Eager-sized pieces (rendezvous would only send a request to send). */
        static char chunk[4096];
        for (int i = 0; i < 1024; i++) {
            MPI_Request q;
            if (MPI_Isend(chunk, (int)sizeof chunk, MPI_BYTE, victim, 3, MPI_COMM_WORLD, &q) == MPI_SUCCESS)
                MPI_Request_free(&q);
        }
    }
    if (settle > 0) {
        /* Let the stabilization finish before the control threads stop (for the traces). */
        struct timespec ts = {(time_t)settle, (long)((settle - (double)(time_t)settle) * 1e9)};
        nanosleep(&ts, NULL);
    }
    int frc = MPI_Finalize();
    /* Proof that this survivor got through MPI_Finalize. */
    snprintf(path, sizeof path, "%s/done.%d", outdir, rank);
    snprintf(text, sizeof text, "%d\n", frc);
    write_file(path, text);
    return errs || frc != MPI_SUCCESS ? 1 : 0;
}
