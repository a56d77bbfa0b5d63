/* io_basic: MPI-IO on a POSIX file. Open / close / delete and their error
 * classes (AMODE, NO_SUCH_FILE, FILE_EXISTS, READ_ONLY, ACCESS), get_size /
 * set_size / preallocate / get_amode / get_group / sync / info hints;
 * explicit-offset reads and writes (independent, collective, nonblocking,
 * split, _c forms); individual file pointers (seek, get_position,
 * get_byte_offset); views with derived filetypes; shared file pointers
 * (write_shared, write_ordered, seek_shared); atomic mode; external32;
 * MPI_Register_datarep (a byte-swapping representation whose conversion
 * functions must run); file error handlers (default MPI_ERRORS_RETURN).
 * ranks: 1 2 4
 * timeout: 60
 */
#include "tc.h"
#include <unistd.h>

static char fname[512];
static int handler_calls, handler_class;

static void file_handler(MPI_File *fh, int *code, ...)
{
    (void)fh;
    handler_calls++;
    MPI_Error_class(*code, &handler_class);
}

static int err_class(int rc)
{
    int c = rc;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &c);
    return c;
}

#define EXPECT_CLASS(call, cls) do { int rc_ = err_class(call); \
    TC_CHECK(rc_ == (cls), "%s: class %d, expected %d (%s)", #call, rc_, (cls), #cls); } while (0)

static void basics(void)
{
    MPI_File fh;
    MPI_Offset sz;
    int amode;

    /* Open errors come back (MPI_ERRORS_RETURN is the default for files). */
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, "/nonexistent-dir-x/f", MPI_MODE_RDONLY, MPI_INFO_NULL, &fh), MPI_ERR_NO_SUCH_FILE);
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, fname, MPI_MODE_RDONLY | MPI_MODE_RDWR, MPI_INFO_NULL, &fh), MPI_ERR_AMODE);
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, fname, MPI_MODE_RDONLY | MPI_MODE_CREATE, MPI_INFO_NULL, &fh), MPI_ERR_AMODE);

    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "cb_buffer_size", "8192");
    MPI_Info_set(info, "romio_cb_write", "enable");
    MPI_Info_set(info, "no_such_hint", "1");
    TC_MPI(MPI_File_open(MPI_COMM_WORLD, fname, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_Info_free(&info);
    TC_MPI(MPI_File_get_amode(fh, &amode));
    TC_CHECK(amode == (MPI_MODE_CREATE | MPI_MODE_RDWR), "amode %d", amode);
    MPI_Info used;
    TC_MPI(MPI_File_get_info(fh, &used));
    char val[MPI_MAX_INFO_VAL];
    int flag = 0;
    TC_MPI(MPI_Info_get(used, "cb_buffer_size", MPI_MAX_INFO_VAL - 1, val, &flag));
    TC_CHECK(flag && strcmp(val, "8192") == 0, "cb_buffer_size hint: flag %d value %s", flag, val);
    TC_MPI(MPI_Info_get(used, "romio_cb_write", MPI_MAX_INFO_VAL - 1, val, &flag));
    TC_CHECK(flag && strcmp(val, "enable") == 0, "romio_cb_write hint: flag %d value %s", flag, val);
    MPI_Info_free(&used);

    MPI_Group g1, g2;
    int cmp;
    TC_MPI(MPI_File_get_group(fh, &g1));
    MPI_Comm_group(MPI_COMM_WORLD, &g2);
    MPI_Group_compare(g1, g2, &cmp);
    TC_CHECK(cmp == MPI_IDENT, "file group differs from the communicator's");
    MPI_Group_free(&g1);
    MPI_Group_free(&g2);

    /* Explicit offsets: each rank writes its block of ints; everybody reads all. */
    enum { N = 1000 };
    int *buf = tc_malloc(N * sizeof(int) * (size_t)tc_size);
    for (int i = 0; i < N; i++)
        buf[i] = tc_rank * N + i;
    MPI_Status st;
    int cnt;
    TC_MPI(MPI_File_write_at(fh, (MPI_Offset)tc_rank * N * 4, buf, N, MPI_INT, &st));
    MPI_Get_count(&st, MPI_INT, &cnt);
    TC_CHECK(cnt == N, "write_at count %d", cnt);
    TC_MPI(MPI_File_sync(fh));
    TC_MPI(MPI_File_get_size(fh, &sz));
    TC_CHECK(sz == (MPI_Offset)N * 4 * tc_size, "size %lld", (long long)sz);
    memset(buf, 0, N * sizeof(int) * (size_t)tc_size);
    TC_MPI(MPI_File_read_at_all(fh, 0, buf, N * tc_size, MPI_INT, &st));
    MPI_Get_count(&st, MPI_INT, &cnt);
    TC_CHECK(cnt == N * tc_size, "read_at_all count %d", cnt);
    for (int i = 0; i < N * tc_size; i++)
        if (buf[i] != i) { TC_ERR("read_at_all [%d] = %d", i, buf[i]); break; }

    MPI_Barrier(MPI_COMM_WORLD);
    /* Reading past the end returns what is there. */
    TC_MPI(MPI_File_read_at(fh, sz - 8, buf, 10, MPI_INT, &st));
    MPI_Get_count(&st, MPI_INT, &cnt);
    TC_CHECK(cnt == 2, "read at end: count %d, expected 2", cnt);

    /* Individual file pointer. */
    TC_MPI(MPI_File_seek(fh, (MPI_Offset)tc_rank * N * 4 + 40, MPI_SEEK_SET));
    int one;
    TC_MPI(MPI_File_read(fh, &one, 1, MPI_INT, &st));
    TC_CHECK(one == tc_rank * N + 10, "read via file pointer: %d", one);
    MPI_Offset pos, bo;
    TC_MPI(MPI_File_get_position(fh, &pos));
    TC_CHECK(pos == (MPI_Offset)tc_rank * N * 4 + 44, "position %lld", (long long)pos);
    TC_MPI(MPI_File_seek(fh, -4, MPI_SEEK_CUR));
    TC_MPI(MPI_File_get_byte_offset(fh, pos - 4, &bo));
    TC_CHECK(bo == pos - 4, "byte offset %lld", (long long)bo);
    TC_MPI(MPI_File_seek(fh, 0, MPI_SEEK_END));
    TC_MPI(MPI_File_get_position(fh, &pos));
    TC_CHECK(pos == sz, "seek end: %lld", (long long)pos);
    EXPECT_CLASS(MPI_File_seek(fh, -1, MPI_SEEK_SET), MPI_ERR_ARG);

    /* Nonblocking and split collective, with the _c forms. */
    MPI_Request req;
    int v = 1234 + tc_rank;
    TC_MPI(MPI_File_iwrite_at_c(fh, (MPI_Offset)tc_rank * 4, &v, 1, MPI_INT, &req));
    TC_MPI(MPI_Wait(&req, &st));
    MPI_Get_count(&st, MPI_INT, &cnt);
    TC_CHECK(cnt == 1, "iwrite_at count %d", cnt);
    MPI_Barrier(MPI_COMM_WORLD);
    int back = 0;
    TC_MPI(MPI_File_iread_at_all(fh, (MPI_Offset)((tc_rank + 1) % tc_size) * 4, &back, 1, MPI_INT, &req));
    TC_MPI(MPI_Wait(&req, &st));
    TC_CHECK(back == 1234 + (tc_rank + 1) % tc_size, "iread_at_all got %d", back);
    TC_MPI(MPI_File_read_at_all_begin(fh, (MPI_Offset)tc_rank * 4, &back, 1, MPI_INT));
    EXPECT_CLASS(MPI_File_read_at_all_begin(fh, 0, &back, 1, MPI_INT), MPI_ERR_OTHER);
    TC_MPI(MPI_File_read_at_all_end(fh, &back, &st));
    TC_CHECK(back == 1234 + tc_rank, "split read got %d", back);

    /* set_size / preallocate. */
    MPI_Barrier(MPI_COMM_WORLD);
    TC_MPI(MPI_File_set_size(fh, 100));
    TC_MPI(MPI_File_get_size(fh, &sz));
    TC_CHECK(sz == 100, "after set_size: %lld", (long long)sz);
    MPI_Barrier(MPI_COMM_WORLD);
    TC_MPI(MPI_File_preallocate(fh, 5000));
    TC_MPI(MPI_File_get_size(fh, &sz));
    TC_CHECK(sz == 5000, "after preallocate: %lld", (long long)sz);
    TC_MPI(MPI_File_preallocate(fh, 10));
    TC_MPI(MPI_File_get_size(fh, &sz));
    TC_CHECK(sz == 5000, "preallocate must not shrink: %lld", (long long)sz);

    /* Atomic mode. */
    TC_MPI(MPI_File_set_atomicity(fh, 1));
    TC_MPI(MPI_File_get_atomicity(fh, &flag));
    TC_CHECK(flag == 1, "atomicity %d", flag);
    TC_MPI(MPI_File_write_at_all(fh, (MPI_Offset)tc_rank * 4, &v, 1, MPI_INT, &st));
    TC_MPI(MPI_File_set_atomicity(fh, 0));
    TC_MPI(MPI_File_close(&fh));
    TC_CHECK(fh == MPI_FILE_NULL, "close did not reset the handle");

    /* Exclusive create of an existing file; writes to a read-only file. */
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, fname, MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh), MPI_ERR_FILE_EXISTS);
    TC_MPI(MPI_File_open(MPI_COMM_WORLD, fname, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    EXPECT_CLASS(MPI_File_write_at(fh, 0, &v, 1, MPI_INT, &st), MPI_ERR_READ_ONLY);
    MPI_Errhandler eh;
    TC_MPI(MPI_File_create_errhandler(file_handler, &eh));
    TC_MPI(MPI_File_set_errhandler(fh, eh));
    MPI_Errhandler_free(&eh);
    EXPECT_CLASS(MPI_File_write_at(fh, 0, &v, 1, MPI_INT, &st), MPI_ERR_READ_ONLY);
    TC_CHECK(handler_calls == 1 && handler_class == MPI_ERR_READ_ONLY, "file handler: %d calls, class %d", handler_calls, handler_class);
    TC_MPI(MPI_File_close(&fh));
    TC_MPI(MPI_File_open(MPI_COMM_WORLD, fname, MPI_MODE_WRONLY, MPI_INFO_NULL, &fh));
    EXPECT_CLASS(MPI_File_read_at(fh, 0, &v, 1, MPI_INT, &st), MPI_ERR_ACCESS);
    TC_MPI(MPI_File_close(&fh));
    MPI_Barrier(MPI_COMM_WORLD);
    if (tc_rank == 0)
        TC_MPI(MPI_File_delete(fname, MPI_INFO_NULL));
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_CLASS(MPI_File_delete(fname, MPI_INFO_NULL), MPI_ERR_NO_SUCH_FILE);
    free(buf);
}

/* Interleaved view: rank r owns ints r, r+P, r+2P, ... of the file. */
static void views(const char *cb)
{
    MPI_File fh;
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "romio_cb_write", cb);
    MPI_Info_set(info, "romio_cb_read", cb);
    MPI_Info_set(info, "cb_buffer_size", "4096");
    MPI_Info_set(info, "cb_nodes", "2");
    TC_MPI(MPI_File_open(MPI_COMM_WORLD, fname, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, info, &fh));
    MPI_Info_free(&info);
    MPI_Datatype ftype, vec;
    MPI_Type_vector(1, 1, tc_size, MPI_INT, &vec);
    MPI_Type_create_resized(vec, 0, (MPI_Aint)sizeof(int) * tc_size, &ftype);
    MPI_Type_commit(&ftype);
    MPI_Type_free(&vec);
    TC_MPI(MPI_File_set_view(fh, (MPI_Offset)tc_rank * 4, MPI_INT, ftype, "native", MPI_INFO_NULL));
    MPI_Type_free(&ftype);  /* the file keeps its own reference */

    MPI_Offset disp;
    MPI_Datatype et, ft;
    char rep[MPI_MAX_DATAREP_STRING];
    TC_MPI(MPI_File_get_view(fh, &disp, &et, &ft, rep));
    TC_CHECK(disp == tc_rank * 4 && et == MPI_INT && strcmp(rep, "native") == 0, "get_view: %lld %s", (long long)disp, rep);
    MPI_Aint lb, ext;
    MPI_Type_get_extent(ft, &lb, &ext);
    TC_CHECK(ext == (MPI_Aint)sizeof(int) * tc_size, "filetype extent %ld", (long)ext);
    MPI_Type_free(&ft);

    enum { N = 5000 };
    int *buf = tc_malloc(N * sizeof(int));
    for (int i = 0; i < N; i++)
        buf[i] = i * tc_size + tc_rank;
    MPI_Status st;
    int cnt;
    /* Half collectively through the file pointer, half independently at an offset. */
    TC_MPI(MPI_File_write_all(fh, buf, N / 2, MPI_INT, &st));
    MPI_Get_count(&st, MPI_INT, &cnt);
    TC_CHECK(cnt == N / 2, "write_all count %d", cnt);
    TC_MPI(MPI_File_write_at(fh, N / 2, buf + N / 2, N - N / 2, MPI_INT, &st));
    MPI_Offset pos;
    TC_MPI(MPI_File_get_position(fh, &pos));
    TC_CHECK(pos == N / 2, "position in etypes %lld", (long long)pos);
    MPI_Offset bo;
    TC_MPI(MPI_File_get_byte_offset(fh, 3, &bo));
    TC_CHECK(bo == (MPI_Offset)(3 * tc_size + tc_rank) * 4, "byte offset of etype 3: %lld", (long long)bo);
    TC_MPI(MPI_File_sync(fh));

    /* Read the whole file through the default view on every rank. */
    int *all = tc_malloc((size_t)N * tc_size * sizeof(int));
    TC_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    TC_MPI(MPI_File_read_at_all(fh, 0, all, N * tc_size, MPI_INT, &st));
    for (int i = 0; i < N * tc_size; i++)
        if (all[i] != i) { TC_ERR("cb=%s: file int %d = %d", cb, i, all[i]); break; }

    /* And back through the strided view, collectively, into a strided memory type. */
    TC_MPI(MPI_File_set_view(fh, (MPI_Offset)tc_rank * 4, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    MPI_Type_vector(1, 1, tc_size, MPI_INT, &vec);
    MPI_Type_create_resized(vec, 0, (MPI_Aint)sizeof(int) * tc_size, &ftype);
    MPI_Type_commit(&ftype);
    MPI_Type_free(&vec);
    TC_MPI(MPI_File_set_view(fh, (MPI_Offset)tc_rank * 4, MPI_INT, ftype, "native", MPI_INFO_NULL));
    MPI_Datatype mem;
    MPI_Type_vector(N, 1, 2, MPI_INT, &mem);
    MPI_Type_commit(&mem);
    int *sparse = tc_malloc(2 * N * sizeof(int));
    memset(sparse, 0xff, 2 * N * sizeof(int));
    TC_MPI(MPI_File_read_at_all(fh, 0, sparse, 1, mem, &st));
    MPI_Get_count(&st, mem, &cnt);
    TC_CHECK(cnt == 1, "strided read count %d", cnt);
    for (int i = 0; i < N; i++) {
        if (sparse[2 * i] != i * tc_size + tc_rank) { TC_ERR("cb=%s: strided read [%d] = %d", cb, i, sparse[2 * i]); break; }
        if (i + 1 < N && sparse[2 * i + 1] != -1) { TC_ERR("strided read wrote a gap at %d", 2 * i + 1); break; }
    }
    MPI_Type_free(&mem);
    MPI_Type_free(&ftype);
    TC_MPI(MPI_File_close(&fh));
    free(buf);
    free(all);
    free(sparse);
}


/* A collective write that leaves holes: rank r writes ints 2(kP + r) only; the odd ints,
 * written before, must survive the aggregators' read-modify-write (and data sieving). */
static void holes(const char *cb)
{
    MPI_File fh;
    MPI_Info info;
    MPI_Status st;
    enum { N = 3000 };
    MPI_Info_create(&info);
    MPI_Info_set(info, "romio_cb_write", cb);
    MPI_Info_set(info, "romio_ds_write", "enable");
    MPI_Info_set(info, "cb_buffer_size", "5000");
    MPI_Info_set(info, "ind_wr_buffer_size", "4096");
    TC_MPI(MPI_File_open(MPI_COMM_WORLD, fname, MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh));
    MPI_Info_free(&info);
    int total = 2 * N * tc_size;
    int *all = tc_malloc((size_t)total * sizeof(int));
    for (int i = 0; i < total; i++)
        all[i] = -i;
    if (tc_rank == 0)
        TC_MPI(MPI_File_write_at(fh, 0, all, total, MPI_INT, &st));
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Datatype vec, ftype;
    MPI_Type_vector(1, 1, 2 * tc_size, MPI_INT, &vec);
    MPI_Type_create_resized(vec, 0, (MPI_Aint)sizeof(int) * 2 * tc_size, &ftype);
    MPI_Type_commit(&ftype);
    MPI_Type_free(&vec);
    TC_MPI(MPI_File_set_view(fh, (MPI_Offset)tc_rank * 8, MPI_INT, ftype, "native", MPI_INFO_NULL));
    MPI_Type_free(&ftype);
    int *mine = tc_malloc(N * sizeof(int));
    for (int k = 0; k < N; k++)
        mine[k] = 2 * (k * tc_size + tc_rank);
    TC_MPI(MPI_File_write_all(fh, mine, N, MPI_INT, &st));
    TC_MPI(MPI_File_close(&fh));
    TC_MPI(MPI_File_open(MPI_COMM_WORLD, fname, MPI_MODE_RDONLY | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    memset(all, 0, (size_t)total * sizeof(int));
    TC_MPI(MPI_File_read_at_all(fh, 0, all, total, MPI_INT, &st));
    for (int i = 0; i < total; i++) {
        int want = (i % 2 == 0) ? i : -i;
        if (all[i] != want) { TC_ERR("cb=%s: int %d = %d, expected %d", cb, i, all[i], want); break; }
    }
    TC_MPI(MPI_File_close(&fh));
    free(all);
    free(mine);
}

static void shared(void)
{
    MPI_File fh;
    MPI_Status st;
    TC_MPI(MPI_File_open(MPI_COMM_WORLD, fname, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    TC_MPI(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    int v[3] = { tc_rank, tc_rank, tc_rank };
    TC_MPI(MPI_File_write_shared(fh, v, 3, MPI_INT, &st));
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Offset pos;
    TC_MPI(MPI_File_get_position_shared(fh, &pos));
    TC_CHECK(pos == 3 * tc_size, "shared position %lld", (long long)pos);
    int *all = tc_malloc((size_t)tc_size * 3 * sizeof(int));
    TC_MPI(MPI_File_read_at_all(fh, 0, all, 3 * tc_size, MPI_INT, &st));
    int *seen = calloc((size_t)tc_size, sizeof(int));
    for (int i = 0; i < tc_size; i++) {
        int r = all[3 * i];
        if (r < 0 || r >= tc_size || all[3 * i + 1] != r || all[3 * i + 2] != r) { TC_ERR("write_shared block %d torn: %d %d %d", i, all[3*i], all[3*i+1], all[3*i+2]); break; }
        seen[r]++;
    }
    for (int i = 0; i < tc_size; i++)
        TC_CHECK(seen[i] == 1, "rank %d written %d times", i, seen[i]);
    /* Ordered: rank order after the current shared position. */
    TC_MPI(MPI_File_write_ordered(fh, v, 1 + (tc_rank % 2), MPI_INT, &st));
    TC_MPI(MPI_File_seek_shared(fh, 3 * tc_size, MPI_SEEK_SET));
    int n = 0;
    for (int r = 0; r < tc_size; r++)
        n += 1 + (r % 2);
    int *ord = tc_malloc((size_t)n * sizeof(int));
    TC_MPI(MPI_File_read_ordered_begin(fh, ord, 1 + (tc_rank % 2), MPI_INT));
    TC_MPI(MPI_File_read_ordered_end(fh, ord, &st));
    for (int i = 0; i < 1 + (tc_rank % 2); i++)
        TC_CHECK(ord[i] == tc_rank, "read_ordered got %d", ord[i]);
    TC_MPI(MPI_File_get_position_shared(fh, &pos));
    TC_CHECK(pos == 3 * tc_size + n, "shared position after ordered read %lld", (long long)pos);
    TC_MPI(MPI_File_close(&fh));
    free(all);
    free(seen);
    free(ord);
}

static int no_extent(MPI_Datatype t, MPI_Aint *e, void *x)
{
    (void)x;
    MPI_Aint lb;
    return MPI_Type_get_extent(t, &lb, e);
}


/* A user data representation storing ints byte-swapped. */
static int swap_calls;

static int swap_ints(void *userbuf, MPI_Datatype t, int count, void *filebuf, MPI_Offset pos, void *extra, int to_file)
{
    (void)extra;
    if (t != MPI_INT || pos != 0)
        return MPI_ERR_TYPE;
    unsigned char *u = userbuf, *f = filebuf;
    for (int i = 0; i < count; i++)
        for (int b = 0; b < 4; b++) {
            if (to_file)
                f[4 * i + b] = u[4 * i + 3 - b];
            else
                u[4 * i + 3 - b] = f[4 * i + b];
        }
    swap_calls++;
    return MPI_SUCCESS;
}

static int swap_read(void *userbuf, MPI_Datatype t, int count, void *filebuf, MPI_Offset pos, void *extra)
{
    return swap_ints(userbuf, t, count, filebuf, pos, extra, 0);
}

static int swap_write(void *userbuf, MPI_Datatype t, int count, void *filebuf, MPI_Offset pos, void *extra)
{
    return swap_ints(userbuf, t, count, filebuf, pos, extra, 1);
}

static void datareps(void)
{
    MPI_File fh;
    MPI_Status st;
    TC_MPI(MPI_File_open(MPI_COMM_WORLD, fname, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    TC_MPI(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "external32", MPI_INFO_NULL));
    int v = 0x01020304 + tc_rank;
    TC_MPI(MPI_File_write_at_all(fh, tc_rank, &v, 1, MPI_INT, &st));
    int back = 0;
    TC_MPI(MPI_File_read_at(fh, tc_rank, &back, 1, MPI_INT, &st));
    TC_CHECK(back == v, "external32 round trip %#x", back);
    TC_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    unsigned char raw[4];
    TC_MPI(MPI_File_read_at(fh, tc_rank * 4, raw, 4, MPI_BYTE, &st));
    TC_CHECK(raw[0] == 1 && raw[1] == 2 && raw[2] == 3 && raw[3] == 4 + tc_rank, "external32 is big-endian: %02x %02x %02x %02x", raw[0], raw[1], raw[2], raw[3]);
    EXPECT_CLASS(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "no-such-rep", MPI_INFO_NULL), MPI_ERR_UNSUPPORTED_DATAREP);
    static int registered;
    if (!registered) {
        TC_MPI(MPI_Register_datarep("io_basic_rep", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, no_extent, NULL));
        registered = 1;
    }
    EXPECT_CLASS(MPI_Register_datarep("io_basic_rep", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, no_extent, NULL), MPI_ERR_DUP_DATAREP);
    EXPECT_CLASS(MPI_Register_datarep("external32", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, no_extent, NULL), MPI_ERR_DUP_DATAREP);
    TC_MPI(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "io_basic_rep", MPI_INFO_NULL));
    TC_MPI(MPI_File_read_at(fh, tc_rank, &back, 1, MPI_INT, &st));
    TC_CHECK(back == (int)(0x04030201 + ((unsigned)tc_rank << 24)), "native-layout datarep read %#x", back);
    /* Conversion functions run on writes and reads. */
    static int swap_registered;
    if (!swap_registered) {
        TC_MPI(MPI_Register_datarep("io_basic_swap", swap_read, swap_write, no_extent, NULL));
        swap_registered = 1;
    }
    TC_MPI(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "io_basic_swap", MPI_INFO_NULL));
    int vals[2] = { 0x11223344, 0x55667788 + tc_rank };
    TC_MPI(MPI_File_write_at(fh, 2 * tc_rank, vals, 2, MPI_INT, &st));
    int got2[2] = { 0, 0 };
    TC_MPI(MPI_File_read_at(fh, 2 * tc_rank, got2, 2, MPI_INT, &st));
    TC_CHECK(got2[0] == vals[0] && got2[1] == vals[1], "swap datarep round trip %#x %#x", got2[0], got2[1]);
    TC_CHECK(swap_calls == 2, "conversion functions called %d times", swap_calls);
    TC_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    TC_MPI(MPI_File_read_at(fh, 8 * tc_rank, raw, 4, MPI_BYTE, &st));
    TC_CHECK(raw[0] == 0x11 && raw[3] == 0x44, "swap datarep file bytes %02x..%02x", raw[0], raw[3]);
    TC_MPI(MPI_File_close(&fh));
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "io_basic");
    long token = (long)getpid();
    MPI_Bcast(&token, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    const char *dir = getenv("TMPDIR");
    snprintf(fname, sizeof fname, "%s/io_basic.%ld.%d", dir && *dir ? dir : "/tmp", token, tc_size);
    basics();
    views("enable");
    views("disable");
    views("automatic");
    holes("enable");
    holes("disable");
    shared();
    datareps();
    return tc_finalize();
}
