/* placement: copies at the buffer placement where some CPUs' string moves crawl
 * (a destination 1-15 bytes past the source within a 4 KiB page, AMD Zen 3 and Zen 4).
 *
 *   mpiexec -n 2 placement [OFF]     (OFF: bytes the destination lies past a page, 8 unless given)
 *
 * Prints µs per call, rank 0, sizes 16 KiB - 256 KiB:
 *   get       MPI_Get + MPI_Win_flush from a page-aligned MPI_Win_allocate window into a
 *             page-aligned buffer + OFF;
 *   alltoall  MPI_Alltoall, receive buffer OFF bytes past the send buffer's page offset,
 *             a barrier between calls;
 *   self      MPI_Sendrecv to oneself into the receive buffer + OFF;
 *   pack      MPI_Pack of four runs of a quarter of the size each into the buffer + OFF.
 * Run with OFF 0 for the ordinary placement. Builds with any MPI's mpicc. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int off = argc > 1 ? atoi(argv[1]) : 8;
    if (off < 0 || off > 4095)
        off = 8;
    const size_t max = 256 << 10;
    const size_t room = max * (size_t)size + 2 * 4096 + 4 * 1024;
    char *sb = aligned_alloc(4096, room), *rb = aligned_alloc(4096, room), *win_mem;
    if (!sb || !rb)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t i = 0; i < room; i++)
        sb[i] = rb[i] = (char)i;
    MPI_Win win;
    MPI_Win_allocate((MPI_Aint)max, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win_mem, &win);
    for (size_t i = 0; i < max; i++)
        win_mem[i] = (char)(i * 3);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("# placement: %d ranks, destination %d bytes past; us per call\n"
               "# bytes get alltoall self pack\n", size, off);
    double tget[3] = { 0 }, tall[3], tself[3], tpack[3];
    int k = 0;
    for (size_t n = 16384; n <= max; n *= 4, k++) {
        int it = (int)(50000000 / (n * (size_t)size)) + 20;
        double ta = 0;
        for (int i = 0; i < it + 5; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Alltoall(sb, (int)n, MPI_BYTE, rb + off, (int)n, MPI_BYTE, MPI_COMM_WORLD);
            if (i >= 5)
                ta += MPI_Wtime() - t0;
        }
        tall[k] = ta / it;
        double ts = MPI_Wtime();
        for (int i = 0; i < it; i++)
            MPI_Sendrecv(sb, (int)n, MPI_BYTE, rank, 0, rb + off, (int)n, MPI_BYTE, rank, 0,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        tself[k] = (MPI_Wtime() - ts) / it;
        MPI_Datatype v;
        MPI_Type_vector(4, (int)(n / 4), (int)(n / 4 + 1024), MPI_BYTE, &v);
        MPI_Type_commit(&v);
        double tp = MPI_Wtime();
        for (int i = 0; i < it; i++) {
            int pos = 0;
            MPI_Pack(sb, 1, v, rb + off, (int)n + 64, &pos, MPI_COMM_WORLD);
        }
        tpack[k] = (MPI_Wtime() - tp) / it;
        MPI_Type_free(&v);
    }
    /* The gets last, in one passive epoch, while the target waits in a barrier. */
    int peer = size > 1 ? 1 : 0;
    if (rank == 0) {
        MPI_Win_lock_all(0, win);
        k = 0;
        for (size_t n = 16384; n <= max; n *= 4, k++) {
            int it = (int)(50000000 / n) + 20;
            double tg = 0;
            for (int i = 0; i < it + 5; i++) {
                double t0 = MPI_Wtime();
                MPI_Get(rb + off, (int)n, MPI_BYTE, peer, 0, (int)n, MPI_BYTE, win);
                MPI_Win_flush(peer, win);
                if (i >= 5)
                    tg += MPI_Wtime() - t0;
            }
            tget[k] = tg / it;
        }
        MPI_Win_unlock_all(win);
        k = 0;
        for (size_t n = 16384; n <= max; n *= 4, k++)
            printf("%zu %.2f %.2f %.2f %.2f\n", n, tget[k] * 1e6, tall[k] * 1e6, tself[k] * 1e6,
                   tpack[k] * 1e6);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    free(sb);
    free(rb);
    MPI_Finalize();
    return 0;
}
