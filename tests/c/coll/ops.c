/* ranks: 1 2 3 4 7 8
 * timeout: 120
 * Every predefined op on every C type it is defined for, through MPI_Allreduce (with and
 * without MPI_IN_PLACE), MPI_Reduce to every root and MPI_Reduce_local, against a reference
 * computed here. Values stay small so no type overflows and floats are exact.
 */
#include "ct.h"
#include <complex.h>
#include <stdbool.h>

#define N 13

static const char *opname(MPI_Op op)
{
    if (op == MPI_SUM) return "SUM";
    if (op == MPI_PROD) return "PROD";
    if (op == MPI_MAX) return "MAX";
    if (op == MPI_MIN) return "MIN";
    if (op == MPI_LAND) return "LAND";
    if (op == MPI_LOR) return "LOR";
    if (op == MPI_LXOR) return "LXOR";
    if (op == MPI_BAND) return "BAND";
    if (op == MPI_BOR) return "BOR";
    if (op == MPI_BXOR) return "BXOR";
    return "?";
}

/* Input of `rank` at position i for op (as a long long; every type holds it). */
static long long input(MPI_Op op, int rank, int i, int is_signed)
{
    if (op == MPI_SUM) return (rank * 3 + i) % 7 - (is_signed ? 2 : 0);
    if (op == MPI_PROD) return ((rank + i) % 3 == 0) ? 2 : (is_signed && (rank + i) % 4 == 1 ? -1 : 1);
    if (op == MPI_MAX || op == MPI_MIN) return (rank * 5 + i) % 11 - (is_signed ? 5 : 0);
    if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR) return ((rank + i) % 3 == 0) ? 0 : (rank + i) % 5;
    return (1 << ((rank + i) % 7)) | (rank & 1) | (i & 2); /* bitwise */
}

static long long combine(MPI_Op op, long long a, long long b)
{
    if (op == MPI_SUM) return a + b;
    if (op == MPI_PROD) return a * b;
    if (op == MPI_MAX) return a > b ? a : b;
    if (op == MPI_MIN) return a < b ? a : b;
    if (op == MPI_LAND) return (a != 0) && (b != 0);
    if (op == MPI_LOR) return (a != 0) || (b != 0);
    if (op == MPI_LXOR) return (a != 0) != (b != 0);
    if (op == MPI_BAND) return a & b;
    if (op == MPI_BOR) return a | b;
    return a ^ b;
}

static long long expect(MPI_Op op, int i, int is_signed)
{
    long long acc = input(op, 0, i, is_signed);
    for (int r = 1; r < ct_size; r++)
        acc = combine(op, acc, input(op, r, i, is_signed));
    return acc;
}

/* Run op on type T (MPI type dt) through Allreduce, Allreduce in place, Reduce at each
 * root, Iallreduce and Reduce_local; compare with the reference. */
#define TEST_TYPE(T, dt, is_signed, op)                                                        \
    do {                                                                                       \
        T in[N], out[N], want[N];                                                              \
        for (int i = 0; i < N; i++) {                                                          \
            in[i] = (T)input(op, ct_rank, i, is_signed);                                       \
            want[i] = (T)expect(op, i, is_signed);                                             \
        }                                                                                      \
        memset(out, 0x5a, sizeof out);                                                         \
        CT_MPI(MPI_Allreduce(in, out, N, dt, op, MPI_COMM_WORLD));                             \
        for (int i = 0; i < N; i++)                                                            \
            CT_CHECK(out[i] == want[i], "Allreduce %s %s [%d]: got %lld want %lld", opname(op), \
                     #dt, i, (long long)out[i], (long long)want[i]);                           \
        memcpy(out, in, sizeof in);                                                            \
        CT_MPI(MPI_Allreduce(MPI_IN_PLACE, out, N, dt, op, MPI_COMM_WORLD));                   \
        for (int i = 0; i < N; i++)                                                            \
            CT_CHECK(out[i] == want[i], "Allreduce in place %s %s [%d]", opname(op), #dt, i);  \
        for (int root = 0; root < ct_size; root++) {                                           \
            memset(out, 0x5a, sizeof out);                                                     \
            CT_MPI(MPI_Reduce(in, out, N, dt, op, root, MPI_COMM_WORLD));                      \
            if (ct_rank == root)                                                               \
                for (int i = 0; i < N; i++)                                                    \
                    CT_CHECK(out[i] == want[i], "Reduce %s %s root %d [%d]", opname(op), #dt,  \
                             root, i);                                                         \
        }                                                                                      \
        MPI_Request rq;                                                                        \
        memset(out, 0x5a, sizeof out);                                                         \
        CT_MPI(MPI_Iallreduce(in, out, N, dt, op, MPI_COMM_WORLD, &rq));                       \
        CT_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));                                              \
        for (int i = 0; i < N; i++)                                                            \
            CT_CHECK(out[i] == want[i], "Iallreduce %s %s [%d]", opname(op), #dt, i);          \
        T a[N], b[N];                                                                          \
        for (int i = 0; i < N; i++) {                                                          \
            a[i] = (T)input(op, 0, i, is_signed);                                              \
            b[i] = (T)input(op, 1, i, is_signed);                                              \
        }                                                                                      \
        CT_MPI(MPI_Reduce_local(a, b, N, dt, op));                                             \
        for (int i = 0; i < N; i++)                                                            \
            CT_CHECK(b[i] == (T)combine(op, input(op, 0, i, is_signed), input(op, 1, i, is_signed)), \
                     "Reduce_local %s %s [%d]", opname(op), #dt, i);                           \
    } while (0)

#define INT_OPS(T, dt, s)                                                                      \
    do {                                                                                       \
        MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_LAND, MPI_LOR, MPI_LXOR,      \
                        MPI_BAND, MPI_BOR, MPI_BXOR};                                          \
        for (unsigned k = 0; k < sizeof ops / sizeof ops[0]; k++)                              \
            TEST_TYPE(T, dt, s, ops[k]);                                                       \
    } while (0)

#define FLOAT_OPS(T, dt)                                                                       \
    do {                                                                                       \
        MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};                                  \
        for (unsigned k = 0; k < sizeof ops / sizeof ops[0]; k++)                              \
            TEST_TYPE(T, dt, 1, ops[k]);                                                       \
    } while (0)

#define COMPLEX_OPS(T, dt)                                                                     \
    do {                                                                                       \
        MPI_Op ops[] = {MPI_SUM, MPI_PROD};                                                    \
        for (unsigned k = 0; k < 2; k++) {                                                     \
            MPI_Op op = ops[k];                                                                \
            T in[N], out[N], want[N];                                                          \
            for (int i = 0; i < N; i++) {                                                      \
                in[i] = (T)((ct_rank + i) % 3) + (T)(((ct_rank * 2 + i) % 3) - 1) * I;         \
                if (op == MPI_PROD && ct_rank > 3) in[i] = 1;                                  \
                want[i] = op == MPI_SUM ? 0 : 1;                                               \
                for (int r = 0; r < ct_size; r++) {                                            \
                    T v = (T)((r + i) % 3) + (T)(((r * 2 + i) % 3) - 1) * I;                   \
                    if (op == MPI_PROD && r > 3) v = 1;                                        \
                    want[i] = op == MPI_SUM ? want[i] + v : want[i] * v;                       \
                }                                                                              \
            }                                                                                  \
            CT_MPI(MPI_Allreduce(in, out, N, dt, op, MPI_COMM_WORLD));                         \
            for (int i = 0; i < N; i++)                                                        \
                CT_CHECK(out[i] == want[i], "%s %s [%d]: (%g,%g) want (%g,%g)", opname(op),    \
                         #dt, i, (double)creall(out[i]), (double)cimagl(out[i]),               \
                         (double)creall(want[i]), (double)cimagl(want[i]));                    \
        }                                                                                      \
    } while (0)

#define PAIR_TEST(V, dt)                                                                       \
    do {                                                                                       \
        struct { V v; int i; } in[N], out[N];                                                  \
        for (int k = 0; k < 2; k++) {                                                          \
            MPI_Op op = k ? MPI_MAXLOC : MPI_MINLOC;                                           \
            for (int i = 0; i < N; i++) {                                                      \
                in[i].v = (V)((ct_rank * 7 + i * 3) % 5); /* ties between ranks */             \
                in[i].i = ct_rank + 100;                                                       \
            }                                                                                  \
            CT_MPI(MPI_Allreduce(in, out, N, dt, op, MPI_COMM_WORLD));                         \
            for (int i = 0; i < N; i++) {                                                      \
                V best = (V)((i * 3) % 5); int at = 0;                                         \
                for (int r = 1; r < ct_size; r++) {                                            \
                    V v = (V)((r * 7 + i * 3) % 5);                                            \
                    if (k ? v > best : v < best) { best = v; at = r; }                         \
                }                                                                              \
                CT_CHECK(out[i].v == best && out[i].i == at + 100,                             \
                         "%s %s [%d]: (%g, %d) want (%g, %d)", k ? "MAXLOC" : "MINLOC", #dt,   \
                         i, (double)out[i].v, out[i].i, (double)best, at + 100);               \
            }                                                                                  \
        }                                                                                      \
    } while (0)

int main(int argc, char **argv)
{
    ct_init(&argc, &argv, "ops");
    INT_OPS(signed char, MPI_SIGNED_CHAR, 1);
    INT_OPS(unsigned char, MPI_UNSIGNED_CHAR, 0);
    INT_OPS(short, MPI_SHORT, 1);
    INT_OPS(unsigned short, MPI_UNSIGNED_SHORT, 0);
    INT_OPS(int, MPI_INT, 1);
    INT_OPS(unsigned, MPI_UNSIGNED, 0);
    INT_OPS(long, MPI_LONG, 1);
    INT_OPS(unsigned long, MPI_UNSIGNED_LONG, 0);
    INT_OPS(long long, MPI_LONG_LONG, 1);
    INT_OPS(unsigned long long, MPI_UNSIGNED_LONG_LONG, 0);
    INT_OPS(int8_t, MPI_INT8_T, 1);
    INT_OPS(uint8_t, MPI_UINT8_T, 0);
    INT_OPS(int16_t, MPI_INT16_T, 1);
    INT_OPS(uint16_t, MPI_UINT16_T, 0);
    INT_OPS(int32_t, MPI_INT32_T, 1);
    INT_OPS(uint32_t, MPI_UINT32_T, 0);
    INT_OPS(int64_t, MPI_INT64_T, 1);
    INT_OPS(uint64_t, MPI_UINT64_T, 0);
    INT_OPS(MPI_Aint, MPI_AINT, 1);
    INT_OPS(MPI_Offset, MPI_OFFSET, 1);
    INT_OPS(MPI_Count, MPI_COUNT, 1);
    INT_OPS(int, MPI_INTEGER, 1);
    INT_OPS(char, MPI_CHAR, 1); /* an MPICH extension: char as a small integer */
    FLOAT_OPS(float, MPI_FLOAT);
    FLOAT_OPS(double, MPI_DOUBLE);
    FLOAT_OPS(long double, MPI_LONG_DOUBLE);
    FLOAT_OPS(float, MPI_REAL);
    FLOAT_OPS(double, MPI_DOUBLE_PRECISION);
    COMPLEX_OPS(float complex, MPI_C_FLOAT_COMPLEX);
    COMPLEX_OPS(double complex, MPI_C_DOUBLE_COMPLEX);
    COMPLEX_OPS(long double complex, MPI_C_LONG_DOUBLE_COMPLEX);
    {
        MPI_Op ops[] = {MPI_LAND, MPI_LOR, MPI_LXOR};
        for (int k = 0; k < 3; k++) {
            TEST_TYPE(bool, MPI_C_BOOL, 0, ops[k]);
            TEST_TYPE(int, MPI_LOGICAL, 0, ops[k]);
        }
        MPI_Op bops[] = {MPI_BAND, MPI_BOR, MPI_BXOR};
        for (int k = 0; k < 3; k++)
            TEST_TYPE(unsigned char, MPI_BYTE, 0, bops[k]);
    }
    PAIR_TEST(float, MPI_FLOAT_INT);
    PAIR_TEST(double, MPI_DOUBLE_INT);
    PAIR_TEST(long, MPI_LONG_INT);
    PAIR_TEST(int, MPI_2INT);
    PAIR_TEST(short, MPI_SHORT_INT);
    PAIR_TEST(long double, MPI_LONG_DOUBLE_INT);
    /* long double keeps its 64-bit mantissa: 1 + 2^-60 survives a reduction */
    {
        long double x = ct_rank == 0 ? 1.0L : 0x1p-60L, s = 0;
        CT_MPI(MPI_Allreduce(&x, &s, 1, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        long double w = 1.0L + (ct_size - 1) * 0x1p-60L;
        CT_CHECK(s == w, "long double sum lost precision: %La", s);
    }
    /* large counts: Rabenseifner on 100000 doubles */
    {
        int n = 100000;
        double *in = malloc(sizeof(double) * n), *out = malloc(sizeof(double) * n);
        for (int i = 0; i < n; i++) in[i] = ct_rank + i % 17;
        CT_MPI(MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) {
            double w = (double)ct_size * (ct_size - 1) / 2 + (double)ct_size * (i % 17);
            if (out[i] != w) { CT_ERR("large Allreduce [%d] = %g want %g", i, out[i], w); break; }
        }
        for (int root = 0; root < ct_size; root += 3) {
            CT_MPI(MPI_Reduce(in, out, n, MPI_DOUBLE, MPI_MAX, root, MPI_COMM_WORLD));
            if (ct_rank == root)
                for (int i = 0; i < n; i++)
                    if (out[i] != ct_size - 1 + i % 17) { CT_ERR("large Reduce MAX [%d]", i); break; }
            /* SUM counts every contribution once (a binomial tree on a crowded host reads
             * vectors this long with a single copy, every child's at once) */
            memset(out, 0x5a, sizeof(double) * n);
            CT_MPI(MPI_Reduce(in, out, n, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD));
            if (ct_rank == root)
                for (int i = 0; i < n; i++) {
                    double w = (double)ct_size * (ct_size - 1) / 2 + (double)ct_size * (i % 17);
                    if (out[i] != w) { CT_ERR("large Reduce SUM [%d] = %g want %g", i, out[i], w); break; }
                }
        }
        free(in);
        free(out);
    }
    /* count 0 */
    {
        int a = 1, b = 2;
        CT_MPI(MPI_Allreduce(&a, &b, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CT_CHECK(b == 2, "count 0 wrote the receive buffer");
        CT_MPI(MPI_Reduce(&a, &b, 0, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
        CT_CHECK(b == 2, "count 0 wrote the receive buffer");
    }
    return ct_finish();
}
