/*
 * tc.h - shared helpers for the C integration tests.
 *
 * Conventions (MPICH test-suite style): every rank counts its own errors;
 * tc_finalize() collects the counts on rank 0 with point-to-point messages
 * only (so the point-to-point tests do not depend on collectives), rank 0
 * prints " No Errors" when the total is zero, and the process exits non-zero
 * otherwise.  A test that cannot continue calls tc_die() -> MPI_Abort.
 *
 * Payload patterns are derived from (seed, byte offset) so every byte of
 * every message is checked, and a misplaced or stale message shows up as a
 * mismatch rather than passing by accident.
 */
#ifndef TC_H
#define TC_H

#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>

static int tc_rank = -1;
static int tc_size = -1;
static long tc_errs = 0;
static const char *tc_name = "test";

#define TC_MAX_REPORTED 20

static void tc_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn, unused));
static void tc_die(const char *fmt, ...)
{
    /* One write per message so lines from different ranks do not mix. */
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "[%s rank %d] FATAL: ", tc_name, tc_rank);
    if (n < 0 || n >= (int)sizeof msg)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1); /* MPI_Abort should not return */
}

static void tc_err_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), unused));
static void tc_err_at(const char *file, int line, const char *fmt, ...)
{
    tc_errs++;
    if (tc_errs <= TC_MAX_REPORTED) {
        char msg[1024];
        int n = snprintf(msg, sizeof msg, "[%s rank %d] %s:%d: ", tc_name, tc_rank, file, line);
        if (n < 0 || n >= (int)sizeof msg)
            n = 0;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
        va_end(ap);
        fprintf(stderr, "%s\n", msg);
        fflush(stderr);
    }
    /* A flood of errors usually means one root cause; stop early and loudly. */
    if (tc_errs >= 1000)
        tc_die("too many errors");
}

#define TC_ERR(...) tc_err_at(__FILE__, __LINE__, __VA_ARGS__)
#define TC_CHECK(cond, ...) do { if (!(cond)) TC_ERR(__VA_ARGS__); } while (0)

/* Every MPI call that must succeed goes through this. */
#define TC_MPI(call) do {                                                   \
        int tc_rc_ = (call);                                                \
        if (tc_rc_ != MPI_SUCCESS) {                                        \
            char tc_s_[MPI_MAX_ERROR_STRING]; int tc_l_ = 0;                \
            tc_s_[0] = 0;                                                   \
            MPI_Error_string(tc_rc_, tc_s_, &tc_l_);                        \
            tc_die("%s:%d: %s returned %d (%s)", __FILE__, __LINE__,        \
                   #call, tc_rc_, tc_s_);                                   \
        }                                                                   \
    } while (0)

/* This process's rank as the launcher gives it, readable before MPI is initialised (to
 * choose the thread level per rank); 0 when no known variable is set. */
static inline int tc_launcher_rank(void)
{
    const char *names[] = {"STEADFAST_RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"};
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return atoi(v);
    }
    return 0;
}

/* Byte i of a message identified by seed. Mixes the bits so that shifted
 * or truncated data never matches. */
static inline unsigned char tc_pat(uint64_t seed, size_t i)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + (uint64_t)i * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 32;
    return (unsigned char)x;
}

static inline uint64_t tc_seed(int src, int dst, int tag, long iter)
{
    return ((uint64_t)(unsigned)src << 48) ^ ((uint64_t)(unsigned)dst << 32) ^
           ((uint64_t)(unsigned)tag << 16) ^ (uint64_t)iter ^ 0x5EEDull;
}

static void tc_fill(void *buf, size_t n, uint64_t seed) __attribute__((unused));
static void tc_fill(void *buf, size_t n, uint64_t seed)
{
    unsigned char *p = (unsigned char *)buf;
    for (size_t i = 0; i < n; i++)
        p[i] = tc_pat(seed, i);
}

/* Returns 0 when all n bytes match; otherwise records one error naming
 * the first bad offset and the number of bad bytes. */
#define tc_verify(buf, n, seed, ...) tc_verify_at(__FILE__, __LINE__, buf, n, seed, __VA_ARGS__)
static int tc_verify_at(const char *file, int line, const void *buf, size_t n,
                        uint64_t seed, const char *what, ...)
    __attribute__((format(printf, 6, 7), unused));
static int tc_verify_at(const char *file, int line, const void *buf, size_t n,
                        uint64_t seed, const char *what, ...)
{
    const unsigned char *p = (const unsigned char *)buf;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != tc_pat(seed, i)) {
            if (bad == 0)
                first = i;
            bad++;
        }
    }
    if (bad) {
        char desc[256];
        va_list ap;
        va_start(ap, what);
        vsnprintf(desc, sizeof desc, what, ap);
        va_end(ap);
        tc_err_at(file, line, "%s: %zu of %zu bytes wrong, first at offset %zu "
                  "(got 0x%02x, want 0x%02x)", desc, bad, n, first,
                  p[first], tc_pat(seed, first));
        return 1;
    }
    return 0;
}

static void *tc_malloc(size_t n) __attribute__((unused));
static void *tc_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        tc_die("malloc(%zu) failed", n);
    return p;
}

static void tc_sleep_ms(int ms) __attribute__((unused));
static void tc_sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

#define TC_SYNC_TAG 32000
#define TC_DONE_TAG 32001

/* A barrier built from point-to-point calls, so that tests of send/receive
 * semantics do not depend on the collective implementation. */
static void tc_sync(MPI_Comm comm) __attribute__((unused));
static void tc_sync(MPI_Comm comm)
{
    int r, n, dummy = 0;
    TC_MPI(MPI_Comm_rank(comm, &r));
    TC_MPI(MPI_Comm_size(comm, &n));
    if (r == 0) {
        for (int i = 1; i < n; i++)
            TC_MPI(MPI_Recv(&dummy, 1, MPI_INT, i, TC_SYNC_TAG, comm, MPI_STATUS_IGNORE));
        for (int i = 1; i < n; i++)
            TC_MPI(MPI_Send(&dummy, 1, MPI_INT, i, TC_SYNC_TAG, comm));
    } else {
        TC_MPI(MPI_Send(&dummy, 1, MPI_INT, 0, TC_SYNC_TAG, comm));
        TC_MPI(MPI_Recv(&dummy, 1, MPI_INT, 0, TC_SYNC_TAG, comm, MPI_STATUS_IGNORE));
    }
}

static void tc_init(int *argc, char ***argv, const char *name) __attribute__((unused));
static void tc_init(int *argc, char ***argv, const char *name)
{
    tc_name = name;
    TC_MPI(MPI_Init(argc, argv));
    TC_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &tc_rank));
    TC_MPI(MPI_Comm_size(MPI_COMM_WORLD, &tc_size));
    /* Tests must see failures as return codes where they check them, but
     * TC_MPI turns unexpected ones into aborts anyway. */
    setvbuf(stdout, NULL, _IOLBF, 0);
}

/* Collects error counts on rank 0, prints the verdict, finalizes, and
 * returns the process exit code. */
static int tc_finalize(void) __attribute__((unused));
static int tc_finalize(void)
{
    long total = tc_errs;
    if (tc_rank == 0) {
        for (int i = 1; i < tc_size; i++) {
            long e = 0;
            TC_MPI(MPI_Recv(&e, 1, MPI_LONG, i, TC_DONE_TAG, MPI_COMM_WORLD,
                            MPI_STATUS_IGNORE));
            total += e;
        }
        if (total == 0)
            printf(" No Errors\n");
        else
            printf(" Found %ld errors\n", total);
        fflush(stdout);
    } else {
        TC_MPI(MPI_Send(&total, 1, MPI_LONG, 0, TC_DONE_TAG, MPI_COMM_WORLD));
    }
    TC_MPI(MPI_Finalize());
    return total ? 1 : 0;
}

#endif /* TC_H */
