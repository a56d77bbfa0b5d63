/*
 * Reduction kernels for the floating-point formats Rust has no stable type for:
 * IEEE binary16 (_Float16), x87 80-bit extended (long double on x86_64) and IEEE
 * binary128 (_Float128), real and complex. The C compiler does the arithmetic, so
 * results are exactly what C code on the same machine computes (no detour through f64).
 *
 * Values are copied through memcpy: user buffers need not be aligned.
 * Operation codes (keep in step with `FloatOp` in src/op.rs):
 *   0 SUM, 1 PROD, 2 MAX, 3 MIN, 4 LAND, 5 LOR, 6 LXOR
 */
#include <stddef.h>
#include <string.h>

#if defined(__x86_64__)

#define REAL_KERNEL(name, T)                                                    \
    void name(int op, const void *in, void *inout, size_t n, size_t stride)    \
    {                                                                           \
        const unsigned char *a = in;                                            \
        unsigned char *b = inout;                                               \
        for (size_t i = 0; i < n; i++, a += stride, b += stride) {              \
            T x, y, r;                                                          \
            memcpy(&x, a, sizeof(T));                                           \
            memcpy(&y, b, sizeof(T));                                           \
            switch (op) {                                                       \
            case 0: r = x + y; break;                                           \
            case 1: r = x * y; break;                                           \
            case 2: r = x > y ? x : y; break;                                   \
            case 3: r = x < y ? x : y; break;                                   \
            case 4: r = (x != 0 && y != 0) ? 1 : 0; break;                      \
            case 5: r = (x != 0 || y != 0) ? 1 : 0; break;                      \
            case 6: r = ((x != 0) != (y != 0)) ? 1 : 0; break;                  \
            default: r = y; break;                                              \
            }                                                                   \
            memcpy(b, &r, sizeof(T));                                           \
        }                                                                       \
    }

#define COMPLEX_KERNEL(name, T)                                                 \
    void name(int op, const void *in, void *inout, size_t n)                   \
    {                                                                           \
        const unsigned char *a = in;                                            \
        unsigned char *b = inout;                                               \
        for (size_t i = 0; i < n; i++, a += 2 * sizeof(T), b += 2 * sizeof(T)) {\
            T xr, xi, yr, yi, rr, ri;                                           \
            memcpy(&xr, a, sizeof(T));                                          \
            memcpy(&xi, a + sizeof(T), sizeof(T));                              \
            memcpy(&yr, b, sizeof(T));                                          \
            memcpy(&yi, b + sizeof(T), sizeof(T));                              \
            if (op == 0) {                                                      \
                rr = xr + yr;                                                   \
                ri = xi + yi;                                                   \
            } else {                                                            \
                rr = xr * yr - xi * yi;                                         \
                ri = xr * yi + xi * yr;                                         \
            }                                                                   \
            memcpy(b, &rr, sizeof(T));                                          \
            memcpy(b + sizeof(T), &ri, sizeof(T));                              \
        }                                                                       \
    }

/* -1: a < b, 1: a > b, 0: equal, 2: unordered (a NaN is involved). */
#define CMP(name, T)                                                            \
    int name(const void *pa, const void *pb)                                    \
    {                                                                           \
        T a, b;                                                                 \
        memcpy(&a, pa, sizeof(T));                                              \
        memcpy(&b, pb, sizeof(T));                                              \
        return a < b ? -1 : a > b ? 1 : a == b ? 0 : 2;                         \
    }

/* A long double occupies 16 bytes of which 10 are significant; the padding bytes
 * written back are unspecified, as after a C assignment. */
REAL_KERNEL(steadfast_reduce_f16, _Float16)
REAL_KERNEL(steadfast_reduce_x87, long double)
REAL_KERNEL(steadfast_reduce_f128, _Float128)
COMPLEX_KERNEL(steadfast_reduce_c16, _Float16)
COMPLEX_KERNEL(steadfast_reduce_cx87, long double)
COMPLEX_KERNEL(steadfast_reduce_c128, _Float128)
CMP(steadfast_cmp_f16, _Float16)
CMP(steadfast_cmp_x87, long double)
CMP(steadfast_cmp_f128, _Float128)

int steadfast_reduce_float_available(void) { return 1; }

#else
int steadfast_reduce_float_available(void) { return 0; }
#endif
