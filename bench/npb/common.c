/* Shared parts of the NAS Parallel Benchmark kernels; see common.h. */
#include "common.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#define T23 8388608.0                 /* 2^23 */
#define R23 (1.0 / 8388608.0)         /* 2^-23 */
#define T46 (T23 * T23)               /* 2^46 */
#define R46 (R23 * R23)               /* 2^-46 */

/* a * x mod 2^46 for 0 <= a, x < 2^46, in double precision as the specification describes:
 * both factors are split into 23-bit halves so that every partial product and every sum
 * stays below 2^53 and is exact. */
static double mulmod46(double a, double x) {
    double a1 = (double)(long long)(R23 * a);
    double a2 = a - T23 * a1;
    double x1 = (double)(long long)(R23 * x);
    double x2 = x - T23 * x1;
    double cross = a1 * x2 + a2 * x1;                 /* < 2^47 */
    double cross_hi = (double)(long long)(R23 * cross);
    double cross_lo = cross - T23 * cross_hi;         /* cross mod 2^23 */
    double low = T23 * cross_lo + a2 * x2;            /* < 2^47 */
    double low_hi = (double)(long long)(R46 * low);
    return low - T46 * low_hi;                        /* mod 2^46 */
}

double npb_randlc(double *x, double a) {
    *x = mulmod46(a, *x);
    return R46 * *x;
}

void npb_vranlc(long n, double *x, double a, double *y) {
    double v = *x;
    for (long i = 0; i < n; i++) {
        v = mulmod46(a, v);
        y[i] = R46 * v;
    }
    *x = v;
}

double npb_pow46(double a, long long n) {
    double result = 1.0, square = a;
    while (n > 0) {
        if (n & 1) result = mulmod46(square, result);
        square = mulmod46(square, square);
        n >>= 1;
    }
    return result;
}

double npb_skip(double seed, long long n) {
    return mulmod46(npb_pow46(NPB_A, n), seed);
}

char npb_class(int argc, char **argv, int rank) {
    const char *arg = NULL;
    if (argc > 1) arg = argv[1];
    else if (getenv("NPB_CLASS")) arg = getenv("NPB_CLASS");
#ifdef NPB_DEFAULT_CLASS
    else arg = NPB_DEFAULT_CLASS;
#endif
    char cls = arg ? (char)toupper((unsigned char)arg[0]) : 'S';
    if ((cls != 'S' && cls != 'W' && cls != 'A') || (arg && arg[0] && arg[1])) {
        if (rank == 0)
            fprintf(stderr, "unknown class \"%s\": this kernel has classes S, W and A\n",
                    arg ? arg : "");
        MPI_Finalize();
        exit(2);
    }
    return cls;
}

void npb_require_pow2(const char *kernel, int size, int max_ranks, int rank) {
    if (size >= 1 && size <= max_ranks && (size & (size - 1)) == 0) return;
    if (rank == 0)
        fprintf(stderr, "%s runs on a power of two number of ranks from 1 to %d, not %d\n",
                kernel, max_ranks, size);
    MPI_Finalize();
    exit(2);
}

int npb_ilog2(long long n) {
    int k = 0;
    while ((1LL << k) < n) k++;
    return k;
}

int npb_report(const char *kernel, char cls, const char *size, int iterations, double seconds,
               double mops, const char *optype, int verified, int nprocs, int rank) {
    if (rank == 0) {
        printf("\n %s Benchmark Completed.\n", kernel);
        printf(" Class           = %24c\n", cls);
        printf(" Size            = %24s\n", size);
        printf(" Iterations      = %24d\n", iterations);
        printf(" Time in seconds = %24.2f\n", seconds);
        printf(" Total processes = %24d\n", nprocs);
        printf(" Mop/s total     = %24.2f\n", mops);
        printf(" Mop/s/process   = %24.2f\n", mops / nprocs);
        printf(" Operation type  = %24s\n", optype);
        printf(" Verification    = %24s\n", verified ? "SUCCESSFUL" : "UNSUCCESSFUL");
        fflush(stdout);
    }
    return verified ? 0 : 1;
}
