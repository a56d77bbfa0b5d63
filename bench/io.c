/* io: IOR-style MPI-IO bandwidth. Each rank writes then reads BLOCK bytes:
 *   contig-ind   its own contiguous block, MPI_File_write_at / read_at in XFER pieces
 *   contig-coll  the same with write_at_all / read_at_all
 *   strided-ind  a view interleaving the ranks every PIECE bytes, write / read
 *   strided-coll the same view with write_all / read_all (collective buffering)
 * Writes are timed up to MPI_File_sync.
 *
 * Usage: mpiexec -n 4 ./io [DIR] [BLOCK_MIB] [PIECE_BYTES] [PHASE] [MODES]
 *   defaults /tmp 64 4096 both, all four modes (MODES: comma-separated mode names).
 *   PHASE both   write then read in this process; the reads come from the page cache.
 *   PHASE write  write DIR/io_bench.<mode> and keep it;
 *   PHASE read   read the file a write phase left, check it, delete it.
 * Splitting the phases over two processes lets the caller drop the page cache in between,
 * so that the reads measure the file system rather than memory.
 * Prints one line per mode: mode, write and/or read MiB/s (aggregate over ranks). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { WRITE = 1, READ = 2 };

static int rank, size;

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: %s failed (%d)\n", rank, what, rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* What rank r writes in every transfer; a read of the same range must give it back. */
static void fill(char *buf, size_t n, int r)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (char)(i * 31 + (size_t)r);
}

static void run(const char *path, const char *mode, size_t block, int piece, int strided, int coll, int phases)
{
    const size_t xfer = 1 << 20;
    char *buf = malloc(xfer), *want = malloc(xfer);
    fill(want, xfer, rank);
    memcpy(buf, want, xfer);
    MPI_File fh;
    int amode = phases & WRITE ? MPI_MODE_CREATE | MPI_MODE_RDWR : MPI_MODE_RDONLY;
    check(MPI_File_open(MPI_COMM_WORLD, path, amode, MPI_INFO_NULL, &fh), "open");
    MPI_Datatype ftype = MPI_DATATYPE_NULL;
    if (strided) {
        MPI_Datatype v;
        MPI_Type_contiguous(piece, MPI_BYTE, &v);
        MPI_Type_create_resized(v, 0, (MPI_Aint)piece * size, &ftype);
        MPI_Type_commit(&ftype);
        MPI_Type_free(&v);
        check(MPI_File_set_view(fh, (MPI_Offset)rank * piece, MPI_BYTE, ftype, "native", MPI_INFO_NULL), "set_view");
    }
    double t[2] = {0, 0};
    int last = 0;
    for (int phase = 0; phase < 2; phase++) {
        if (!(phases & (phase == 0 ? WRITE : READ)))
            continue;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (size_t done = 0; done < block; done += xfer) {
            MPI_Offset off = strided ? (MPI_Offset)done : (MPI_Offset)((size_t)rank * block + done);
            int n = (int)(block - done < xfer ? block - done : xfer);
            if (phase == 0)
                check(coll ? MPI_File_write_at_all(fh, off, buf, n, MPI_BYTE, MPI_STATUS_IGNORE)
                           : MPI_File_write_at(fh, off, buf, n, MPI_BYTE, MPI_STATUS_IGNORE), "write");
            else {
                MPI_Status st;
                int got;
                check(coll ? MPI_File_read_at_all(fh, off, buf, n, MPI_BYTE, &st)
                           : MPI_File_read_at(fh, off, buf, n, MPI_BYTE, &st), "read");
                MPI_Get_count(&st, MPI_BYTE, &got);
                if (got != n) {
                    fprintf(stderr, "rank %d: %s read %d of %d bytes at %lld\n", rank, mode, got, n, (long long)off);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
                last = n;
            }
        }
        if (phase == 0)
            check(MPI_File_sync(fh), "sync");
        MPI_Barrier(MPI_COMM_WORLD);
        t[phase] = MPI_Wtime() - t0;
    }
    /* The last transfer read is still in buf: compare it, outside the timed loop, with what
     * was written, so that a fast but wrong read cannot pass. */
    if (last && memcmp(buf, want, (size_t)last) != 0) {
        fprintf(stderr, "rank %d: %s read back data that differs from what was written\n", rank, mode);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    check(MPI_File_close(&fh), "close");
    if (ftype != MPI_DATATYPE_NULL)
        MPI_Type_free(&ftype);
    if (rank == 0) {
        double mib = (double)block * size / (1 << 20);
        printf("%-13s", mode);
        if (phases & WRITE)
            printf(" write %8.1f MiB/s", mib / t[0]);
        if (phases & READ)
            printf("%s read %8.1f MiB/s", phases & WRITE ? " " : "", mib / t[1]);
        printf("\n");
        fflush(stdout);
        if (phases & READ)
            MPI_File_delete(path, MPI_INFO_NULL);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(buf);
    free(want);
}

int main(int argc, char **argv)
{
    static const char *names[] = {"contig-ind", "contig-coll", "strided-ind", "strided-coll"};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    size_t block = (size_t)(argc > 2 ? atoi(argv[2]) : 64) << 20;
    int piece = argc > 3 ? atoi(argv[3]) : 4096;
    const char *phase = argc > 4 ? argv[4] : "both";
    const char *modes = argc > 5 ? argv[5] : "contig-ind,contig-coll,strided-ind,strided-coll";
    int phases = !strcmp(phase, "both") ? WRITE | READ : !strcmp(phase, "write") ? WRITE : !strcmp(phase, "read") ? READ : 0;
    if (!phases || block == 0 || piece <= 0) {
        if (rank == 0)
            fprintf(stderr, "usage: io [DIR] [BLOCK_MIB] [PIECE_BYTES] [both|write|read] [MODES]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char path[1024];
    long token = (long)getpid();
    MPI_Bcast(&token, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("# %d ranks, %zu MiB per rank, strided piece %d B, phase %s, dir %s\n", size, block >> 20, piece, phase, dir);
    int ran = 0;
    for (int m = 0; m < 4; m++) {
        /* A mode is selected when its name appears in MODES as a whole list item. */
        size_t len = strlen(names[m]);
        const char *p = modes;
        int sel = 0;
        while ((p = strstr(p, names[m])) != NULL) {
            if ((p == modes || p[-1] == ',') && (p[len] == ',' || p[len] == '\0'))
                sel = 1;
            p += len;
        }
        if (!sel)
            continue;
        /* The split phases meet at a name both processes know; a single process uses its
         * own pid so that concurrent runs in one directory do not collide. */
        if (phases == (WRITE | READ))
            snprintf(path, sizeof path, "%s/io_bench.%ld", dir, token);
        else
            snprintf(path, sizeof path, "%s/io_bench.%s", dir, names[m]);
        run(path, names[m], block, piece, m >= 2, m & 1, phases);
        ran++;
    }
    if (!ran) {
        if (rank == 0)
            fprintf(stderr, "io: no known mode in '%s'\n", modes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Finalize();
    return 0;
}
