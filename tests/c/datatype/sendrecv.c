/* ranks: 2 4
 * timeout: 120
 *
 * Derived datatypes end to end between ranks, at eager and rendezvous sizes: vectors
 * received as contiguous data and the reverse, arrays of padded structs, subarray tiles
 * moved to another place, short messages ending inside an element, MPI_BOTTOM with
 * absolute addresses, truncation (prefix delivered, MPI_ERR_TRUNCATE, nothing written
 * past the buffer), types freed while requests use them, and a darray decomposition
 * collected on rank 0.
 */
#include "dt.h"

static int next, prev;

/* Exchange around the ring: receive from prev with (rt, rcount), send to next. */
static void ring(void *sbuf, int scount, MPI_Datatype st, void *rbuf, int rcount, MPI_Datatype rt, int tag,
                 MPI_Status *status)
{
    MPI_Request r;
    DT_MPI(MPI_Irecv(rbuf, rcount, rt, prev, tag, MPI_COMM_WORLD, &r));
    DT_MPI(MPI_Send(sbuf, scount, st, next, tag, MPI_COMM_WORLD));
    DT_MPI(MPI_Wait(&r, status));
}

static double val(int rank, long i) { return rank * 1e6 + (double)i; }

static void vectors(long n)
{
    /* every other double of a 2n array, to contiguous, and back into every third */
    double *src = malloc(sizeof(double) * 2 * n), *dst = malloc(sizeof(double) * n);
    double *spread = malloc(sizeof(double) * 3 * n);
    for (long i = 0; i < 2 * n; i++) src[i] = val(dt_rank, i);
    MPI_Datatype v2, v3;
    DT_MPI(MPI_Type_vector((int)n, 1, 2, MPI_DOUBLE, &v2));
    DT_MPI(MPI_Type_vector((int)n, 1, 3, MPI_DOUBLE, &v3));
    DT_MPI(MPI_Type_commit(&v2));
    DT_MPI(MPI_Type_commit(&v3));
    MPI_Status st;
    ring(src, 1, v2, dst, (int)n, MPI_DOUBLE, 1, &st);
    long bad = 0;
    for (long i = 0; i < n; i++)
        bad += dst[i] != val(prev, 2 * i);
    DT_CHECK(bad == 0, "vector(%ld) -> contiguous: %ld wrong", n, bad);
    for (long i = 0; i < 3 * n; i++) spread[i] = -1;
    ring(dst, (int)n, MPI_DOUBLE, spread, 1, v3, 2, &st);
    int cnt = -1;
    DT_MPI(MPI_Get_count(&st, v3, &cnt));
    DT_CHECK(cnt == 1, "Get_count(vector) %d", cnt);
    bad = 0;
    int pp = (prev - 1 + dt_size) % dt_size;
    for (long i = 0; i < 3 * n; i++)
        bad += spread[i] != (i % 3 == 0 ? val(pp, 2 * (i / 3)) : -1);
    DT_CHECK(bad == 0, "contiguous -> vector(%ld, stride 3): %ld wrong", n, bad);
    DT_MPI(MPI_Type_free(&v2));
    DT_MPI(MPI_Type_free(&v3));
    free(src);
    free(dst);
    free(spread);
}

struct rec {
    char c;
    double d;
    short s[3];
};

static void structs(int n)
{
    struct rec *a = calloc((size_t)n, sizeof *a), *b = calloc((size_t)n, sizeof *b);
    for (int i = 0; i < n; i++) {
        a[i].c = (char)(i + dt_rank);
        a[i].d = val(dt_rank, i);
        for (int j = 0; j < 3; j++) a[i].s[j] = (short)(i * 3 + j);
    }
    memset(b, 0x5a, sizeof *b * (size_t)n);
    int bl[] = {1, 1, 3};
    MPI_Aint d[] = {0, 8, 16};
    MPI_Datatype ty[] = {MPI_CHAR, MPI_DOUBLE, MPI_SHORT}, rt;
    DT_MPI(MPI_Type_create_struct(3, bl, d, ty, &rt));
    DT_MPI(MPI_Type_commit(&rt));
    MPI_Status st;
    ring(a, n, rt, b, n, rt, 3, &st);
    long bad = 0;
    for (int i = 0; i < n; i++) {
        bad += b[i].c != (char)(i + prev) || b[i].d != val(prev, i) || b[i].s[2] != (short)(i * 3 + 2);
        /* the padding between c and d is not part of the type: untouched */
        bad += ((unsigned char *)&b[i])[1] != 0x5a;
    }
    DT_CHECK(bad == 0, "%d structs: %ld wrong", n, bad);
    int el = -1;
    DT_MPI(MPI_Get_elements(&st, rt, &el));
    DT_CHECK(el == 5 * n, "Get_elements of %d structs: %d", n, el);
    DT_MPI(MPI_Type_free(&rt));
    free(a);
    free(b);
}

static void short_message(int n)
{
    /* (n - 1) whole structs and the first 9 bytes (c, d) of one more, sent as packed bytes
     * and received with room for n + 2 structs: a partial last element */
    int bl[] = {1, 1, 3};
    MPI_Aint d[] = {0, 8, 16};
    MPI_Datatype ty[] = {MPI_CHAR, MPI_DOUBLE, MPI_SHORT}, rt;
    DT_MPI(MPI_Type_create_struct(3, bl, d, ty, &rt));
    DT_MPI(MPI_Type_commit(&rt));
    struct rec *a = calloc((size_t)n, sizeof *a), *b = malloc(sizeof *b * (size_t)(n + 2));
    for (int i = 0; i < n; i++) {
        a[i].c = (char)(i * 3 + dt_rank);
        a[i].d = val(dt_rank, i);
        for (int j = 0; j < 3; j++) a[i].s[j] = (short)(i + j);
    }
    memset(b, 0x5a, sizeof *b * (size_t)(n + 2));
    int psz, pos = 0;
    DT_MPI(MPI_Pack_size(n, rt, MPI_COMM_WORLD, &psz));
    char *packed = malloc((size_t)psz);
    DT_MPI(MPI_Pack(a, n, rt, packed, psz, &pos, MPI_COMM_WORLD));
    int len = 15 * (n - 1) + 9;
    MPI_Request q;
    MPI_Status st;
    DT_MPI(MPI_Irecv(b, n + 2, rt, prev, 11, MPI_COMM_WORLD, &q));
    DT_MPI(MPI_Send(packed, len, MPI_BYTE, next, 11, MPI_COMM_WORLD));
    DT_MPI(MPI_Wait(&q, &st));
    long bad = 0;
    for (int i = 0; i < n; i++) {
        bad += b[i].c != (char)(i * 3 + prev) || b[i].d != val(prev, i);
        if (i < n - 1)
            bad += b[i].s[0] != (short)i || b[i].s[2] != (short)(i + 2);
        else
            bad += b[i].s[0] != 0x5a5a || b[i].s[2] != 0x5a5a;
    }
    bad += b[n].c != 0x5a;
    int el = -1, cnt = -1;
    DT_MPI(MPI_Get_elements(&st, rt, &el));
    DT_MPI(MPI_Get_count(&st, rt, &cnt));
    DT_CHECK(bad == 0 && el == 5 * (n - 1) + 2 && cnt == MPI_UNDEFINED,
             "short message of %d structs: %ld wrong, elements %d, count %d", n, bad, el, cnt);
    DT_MPI(MPI_Type_free(&rt));
    free(a);
    free(b);
    free(packed);
}

static void subarrays(int rows, int cols)
{
    /* send the tile [1..rows-1) x [2..cols-1) of a rows x cols array into the tile at
     * (0, 0) of a (rows-2) x (cols-3) + margin array */
    int *a = malloc(sizeof(int) * (size_t)(rows * cols)), *b = malloc(sizeof(int) * (size_t)(rows * cols));
    for (int i = 0; i < rows * cols; i++) {
        a[i] = dt_rank * 1000000 + i;
        b[i] = -1;
    }
    int sz[] = {rows, cols}, sub[] = {rows - 2, cols - 3}, s1[] = {1, 2}, s2[] = {0, 0};
    MPI_Datatype from, to;
    DT_MPI(MPI_Type_create_subarray(2, sz, sub, s1, MPI_ORDER_C, MPI_INT, &from));
    DT_MPI(MPI_Type_create_subarray(2, sz, sub, s2, MPI_ORDER_C, MPI_INT, &to));
    DT_MPI(MPI_Type_commit(&from));
    DT_MPI(MPI_Type_commit(&to));
    MPI_Status st;
    ring(a, 1, from, b, 1, to, 4, &st);
    long bad = 0;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            int want = (i < rows - 2 && j < cols - 3) ? prev * 1000000 + (i + 1) * cols + (j + 2) : -1;
            bad += b[i * cols + j] != want;
        }
    DT_CHECK(bad == 0, "subarray %dx%d: %ld wrong", rows, cols, bad);
    DT_MPI(MPI_Type_free(&from));
    DT_MPI(MPI_Type_free(&to));
    free(a);
    free(b);
}

static void bottom(int n)
{
    /* two separate arrays described by absolute addresses, sent and received at MPI_BOTTOM */
    double *x = malloc(sizeof(double) * (size_t)n);
    int *k = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) {
        x[i] = val(dt_rank, i);
        k[i] = dt_rank + i;
    }
    MPI_Aint ad[2];
    DT_MPI(MPI_Get_address(x, &ad[0]));
    DT_MPI(MPI_Get_address(k, &ad[1]));
    int bl[] = {n, n};
    MPI_Datatype ty[] = {MPI_DOUBLE, MPI_INT}, t;
    DT_MPI(MPI_Type_create_struct(2, bl, ad, ty, &t));
    DT_MPI(MPI_Type_commit(&t));
    /* receive into the same arrays: post the receive first, send a packed copy */
    int psz;
    DT_MPI(MPI_Pack_size(1, t, MPI_COMM_WORLD, &psz));
    char *packed = malloc((size_t)psz);
    int pos = 0;
    DT_MPI(MPI_Pack(MPI_BOTTOM, 1, t, packed, psz, &pos, MPI_COMM_WORLD));
    MPI_Request r;
    DT_MPI(MPI_Irecv(MPI_BOTTOM, 1, t, prev, 5, MPI_COMM_WORLD, &r));
    DT_MPI(MPI_Send(packed, pos, MPI_PACKED, next, 5, MPI_COMM_WORLD));
    DT_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    long bad = 0;
    for (int i = 0; i < n; i++)
        bad += x[i] != val(prev, i) || k[i] != prev + i;
    DT_CHECK(bad == 0, "MPI_BOTTOM receive of %d: %ld wrong", n, bad);
    /* and a send from MPI_BOTTOM received as contiguous data */
    double *x2 = malloc(sizeof(double) * (size_t)n);
    int *k2 = malloc(sizeof(int) * (size_t)n);
    char *raw = malloc((size_t)psz);
    MPI_Status st;
    ring(MPI_BOTTOM, 1, t, raw, psz, MPI_BYTE, 6, &st);
    int got;
    DT_MPI(MPI_Get_count(&st, MPI_BYTE, &got));
    memcpy(x2, raw, sizeof(double) * (size_t)n);
    memcpy(k2, raw + sizeof(double) * (size_t)n, sizeof(int) * (size_t)n);
    bad = 0;
    int pp = (prev - 1 + dt_size) % dt_size;
    for (int i = 0; i < n; i++)
        bad += x2[i] != val(pp, i) || k2[i] != pp + i;
    DT_CHECK(got == psz && bad == 0, "MPI_BOTTOM send of %d: %d bytes, %ld wrong", n, got, bad);
    DT_MPI(MPI_Type_free(&t));
    free(x);
    free(k);
    free(x2);
    free(k2);
    free(raw);
    free(packed);
}

static void truncation(int n)
{
    /* n ints sent; received with a vector type that holds only n/2 of them */
    int *s = malloc(sizeof(int) * (size_t)n), *r = malloc(sizeof(int) * (size_t)(2 * n + 8));
    for (int i = 0; i < n; i++) s[i] = dt_rank * 7 + i;
    for (int i = 0; i < 2 * n + 8; i++) r[i] = -9;
    MPI_Datatype v;
    DT_MPI(MPI_Type_vector(n / 2, 1, 2, MPI_INT, &v));
    DT_MPI(MPI_Type_commit(&v));
    MPI_Request q;
    MPI_Status st;
    DT_MPI(MPI_Irecv(r, 1, v, prev, 7, MPI_COMM_WORLD, &q));
    DT_MPI(MPI_Send(s, n, MPI_INT, next, 7, MPI_COMM_WORLD));
    int rc = MPI_Wait(&q, &st), cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    DT_CHECK(cls == MPI_ERR_TRUNCATE, "truncated receive of %d ints: class %d", n, cls);
    long bad = 0;
    for (int i = 0; i < 2 * n + 8; i++) {
        int want = (i % 2 == 0 && i / 2 < n / 2) ? prev * 7 + i / 2 : -9;
        bad += r[i] != want;
    }
    DT_CHECK(bad == 0, "truncated receive of %d ints: %ld wrong", n, bad);
    DT_MPI(MPI_Type_free(&v));
    free(s);
    free(r);
}

static void freed_while_in_use(int n)
{
    double *s = malloc(sizeof(double) * (size_t)(4 * n)), *r = malloc(sizeof(double) * (size_t)(4 * n));
    for (int i = 0; i < 4 * n; i++) {
        s[i] = val(dt_rank, i);
        r[i] = 0;
    }
    MPI_Datatype v;
    DT_MPI(MPI_Type_vector(n, 2, 4, MPI_DOUBLE, &v));
    DT_MPI(MPI_Type_commit(&v));
    MPI_Request q[2];
    DT_MPI(MPI_Irecv(r, 1, v, prev, 8, MPI_COMM_WORLD, &q[0]));
    DT_MPI(MPI_Isend(s, 1, v, next, 8, MPI_COMM_WORLD, &q[1]));
    DT_MPI(MPI_Type_free(&v));
    /* reuse the freed handle's slot for something else */
    MPI_Datatype other;
    DT_MPI(MPI_Type_contiguous(3, MPI_CHAR, &other));
    DT_MPI(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
    long bad = 0;
    for (int i = 0; i < 4 * n; i++)
        bad += r[i] != (i % 4 < 2 ? val(prev, i) : 0);
    DT_CHECK(bad == 0, "type freed while in use (%d blocks): %ld wrong", n, bad);
    DT_MPI(MPI_Type_free(&other));
    free(s);
    free(r);
}

static void darray_gather(void)
{
    /* a 2-D array distributed cyclic(2) x block over a grid of all ranks; every rank sends
     * its part of its global-size copy, rank 0 receives each part with the sender's type */
    int g[2] = {13, 10}, p[2] = {dt_size >= 4 ? 2 : 1, dt_size >= 4 ? dt_size / 2 : dt_size};
    int di[2] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_BLOCK}, da[2] = {2, MPI_DISTRIBUTE_DFLT_DARG};
    int total = g[0] * g[1];
    if (p[0] * p[1] != dt_size)
        return;
    int *mine = malloc(sizeof(int) * (size_t)total);
    for (int i = 0; i < total; i++) mine[i] = i; /* element (i, j) holds its index i*10+j */
    MPI_Datatype t;
    DT_MPI(MPI_Type_create_darray(dt_size, dt_rank, 2, g, di, da, p, MPI_ORDER_C, MPI_INT, &t));
    DT_MPI(MPI_Type_commit(&t));
    MPI_Request q;
    DT_MPI(MPI_Isend(mine, 1, t, 0, 9, MPI_COMM_WORLD, &q));
    if (dt_rank == 0) {
        int *all = malloc(sizeof(int) * (size_t)total), *seen = calloc((size_t)total, sizeof(int));
        for (int i = 0; i < total; i++) all[i] = -1;
        for (int r = 0; r < dt_size; r++) {
            MPI_Datatype tr;
            int *part = malloc(sizeof(int) * (size_t)total);
            for (int i = 0; i < total; i++) part[i] = -1;
            DT_MPI(MPI_Type_create_darray(dt_size, r, 2, g, di, da, p, MPI_ORDER_C, MPI_INT, &tr));
            DT_MPI(MPI_Type_commit(&tr));
            DT_MPI(MPI_Recv(part, 1, tr, r, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            for (int i = 0; i < total; i++)
                if (part[i] != -1) {
                    DT_CHECK(part[i] == i, "darray from rank %d: element %d holds %d", r, i, part[i]);
                    seen[i]++;
                    all[i] = part[i];
                }
            DT_MPI(MPI_Type_free(&tr));
            free(part);
        }
        for (int i = 0; i < total; i++)
            DT_CHECK(seen[i] == 1, "darray: element %d owned %d times", i, seen[i]);
        free(all);
        free(seen);
    }
    DT_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
    DT_MPI(MPI_Type_free(&t));
    free(mine);
}

int main(int argc, char **argv)
{
    dt_init(&argc, &argv);
    next = (dt_rank + 1) % dt_size;
    prev = (dt_rank - 1 + dt_size) % dt_size;
    /* 80 B, 24 KiB (past the shm eager limit), 160 KiB (past tcp's), 4 MiB */
    long sizes[] = {10, 3000, 20000, 500000};
    for (int i = 0; i < 4; i++)
        vectors(sizes[i]);
    structs(3);
    structs(5000);
    short_message(2);
    short_message(3000);
    subarrays(5, 7);
    subarrays(300, 200);
    bottom(4);
    bottom(30000);
    truncation(8);
    truncation(40000);
    freed_while_in_use(5);
    freed_while_in_use(20000);
    darray_gather();
    return dt_finalize();
}
