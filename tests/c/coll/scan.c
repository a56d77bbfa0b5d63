/* ranks: 1 2 3 4 5 6 7 8
 * Scan, Exscan, Reduce_scatter, Reduce_scatter_block with MPI_SUM / MPI_MAX: counts 0, 1,
 * 7 and 30000 (the pairwise reduce-scatter), MPI_IN_PLACE, nonblocking and persistent.
 */
#include "ct.h"

static void scans(int n, int form)
{
    int me = ct_rank;
    long *in = malloc(sizeof(long) * (n + 1)), *out = malloc(sizeof(long) * (n + 1));
    for (int excl = 0; excl < 2; excl++) {
        for (int in_place = 0; in_place < 2; in_place++) {
            for (int i = 0; i < n; i++) {
                in[i] = ct_val(me, i);
                out[i] = in_place ? in[i] : -1;
            }
            const void *s = in_place ? MPI_IN_PLACE : in;
            MPI_Request rq;
            if (form == 0) {
                CT_MPI(excl ? MPI_Exscan(s, out, n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD)
                            : MPI_Scan(s, out, n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
            } else if (form == 1) {
                CT_MPI(excl ? MPI_Iexscan(s, out, n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &rq)
                            : MPI_Iscan(s, out, n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &rq));
                CT_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
            } else {
                CT_MPI(excl ? MPI_Exscan_init(s, out, n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &rq)
                            : MPI_Scan_init(s, out, n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &rq));
                for (int it = 0; it < 3; it++) {
                    if (in_place)
                        for (int i = 0; i < n; i++)
                            out[i] = in[i];
                    CT_MPI(MPI_Start(&rq));
                    CT_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
                }
                CT_MPI(MPI_Request_free(&rq));
            }
            if (excl && me == 0)
                continue;
            int hi = excl ? me : me + 1;
            for (int i = 0; i < n; i++) {
                long w = 0;
                for (int r = 0; r < hi; r++)
                    w += ct_val(r, i);
                if (out[i] != w) {
                    CT_ERR("%s form %d n %d in_place %d [%d] = %ld want %ld", excl ? "Exscan" : "Scan", form, n,
                           in_place, i, out[i], w);
                    break;
                }
            }
        }
    }
    free(in);
    free(out);
}

static void reduce_scatters(int per, int form)
{
    int size = ct_size, me = ct_rank;
    int counts[8], total = 0, off = 0;
    for (int r = 0; r < size; r++) {
        counts[r] = per + (r % 2);
        if (r < me)
            off += counts[r];
        total += counts[r];
    }
    int *in = malloc(sizeof(int) * (total + 1)), *out = malloc(sizeof(int) * (total + 1));
    for (int in_place = 0; in_place < 2; in_place++) {
        for (int i = 0; i < total; i++) {
            in[i] = ct_val(me, i) % 1000;
            out[i] = in_place ? in[i] : -1;
        }
        MPI_Request rq;
        const void *s = in_place ? MPI_IN_PLACE : in;
        if (form == 0)
            CT_MPI(MPI_Reduce_scatter(s, out, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        else if (form == 1) {
            CT_MPI(MPI_Ireduce_scatter(s, out, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq));
            CT_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        } else {
            MPI_Count cc[8];
            for (int r = 0; r < size; r++) cc[r] = counts[r];
            CT_MPI(MPI_Reduce_scatter_c(s, out, cc, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        }
        for (int i = 0; i < counts[me]; i++) {
            int w = 0;
            for (int r = 0; r < size; r++)
                w += ct_val(r, off + i) % 1000;
            if (out[i] != w) {
                CT_ERR("Reduce_scatter form %d per %d in_place %d [%d] = %d want %d", form, per, in_place, i, out[i], w);
                break;
            }
        }
    }
    /* block form with MPI_MAX */
    for (int in_place = 0; in_place < 2; in_place++) {
        for (int i = 0; i < per * size; i++) {
            in[i] = ct_val(me, i) % 977;
            out[i] = in_place ? in[i] : -1;
        }
        MPI_Request rq;
        const void *s = in_place ? MPI_IN_PLACE : in;
        if (form == 1) {
            CT_MPI(MPI_Ireduce_scatter_block(s, out, per, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &rq));
            CT_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        } else if (form == 2) {
            CT_MPI(MPI_Reduce_scatter_block_init(s, out, per, MPI_INT, MPI_MAX, MPI_COMM_WORLD, MPI_INFO_NULL, &rq));
            CT_MPI(MPI_Start(&rq));
            CT_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
            CT_MPI(MPI_Request_free(&rq));
        } else {
            CT_MPI(MPI_Reduce_scatter_block(s, out, per, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        }
        for (int i = 0; i < per; i++) {
            int w = -1;
            for (int r = 0; r < size; r++)
                if (ct_val(r, me * per + i) % 977 > w)
                    w = ct_val(r, me * per + i) % 977;
            if (out[i] != w) {
                CT_ERR("Reduce_scatter_block form %d per %d in_place %d [%d] = %d want %d", form, per, in_place, i,
                       out[i], w);
                break;
            }
        }
    }
    free(in);
    free(out);
}

int main(int argc, char **argv)
{
    ct_init(&argc, &argv, "scan");
    static const int ns[] = {0, 1, 7, 30000};
    for (int k = 0; k < 4; k++)
        for (int f = 0; f < 3; f++) {
            scans(ns[k], f);
            reduce_scatters(ns[k], f);
        }
    return ct_finish();
}
