/*
 * dt.h - helpers for the datatype tests.
 *
 * Every rank counts its errors; dt_finalize() collects the counts on rank 0 with
 * point-to-point messages, rank 0 prints " No Errors" when the total is zero, and the
 * process exits non-zero otherwise. MPI_COMM_WORLD returns errors (tests check classes);
 * DT_MPI() aborts when a call that must succeed fails.
 *
 * dt_expect_map() checks a datatype against its type map written out by hand: size,
 * extent, and the bytes MPI_Pack produces and MPI_Unpack places.
 */
#ifndef DT_H
#define DT_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int dt_rank = 0;
static int dt_size = 1;
static long dt_errs = 0;

#define DT_ERR(...)                                                              \
    do {                                                                         \
        dt_errs++;                                                               \
        if (dt_errs <= 25) {                                                     \
            char dt_m_[600];                                                     \
            int dt_n_ = snprintf(dt_m_, sizeof dt_m_, "[rank %d] %s:%d: ",       \
                                 dt_rank, __FILE__, __LINE__);                   \
            snprintf(dt_m_ + dt_n_, sizeof dt_m_ - (size_t)dt_n_, __VA_ARGS__);  \
            fprintf(stderr, "%s\n", dt_m_);                                      \
            fflush(stderr);                                                      \
        }                                                                        \
    } while (0)

#define DT_CHECK(cond, ...) do { if (!(cond)) DT_ERR(__VA_ARGS__); } while (0)

#define DT_MPI(call)                                                             \
    do {                                                                         \
        int dt_rc_ = (call);                                                     \
        if (dt_rc_ != MPI_SUCCESS) {                                             \
            char dt_s_[MPI_MAX_ERROR_STRING];                                    \
            int dt_l_ = 0;                                                       \
            MPI_Error_string(dt_rc_, dt_s_, &dt_l_);                             \
            fprintf(stderr, "[rank %d] %s:%d: %s failed: %s\n", dt_rank,         \
                    __FILE__, __LINE__, #call, dt_s_);                           \
            MPI_Abort(MPI_COMM_WORLD, 1);                                        \
        }                                                                        \
    } while (0)

/* Expect `call` to fail with error class `cls`. */
#define DT_FAILS(call, cls)                                                      \
    do {                                                                         \
        int dt_rc_ = (call), dt_c_ = MPI_SUCCESS;                                \
        if (dt_rc_ != MPI_SUCCESS)                                               \
            MPI_Error_class(dt_rc_, &dt_c_);                                     \
        DT_CHECK(dt_c_ == (cls), "%s: error class %d, want %s (%d)", #call,      \
                 dt_c_, #cls, (cls));                                            \
    } while (0)

static void dt_init(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &dt_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &dt_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
}

static int dt_finalize(void)
{
    long total = dt_errs;
    if (dt_rank == 0) {
        for (int r = 1; r < dt_size; r++) {
            long e = 0;
            DT_MPI(MPI_Recv(&e, 1, MPI_LONG, r, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            total += e;
        }
        if (total == 0)
            printf(" No Errors\n");
        else
            printf(" Found %ld errors\n", total);
        fflush(stdout);
    } else {
        DT_MPI(MPI_Send(&dt_errs, 1, MPI_LONG, 0, 999, MPI_COMM_WORLD));
    }
    MPI_Finalize();
    return dt_errs != 0 || (dt_rank == 0 && total != 0);
}

/* Byte i of the source pattern. */
static inline unsigned char dt_pat(long i) { return (unsigned char)(i * 31 + 7); }

/* Check `t` against the type map of one element: `n` runs (offs[k], lens[k]) in type-map
 * order, lower bound `lb` and extent `extent`; pack and unpack `count` elements. */
static inline void dt_expect_map(const char *what, MPI_Datatype t, int count, int n, const long *offs,
                          const long *lens, long lb, long extent)
{
    MPI_Aint glb = 0, gext = 0;
    int size = 0;
    long want_size = 0;
    for (int k = 0; k < n; k++)
        want_size += lens[k];
    DT_MPI(MPI_Type_size(t, &size));
    DT_MPI(MPI_Type_get_extent(t, &glb, &gext));
    DT_CHECK(size == want_size, "%s: size %d, want %ld", what, size, want_size);
    DT_CHECK(glb == lb && gext == extent, "%s: lb/extent %ld/%ld, want %ld/%ld", what, (long)glb,
             (long)gext, lb, extent);
    /* A buffer with room on both sides of the origin. */
    long lo = 0, hi = 1;
    for (int e = 0; e < count; e++)
        for (int k = 0; k < n; k++) {
            long a = e * extent + offs[k];
            if (a < lo) lo = a;
            if (a + lens[k] > hi) hi = a + lens[k];
        }
    long span = hi - lo;
    unsigned char *src = malloc((size_t)span), *dst = malloc((size_t)span), *want = malloc((size_t)span);
    unsigned char *packed = malloc((size_t)(want_size * count + 1));
    unsigned char *expect = malloc((size_t)(want_size * count + 1));
    for (long i = 0; i < span; i++) {
        src[i] = dt_pat(i);
        dst[i] = 0xee;
        want[i] = 0xee;
    }
    long at = 0;
    for (int e = 0; e < count; e++)
        for (int k = 0; k < n; k++)
            for (long j = 0; j < lens[k]; j++) {
                long a = e * extent + offs[k] + j - lo;
                expect[at++] = src[a];
                want[a] = src[a];
            }
    int pos = 0;
    DT_MPI(MPI_Pack(src - lo, count, t, packed, (int)(want_size * count), &pos, MPI_COMM_WORLD));
    DT_CHECK(pos == want_size * count, "%s: pack position %d, want %ld", what, pos, want_size * count);
    for (long i = 0; i < at; i++)
        if (packed[i] != expect[i]) {
            DT_ERR("%s: packed byte %ld is %d, want %d", what, i, packed[i], expect[i]);
            break;
        }
    pos = 0;
    DT_MPI(MPI_Unpack(packed, (int)(want_size * count), &pos, dst - lo, count, t, MPI_COMM_WORLD));
    for (long i = 0; i < span; i++)
        if (dst[i] != want[i]) {
            DT_ERR("%s: unpacked byte at offset %ld is %d, want %d", what, i + lo, dst[i], want[i]);
            break;
        }
    free(src);
    free(dst);
    free(want);
    free(packed);
    free(expect);
}

#endif
