/* large_count: one message larger than 2 GiB (2^31 + 4099 bytes), sent
 * with the MPI-4 large-count calls MPI_Send_c / MPI_Recv_c where the
 * header provides them, and (always) as a single element of a derived
 * type covering the same bytes. Every byte is checked. Needs ~2.2 GiB per
 * rank plus whatever the transport uses: the runner skips it when memory is
 * short or STEADFAST_TEST_SKIP_LARGE is set. Build with
 * -DTC_FORCE_DERIVED to leave out the _c calls.
 * ranks: 2
 * timeout: 300
 * mem-gib: 8
 * skip-env: STEADFAST_TEST_SKIP_LARGE
 */
#include "tc.h"
#include <limits.h>

#if MPI_VERSION >= 4 && !defined(TC_FORCE_DERIVED)
#define TC_HAVE_C 1
#else
#define TC_HAVE_C 0
#endif

#define MIB ((size_t)1 << 20)
#define TAIL ((size_t)4099)
#define NBYTES (((size_t)2048 * MIB) + TAIL)

static inline uint64_t word(uint64_t seed, size_t i)
{
    uint64_t x = (seed + i) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 31;
    return x * 0xBF58476D1CE4E5B9ull;
}

static void fill(unsigned char *p, uint64_t seed)
{
    size_t nw = NBYTES / 8;
    uint64_t *w = (uint64_t *)p;
    for (size_t i = 0; i < nw; i++)
        w[i] = word(seed, i);
    for (size_t i = nw * 8; i < NBYTES; i++)
        p[i] = (unsigned char)(word(seed, i) >> 8);
}

static void verify(const unsigned char *p, uint64_t seed, const char *what)
{
    size_t nw = NBYTES / 8, bad = 0, first = 0;
    const uint64_t *w = (const uint64_t *)p;
    for (size_t i = 0; i < nw; i++)
        if (w[i] != word(seed, i)) {
            if (!bad) first = i * 8;
            bad++;
        }
    for (size_t i = nw * 8; i < NBYTES; i++)
        if (p[i] != (unsigned char)(word(seed, i) >> 8)) {
            if (!bad) first = i;
            bad++;
        }
    if (bad)
        TC_ERR("%s: %zu bad words/bytes, first at byte offset %zu of %zu", what, bad, first, NBYTES);
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "large_count");
    if (tc_size != 2)
        tc_die("needs exactly 2 ranks");
    unsigned char *buf = malloc(NBYTES);
    if (!buf)
        tc_die("cannot allocate %zu bytes", NBYTES);
    MPI_Status st;
    int icount = 0;

#if TC_HAVE_C
    {
        MPI_Count cnt = -1;
        if (tc_rank == 0) {
            fill(buf, 1);
            TC_MPI(MPI_Send_c(buf, (MPI_Count)NBYTES, MPI_BYTE, 1, 1, MPI_COMM_WORLD));
        } else {
            TC_MPI(MPI_Recv_c(buf, (MPI_Count)NBYTES, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &st));
            TC_MPI(MPI_Get_count_c(&st, MPI_BYTE, &cnt));
            TC_CHECK(cnt == (MPI_Count)NBYTES, "Get_count_c %lld, want %zu", (long long)cnt, NBYTES);
            TC_MPI(MPI_Get_count(&st, MPI_BYTE, &icount));
            TC_CHECK(icount == MPI_UNDEFINED, "Get_count (int) of a > INT_MAX count: %d, want MPI_UNDEFINED", icount);
            verify(buf, 1, "MPI_Send_c/MPI_Recv_c");
        }
        if (tc_rank == 0)
            printf("large_count: MPI_Send_c/MPI_Recv_c of %zu bytes done\n", NBYTES);
    }
#else
    if (tc_rank == 0)
        printf("large_count: no MPI-4 large-count calls in this build; derived type only\n");
#endif

    /* The same byte count as one element of a derived type:
     * 2048 x (1 MiB contiguous) followed by 4099 bytes at offset 2 GiB. */
    {
        MPI_Datatype mib, big;
        int bl[2] = { 2048, (int)TAIL };
        MPI_Aint disp[2] = { 0, (MPI_Aint)(2048 * MIB) };
        MPI_Datatype types[2];
        MPI_Count elx = -1, sizex = -1;
        int el = 0, sz = 0;
        TC_MPI(MPI_Type_contiguous((int)MIB, MPI_BYTE, &mib));
        types[0] = mib;
        types[1] = MPI_BYTE;
        TC_MPI(MPI_Type_create_struct(2, bl, disp, types, &big));
        TC_MPI(MPI_Type_commit(&big));
        TC_MPI(MPI_Type_size_x(big, &sizex));
        TC_CHECK(sizex == (MPI_Count)NBYTES, "Type_size_x %lld, want %zu", (long long)sizex, NBYTES);
        TC_MPI(MPI_Type_size(big, &sz));
        TC_CHECK(sz == MPI_UNDEFINED, "Type_size (int) of a > INT_MAX type: %d, want MPI_UNDEFINED", sz);
        if (tc_rank == 0) {
            fill(buf, 2);
            TC_MPI(MPI_Send(buf, 1, big, 1, 2, MPI_COMM_WORLD));
        } else {
            TC_MPI(MPI_Recv(buf, 1, big, 0, 2, MPI_COMM_WORLD, &st));
            TC_MPI(MPI_Get_count(&st, big, &icount));
            TC_CHECK(icount == 1, "derived: Get_count %d, want 1", icount);
            TC_MPI(MPI_Get_elements_x(&st, big, &elx));
            TC_CHECK(elx == (MPI_Count)NBYTES, "derived: Get_elements_x %lld, want %zu",
                     (long long)elx, NBYTES);
            TC_MPI(MPI_Get_elements(&st, big, &el));
            TC_CHECK(el == MPI_UNDEFINED, "derived: Get_elements (int) %d, want MPI_UNDEFINED", el);
            verify(buf, 2, "derived type");
        }
        TC_MPI(MPI_Type_free(&big));
        TC_MPI(MPI_Type_free(&mib));
    }
    free(buf);
    return tc_finalize();
}
