/* Shared parts of the NAS Parallel Benchmark kernels (CG, MG, IS, FT): the NPB
 * pseudo-random generator, class selection, rank-count checks and the result summary. */
#ifndef NPB_COMMON_H
#define NPB_COMMON_H

#include <mpi.h>

/* The generator of the NPB specification: x_{k+1} = a * x_k mod 2^46, with a = 5^13 and
 * the initial seed 314159265 used by every kernel here. */
#define NPB_A 1220703125.0
#define NPB_SEED 314159265.0

/* Advance *x to a * *x mod 2^46 and return the new value scaled into (0, 1). */
double npb_randlc(double *x, double a);
/* n steps of npb_randlc: y[i] receives the (i+1)-th value after *x; *x ends on the last. */
void npb_vranlc(long n, double *x, double a, double *y);
/* a^n mod 2^46 (n >= 0): the multiplier that jumps the generator n steps ahead. */
double npb_pow46(double a, long long n);
/* The seed n steps after `seed`: what *x holds after n calls of npb_randlc(x, NPB_A). */
double npb_skip(double seed, long long n);

/* The problem class from argv[1] (S, W or A; case does not matter), else from the
 * NPB_CLASS environment variable, else the compile-time NPB_DEFAULT_CLASS, else S.
 * Any other letter is reported on rank 0 and ends the job. */
char npb_class(int argc, char **argv, int rank);

/* End the job with a message from rank 0 when `size` is not a power of two between 1 and
 * `max_ranks` (the decompositions here split the problem in halves). */
void npb_require_pow2(const char *kernel, int size, int max_ranks, int rank);

/* log2 of a power of two. */
int npb_ilog2(long long n);

/* Print the NPB-style summary on rank 0. `size` describes the problem ("1400", "32x32x32").
 * Returns the process exit status: 0 when verified, 1 otherwise. */
int npb_report(const char *kernel, char cls, const char *size, int iterations, double seconds,
               double mops, const char *optype, int verified, int nprocs, int rank);

#endif
