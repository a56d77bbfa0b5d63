/* ranks: 1 2 3 4 6 8
 * timeout: 120
 * Nonblocking and persistent collectives: many different collectives in flight on one
 * communicator at once (started in the same order everywhere, completed in any order with
 * Waitall / Testall / Waitany / Test loops), progress while the application computes
 * (Test), Ibarrier semantics (nobody leaves before everybody entered), Request_free on an
 * active request, and every persistent collective started repeatedly.
 */
#include "ct.h"
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define M 64

int main(int argc, char **argv)
{
    ct_init(&argc, &argv, "nbc");
    int me = ct_rank, n = ct_size;
    int a[M], b[M], c[M * 8], d[M], e[M], f[M * 8];
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < M; i++) {
            a[i] = ct_val(me, i + round);
            d[i] = me == round % n ? ct_val(me, i + 7 * round) : -1;
        }
        MPI_Request r[6];
        CT_MPI(MPI_Iallreduce(a, b, M, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[0]));
        CT_MPI(MPI_Iallgather(a, M, MPI_INT, c, M, MPI_INT, MPI_COMM_WORLD, &r[1]));
        CT_MPI(MPI_Ibcast(d, M, MPI_INT, round % n, MPI_COMM_WORLD, &r[2]));
        CT_MPI(MPI_Iscan(a, e, M, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r[3]));
        CT_MPI(MPI_Ialltoall(a, M / 8, MPI_INT, f, M / 8, MPI_INT, MPI_COMM_WORLD, &r[4]));
        CT_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &r[5]));
        if (round % 3 == 0) {
            CT_MPI(MPI_Waitall(6, r, MPI_STATUSES_IGNORE));
        } else if (round % 3 == 1) {
            int flag = 0;
            while (!flag)
                CT_MPI(MPI_Testall(6, r, &flag, MPI_STATUSES_IGNORE));
        } else {
            for (int k = 0; k < 6; k++) {
                int idx;
                CT_MPI(MPI_Waitany(6, r, &idx, MPI_STATUS_IGNORE));
                CT_CHECK(idx >= 0 && idx < 6, "Waitany index %d", idx);
            }
        }
        for (int k = 0; k < 6; k++)
            CT_CHECK(r[k] == MPI_REQUEST_NULL, "request %d not freed", k);
        for (int i = 0; i < M; i++) {
            int s = 0, mx = -(1 << 30);
            for (int q = 0; q < n; q++)
                s += ct_val(q, i + round);
            for (int q = 0; q <= me; q++)
                mx = ct_val(q, i + round) > mx ? ct_val(q, i + round) : mx;
            CT_CHECK(b[i] == s, "round %d Iallreduce [%d]", round, i);
            CT_CHECK(d[i] == ct_val(round % n, i + 7 * round), "round %d Ibcast [%d]", round, i);
            CT_CHECK(e[i] == mx, "round %d Iscan [%d]", round, i);
            for (int q = 0; q < n; q++)
                CT_CHECK(c[q * M + i] == ct_val(q, i + round), "round %d Iallgather", round);
        }
        for (int q = 0; q < n; q++)
            for (int i = 0; i < M / 8; i++)
                CT_CHECK(f[q * (M / 8) + i] == ct_val(q, me * (M / 8) + i + round), "round %d Ialltoall", round);
    }
    /* Ibarrier: nobody completes before the last rank entered (one host: the monotonic
     * clock is shared by all ranks) */
    {
        MPI_Request r;
        double entered = 0;
        if (me == n - 1) {
            double until = now() + 0.1;
            while (now() < until)
                ;
            entered = now();
        }
        CT_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &r));
        int flag = 0;
        while (!flag)
            CT_MPI(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
        double done = now();
        CT_MPI(MPI_Bcast(&entered, 1, MPI_DOUBLE, n - 1, MPI_COMM_WORLD));
        CT_CHECK(done >= entered, "Ibarrier completed %.6f s before the last rank entered", entered - done);
    }
    /* Request_free on an active collective: it still completes, the data still arrives */
    {
        MPI_Request r;
        for (int i = 0; i < M; i++)
            a[i] = me == 0 ? i : -1;
        CT_MPI(MPI_Ibcast(a, M, MPI_INT, 0, MPI_COMM_WORLD, &r));
        CT_MPI(MPI_Request_free(&r));
        CT_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CT_MPI(MPI_Bcast(b, 1, MPI_INT, 0, MPI_COMM_WORLD)); /* ordered after the Ibcast */
        for (int i = 0; i < M; i++)
            CT_CHECK(a[i] == i, "freed Ibcast [%d] = %d", i, a[i]);
    }
    /* every persistent collective, started 4 times, all active together */
    {
        MPI_Request p[9];
        int x[M], ar[M], bc[M], gt[M * 8], sc[M], ag[M * 8], at[M * 8], rd[M], sn[M], ex[M];
        int counts[8], displs[8];
        for (int q = 0; q < n; q++) { counts[q] = M / 8; displs[q] = q * (M / 8); }
        int root = n - 1;
        CT_MPI(MPI_Allreduce_init(x, ar, M, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &p[0]));
        CT_MPI(MPI_Bcast_init(bc, M, MPI_INT, root, MPI_COMM_WORLD, MPI_INFO_NULL, &p[1]));
        CT_MPI(MPI_Gather_init(x, M, MPI_INT, gt, M, MPI_INT, root, MPI_COMM_WORLD, MPI_INFO_NULL, &p[2]));
        CT_MPI(MPI_Scatterv_init(gt, counts, displs, MPI_INT, sc, M / 8, MPI_INT, root, MPI_COMM_WORLD, MPI_INFO_NULL, &p[3]));
        CT_MPI(MPI_Allgatherv_init(x, M / 8, MPI_INT, ag, counts, displs, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &p[4]));
        CT_MPI(MPI_Alltoallv_init(x, counts, displs, MPI_INT, at, counts, displs, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &p[5]));
        CT_MPI(MPI_Reduce_init(x, rd, M, MPI_INT, MPI_MIN, root, MPI_COMM_WORLD, MPI_INFO_NULL, &p[6]));
        CT_MPI(MPI_Scan_init(x, sn, M, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &p[7]));
        CT_MPI(MPI_Exscan_init(x, ex, M, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &p[8]));
        for (int it = 0; it < 4; it++) {
            for (int i = 0; i < M; i++) {
                x[i] = ct_val(me, i + it);
                bc[i] = me == root ? ct_val(root, 3 * i + it) : -1;
            }
            /* Scatterv reads gt, which Gather writes: run Gather first, then the rest */
            CT_MPI(MPI_Start(&p[2]));
            CT_MPI(MPI_Wait(&p[2], MPI_STATUS_IGNORE));
            CT_MPI(MPI_Startall(2, p));
            CT_MPI(MPI_Startall(6, p + 3));
            CT_MPI(MPI_Waitall(9, p, MPI_STATUSES_IGNORE));
            for (int k = 0; k < 9; k++)
                CT_CHECK(p[k] != MPI_REQUEST_NULL, "persistent request %d was freed by Waitall", k);
            for (int i = 0; i < M; i++) {
                int s = 0, pre = 0;
                for (int q = 0; q < n; q++) {
                    s += ct_val(q, i + it);
                    if (q <= me) pre += ct_val(q, i + it);
                }
                CT_CHECK(ar[i] == s, "it %d Allreduce_init [%d]", it, i);
                CT_CHECK(bc[i] == ct_val(root, 3 * i + it), "it %d Bcast_init [%d]", it, i);
                CT_CHECK(sn[i] == pre, "it %d Scan_init [%d]", it, i);
                if (me > 0)
                    CT_CHECK(ex[i] == pre - ct_val(me, i + it), "it %d Exscan_init [%d]", it, i);
                if (me == root) {
                    CT_CHECK(rd[i] == ct_val(0, i + it), "it %d Reduce_init [%d]", it, i);
                    for (int q = 0; q < n; q++)
                        CT_CHECK(gt[q * M + i] == ct_val(q, i + it), "it %d Gather_init", it);
                }
            }
            for (int i = 0; i < M / 8; i++) {
                for (int q = 0; q < n; q++) {
                    CT_CHECK(ag[q * (M / 8) + i] == ct_val(q, i + it), "it %d Allgatherv_init", it);
                    CT_CHECK(at[q * (M / 8) + i] == ct_val(q, me * (M / 8) + i + it), "it %d Alltoallv_init", it);
                }
                /* Scatterv sends gt's ints [me*M/8, (me+1)*M/8): gt holds Gather's blocks of
                 * M ints per rank */
                int flat = me * (M / 8) + i;
                CT_CHECK(sc[i] == ct_val(flat / M, flat % M + it), "it %d Scatterv_init [%d]", it, i);
            }
        }
        for (int k = 0; k < 9; k++)
            CT_MPI(MPI_Request_free(&p[k]));
    }
    return ct_finish();
}
