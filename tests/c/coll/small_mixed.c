/* ranks: 2 3 4 5 7 8
 * timeout: 120
 * Small blocking Bcast, Allreduce, Reduce, Scatter and Gather take a path without schedules,
 * and so does a small Ibcast where the broadcast is linear; larger ones, and other
 * nonblocking ones, use schedules. This mixes them: every root, sizes from one element to
 * past the eager limit, a nonblocking Iallreduce in flight around blocking calls, and ranks
 * with different eager limits (odd ranks set STEADFAST_EAGER_LIMIT=64 before MPI_Init), so
 * one side of a message may take the small path while the other builds a schedule.
 */
#include "ct.h"

static void fill(double *v, int n, int seed)
{
    for (int i = 0; i < n; i++)
        v[i] = seed * 1000.0 + i;
}

int main(int argc, char **argv)
{
    const char *r = getenv("STEADFAST_RANK");
    if (r && atoi(r) % 2 == 1)
        setenv("STEADFAST_EAGER_LIMIT", "64", 1);
    ct_init(&argc, &argv, "small_mixed");
    static const int counts[] = {1, 2, 7, 8, 9, 100, 2047, 2048, 2049, 9000};
    const int ncounts = (int)(sizeof counts / sizeof counts[0]);
    double *a = malloc(9000 * sizeof(double)), *b = malloc(9000 * sizeof(double));
    double *c = malloc(9000 * sizeof(double)), *d = malloc(9000 * sizeof(double));
    if (!a || !b || !c || !d)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (int k = 0; k < ncounts; k++) {
        int n = counts[k];
        for (int root = 0; root < ct_size; root++) {
            if (ct_rank == root)
                fill(a, n, root + k);
            else
                fill(a, n, -1);
            MPI_Bcast(a, n, MPI_DOUBLE, root, MPI_COMM_WORLD);
            for (int i = 0; i < n; i++)
                if (a[i] != (root + k) * 1000.0 + i) {
                    CT_ERR("bcast n=%d root=%d: a[%d]=%g", n, root, i, a[i]);
                    break;
                }
        }
        /* Nonblocking broadcasts from every root, two in flight around a blocking one (small
         * ones on a crowded host take a path without schedules too). */
        for (int root = 0; root < ct_size; root++) {
            int root2 = (root + 1) % ct_size;
            fill(a, n, ct_rank == root ? root + k : -1);
            fill(c, n, ct_rank == root2 ? root2 + 2 * k : -1);
            MPI_Request two[2];
            MPI_Status st[2];
            MPI_Ibcast(a, n, MPI_DOUBLE, root, MPI_COMM_WORLD, &two[0]);
            MPI_Ibcast(c, n, MPI_DOUBLE, root2, MPI_COMM_WORLD, &two[1]);
            double w = ct_rank == root2 ? 7.0 + k : -1;
            MPI_Bcast(&w, 1, MPI_DOUBLE, root2, MPI_COMM_WORLD);
            if (MPI_Waitall(2, two, st) != MPI_SUCCESS)
                CT_ERR("ibcast n=%d root=%d: Waitall failed", n, root);
            if (w != 7.0 + k)
                CT_ERR("bcast between ibcasts n=%d root=%d: %g", n, root2, w);
            for (int i = 0; i < n; i++)
                if (a[i] != (root + k) * 1000.0 + i || c[i] != (root2 + 2 * k) * 1000.0 + i) {
                    CT_ERR("ibcast n=%d roots %d %d: [%d] = %g %g", n, root, root2, i, a[i], c[i]);
                    break;
                }
        }
        /* Scatter and Gather of n doubles per rank from every root, with and without
         * MPI_IN_PLACE at the root. */
        double *all = malloc((size_t)n * ct_size * sizeof(double));
        if (!all)
            MPI_Abort(MPI_COMM_WORLD, 2);
        for (int root = 0; root < ct_size; root++) {
            for (int inplace = 0; inplace < 2; inplace++) {
                for (int j = 0; j < ct_size; j++)
                    fill(all + (size_t)j * n, n, ct_rank == root ? j + k : -1);
                fill(b, n, -1);
                void *rbuf = inplace && ct_rank == root ? MPI_IN_PLACE : (void *)b;
                MPI_Scatter(all, n, MPI_DOUBLE, rbuf, n, MPI_DOUBLE, root, MPI_COMM_WORLD);
                const double *got = inplace && ct_rank == root ? all + (size_t)root * n : b;
                for (int i = 0; i < n; i++)
                    if (got[i] != (ct_rank + k) * 1000.0 + i) {
                        CT_ERR("scatter n=%d root=%d in place %d: [%d]=%g", n, root, inplace, i, got[i]);
                        break;
                    }
                fill(b, n, ct_rank + 2 * k);
                for (int j = 0; j < ct_size; j++)
                    fill(all + (size_t)j * n, n, -1);
                if (inplace && ct_rank == root)
                    fill(all + (size_t)root * n, n, root + 2 * k);
                const void *sbuf = inplace && ct_rank == root ? MPI_IN_PLACE : (const void *)b;
                MPI_Gather(sbuf, n, MPI_DOUBLE, all, n, MPI_DOUBLE, root, MPI_COMM_WORLD);
                if (ct_rank == root)
                    for (int j = 0; j < ct_size; j++)
                        for (int i = 0; i < n; i++)
                            if (all[(size_t)j * n + i] != (j + 2 * k) * 1000.0 + i) {
                                CT_ERR("gather n=%d root=%d in place %d: block %d [%d]=%g", n, root, inplace, j, i,
                                       all[(size_t)j * n + i]);
                                j = ct_size;
                                break;
                            }
            }
        }
        free(all);
        /* Reduce to every root, with MPI_IN_PLACE at the root every other time. */
        for (int root = 0; root < ct_size; root++) {
            int inplace = root % 2;
            fill(a, n, ct_rank);
            fill(b, n, -1);
            if (inplace && ct_rank == root)
                fill(b, n, ct_rank);
            const void *sbuf = inplace && ct_rank == root ? MPI_IN_PLACE : (const void *)a;
            MPI_Reduce(sbuf, b, n, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD);
            if (ct_rank == root)
                for (int i = 0; i < n; i++)
                    if (b[i] != 1000.0 * ct_size * (ct_size - 1) / 2 + (double)ct_size * i) {
                        CT_ERR("reduce n=%d root=%d in place %d: b[%d]=%g", n, root, inplace, i, b[i]);
                        break;
                    }
        }
        /* An Iallreduce stays in flight across a blocking Allreduce and Bcast. */
        MPI_Request req;
        for (int i = 0; i < n; i++)
            c[i] = ct_rank + i;
        MPI_Iallreduce(c, d, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
        fill(a, n, ct_rank);
        MPI_Allreduce(a, b, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        for (int i = 0; i < n; i++)
            if (b[i] != (ct_size - 1) * 1000.0 + i) {
                CT_ERR("allreduce max n=%d: b[%d]=%g", n, i, b[i]);
                break;
            }
        /* In place, integer sum. */
        int *x = (int *)a;
        for (int i = 0; i < n; i++)
            x[i] = ct_rank * i;
        MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i < n; i++)
            if (x[i] != i * (ct_size * (ct_size - 1) / 2)) {
                CT_ERR("allreduce in place n=%d: x[%d]=%d", n, i, x[i]);
                break;
            }
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        for (int i = 0; i < n; i++)
            if (d[i] != ct_size * (ct_size - 1) / 2.0 + (double)ct_size * i) {
                CT_ERR("iallreduce n=%d: d[%d]=%g", n, i, d[i]);
                break;
            }
    }
    /* A split communicator with a non-power-of-two size. */
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, ct_rank % 2, ct_rank, &sub);
    int sr, ss;
    MPI_Comm_rank(sub, &sr);
    MPI_Comm_size(sub, &ss);
    long long v = sr + 1, sum = 0;
    for (int i = 0; i < 50; i++) {
        MPI_Allreduce(&v, &sum, 1, MPI_LONG_LONG, MPI_SUM, sub);
        if (sum != (long long)ss * (ss + 1) / 2)
            CT_ERR("sub allreduce: %lld", sum);
        long long w = sr == i % ss ? i : -1;
        MPI_Bcast(&w, 1, MPI_LONG_LONG, i % ss, sub);
        if (w != i)
            CT_ERR("sub bcast: %lld", w);
    }
    MPI_Comm_free(&sub);
    free(a);
    free(b);
    free(c);
    free(d);
    return ct_finish();
}
