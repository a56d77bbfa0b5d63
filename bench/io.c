/* io: IOR-style MPI-IO bandwidth. Each rank writes then reads BLOCK bytes:
 *   contig-ind   its own contiguous block, MPI_File_write_at / read_at in XFER pieces
 *   contig-coll  the same with write_at_all / read_at_all
 *   strided-ind  a view interleaving the ranks every PIECE bytes, write / read
 *   strided-coll the same view with write_all / read_all (collective buffering)
 * Writes are timed up to MPI_File_sync; reads follow with the file in the page cache.
 * Usage: mpiexec -n 4 ./io [DIR] [BLOCK_MIB] [PIECE_BYTES]   (default /tmp 64 4096)
 * Prints one line per mode: mode, write MiB/s, read MiB/s (aggregate over ranks). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, size;

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: %s failed (%d)\n", rank, what, rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static void run(const char *path, const char *mode, size_t block, int piece, int strided, int coll)
{
    const size_t xfer = 1 << 20;
    char *buf = malloc(xfer);
    for (size_t i = 0; i < xfer; i++)
        buf[i] = (char)(i * 31 + (size_t)rank);
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh), "open");
    MPI_Datatype ftype = MPI_DATATYPE_NULL;
    if (strided) {
        MPI_Datatype v;
        MPI_Type_contiguous(piece, MPI_BYTE, &v);
        MPI_Type_create_resized(v, 0, (MPI_Aint)piece * size, &ftype);
        MPI_Type_commit(&ftype);
        MPI_Type_free(&v);
        check(MPI_File_set_view(fh, (MPI_Offset)rank * piece, MPI_BYTE, ftype, "native", MPI_INFO_NULL), "set_view");
    }
    double t[2];
    for (int phase = 0; phase < 2; phase++) {
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
            }
        }
        if (phase == 0)
            check(MPI_File_sync(fh), "sync");
        MPI_Barrier(MPI_COMM_WORLD);
        t[phase] = MPI_Wtime() - t0;
    }
    check(MPI_File_close(&fh), "close");
    if (ftype != MPI_DATATYPE_NULL)
        MPI_Type_free(&ftype);
    if (rank == 0) {
        double mib = (double)block * size / (1 << 20);
        printf("%-13s write %8.1f MiB/s  read %8.1f MiB/s\n", mode, mib / t[0], mib / t[1]);
        fflush(stdout);
        MPI_File_delete(path, MPI_INFO_NULL);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(buf);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    size_t block = (size_t)(argc > 2 ? atoi(argv[2]) : 64) << 20;
    int piece = argc > 3 ? atoi(argv[3]) : 4096;
    char path[1024];
    long token = (long)getpid();
    MPI_Bcast(&token, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    snprintf(path, sizeof path, "%s/io_bench.%ld", dir, token);
    if (rank == 0)
        printf("# %d ranks, %zu MiB per rank, strided piece %d B, file %s\n", size, block >> 20, piece, path);
    run(path, "contig-ind", block, piece, 0, 0);
    run(path, "contig-coll", block, piece, 0, 1);
    run(path, "strided-ind", block, piece, 1, 0);
    run(path, "strided-coll", block, piece, 1, 1);
    MPI_Finalize();
    return 0;
}
