/*
 * ct.h - helpers for the collective tests.
 *
 * Every rank counts its own errors; ct_finish() gathers the counts on rank 0 with
 * point-to-point messages only (so a broken collective cannot hide its own failure), rank 0
 * prints " No Errors" when the total is zero, and the process exits non-zero otherwise.
 */
#ifndef CT_H
#define CT_H

#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ct_rank, ct_size;
static long ct_errs;
static const char *ct_name = "coll";

static void ct_err_at(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4), unused));
static void ct_err_at(const char *file, int line, const char *fmt, ...)
{
    ct_errs++;
    if (ct_errs <= 20) {
        char msg[1024];
        int n = snprintf(msg, sizeof msg, "[%s rank %d] %s:%d: ", ct_name, ct_rank, file, line);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
        va_end(ap);
        fprintf(stderr, "%s\n", msg);
        fflush(stderr);
    }
    if (ct_errs >= 1000) {
        fprintf(stderr, "[%s rank %d] too many errors\n", ct_name, ct_rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

#define CT_ERR(...) ct_err_at(__FILE__, __LINE__, __VA_ARGS__)
#define CT_CHECK(cond, ...) do { if (!(cond)) CT_ERR(__VA_ARGS__); } while (0)
#define CT_MPI(call) do {                                                        \
        int ct_rc_ = (call);                                                     \
        if (ct_rc_ != MPI_SUCCESS) {                                             \
            char ct_s_[MPI_MAX_ERROR_STRING]; int ct_l_ = 0; ct_s_[0] = 0;       \
            MPI_Error_string(ct_rc_, ct_s_, &ct_l_);                             \
            fprintf(stderr, "[%s rank %d] %s:%d: %s failed: %s\n", ct_name,      \
                    ct_rank, __FILE__, __LINE__, #call, ct_s_);                  \
            MPI_Abort(MPI_COMM_WORLD, 1);                                        \
        }                                                                        \
    } while (0)

static void ct_init(int *argc, char ***argv, const char *name)
{
    ct_name = name;
    int done;
    MPI_Initialized(&done);
    if (!done)
        MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &ct_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ct_size);
}

static int ct_finish(void)
{
    long total = ct_errs;
    if (ct_rank == 0) {
        for (int r = 1; r < ct_size; r++) {
            long e = 0;
            MPI_Recv(&e, 1, MPI_LONG, r, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            total += e;
        }
        if (total == 0)
            printf(" No Errors\n");
        else
            printf(" Found %ld errors\n", total);
        fflush(stdout);
    } else {
        MPI_Send(&ct_errs, 1, MPI_LONG, 0, 999, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return ct_errs != 0 || total != 0;
}

/* A value that depends on the rank and position, so misplaced data shows. */
static inline int ct_val(int rank, long i)
{
    return (int)(rank * 10007 + i * 31 + 1);
}

#endif
