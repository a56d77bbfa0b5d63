/* Shared helpers of the communicator tests: count failures, report them in one write. */
#ifndef COMM_CHECK_H
#define COMM_CHECK_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int errs = 0;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            char msg_[2048];                                                     \
            int r_ = -1;                                                        \
            MPI_Comm_rank(MPI_COMM_WORLD, &r_);                                 \
            int n_ = snprintf(msg_, sizeof msg_, "rank %d: %s:%d: check failed: %s: ", \
                              r_, __FILE__, __LINE__, #cond);                   \
            if (n_ > 0 && n_ < (int)sizeof msg_)                                \
                snprintf(msg_ + n_, sizeof msg_ - n_, __VA_ARGS__);             \
            fprintf(stderr, "%s\n", msg_);                                      \
            errs++;                                                             \
        }                                                                       \
    } while (0)

/* Sum the failures over MPI_COMM_WORLD, print " No Errors" on rank 0 if none, finalize. */
static inline int finish(void)
{
    int total = errs, rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* Point-to-point only, so the tests do not depend on the collectives. */
    if (rank == 0) {
        for (int r = 1; r < size; r++) {
            int e = 0;
            MPI_Recv(&e, 1, MPI_INT, r, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            total += e;
        }
    } else {
        MPI_Send(&errs, 1, MPI_INT, 0, 999, MPI_COMM_WORLD);
    }
    if (rank == 0) {
        if (total == 0)
            printf(" No Errors\n");
        else
            printf(" Found %d errors\n", total);
        fflush(stdout);
    }
    MPI_Finalize();
    return total != 0;
}
#endif
