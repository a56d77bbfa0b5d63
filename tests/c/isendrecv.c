/* isendrecv: MPI_Isendrecv and MPI_Isendrecv_replace (MPI 4.0) as ring shifts
 * in both directions at 0 B - 1 MiB (eager and rendezvous), several in flight
 * at once and completed by Waitall; the replace form with a strided datatype
 * (gaps untouched, data in place); MPI_PROC_NULL ends and oneself; a request
 * that cannot complete before its partner sends (Test says no); argument
 * errors with their classes under MPI_ERRORS_RETURN, leaving nothing behind.
 * ranks: 1 2 4
 * timeout: 60
 */
#include "tc.h"

static const size_t sizes[] = { 0, 1, 31, 4096, 65536, 300001, 1048576 };
#define NS (sizeof sizes / sizeof sizes[0])

static int eclass(int rc)
{
    int c = -1;
    MPI_Error_class(rc, &c);
    return c;
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "isendrecv");
    const int right = (tc_rank + 1) % tc_size, left = (tc_rank + tc_size - 1) % tc_size;
    size_t max = sizes[NS - 1];
    unsigned char *sb[2], *rb[2];
    for (int d = 0; d < 2; d++) {
        sb[d] = tc_malloc(max);
        rb[d] = tc_malloc(max + 16);
    }

    /* Both directions in flight at once, per size. */
    for (size_t s = 0; s < NS; s++) {
        size_t n = sizes[s];
        MPI_Request r[2];
        MPI_Status st[2];
        for (int d = 0; d < 2; d++) {
            int to = d ? left : right, from = d ? right : left;
            tc_fill(sb[d], n, tc_seed(tc_rank, to, d, (long)s));
            memset(rb[d], 0x11, n + 16);
            TC_MPI(MPI_Isendrecv(sb[d], (int)n, MPI_BYTE, to, d, rb[d], (int)(max + 16), MPI_BYTE,
                                 from, d, MPI_COMM_WORLD, &r[d]));
        }
        TC_MPI(MPI_Waitall(2, r, st));
        for (int d = 0; d < 2; d++) {
            int from = d ? right : left, cnt = -1;
            TC_CHECK(r[d] == MPI_REQUEST_NULL, "request %d not freed by Waitall", d);
            TC_MPI(MPI_Get_count(&st[d], MPI_BYTE, &cnt));
            TC_CHECK(st[d].MPI_SOURCE == from && st[d].MPI_TAG == d && cnt == (int)n,
                     "Isendrecv dir %d size %zu: source %d tag %d count %d", d, n,
                     st[d].MPI_SOURCE, st[d].MPI_TAG, cnt);
            tc_verify(rb[d], n, tc_seed(from, tc_rank, d, (long)s), "Isendrecv dir %d size %zu", d, n);
            TC_CHECK(rb[d][n] == 0x11, "Isendrecv dir %d size %zu wrote past the message", d, n);
        }
    }

    /* Replace with a strided type: every other int is data, the rest must stay. */
    {
        const int count = 70000; /* 280 kB of data: rendezvous on every path */
        int *buf = tc_malloc(sizeof(int) * 2 * (size_t)count);
        MPI_Datatype vec;
        TC_MPI(MPI_Type_vector(count, 1, 2, MPI_INT, &vec));
        TC_MPI(MPI_Type_commit(&vec));
        for (int dir = 0; dir < 2; dir++) {
            int to = dir ? left : right, from = dir ? right : left;
            for (int i = 0; i < count; i++) {
                buf[2 * i] = tc_rank * 1000003 + i * 7 + dir;
                buf[2 * i + 1] = -1 - i;
            }
            MPI_Request r;
            MPI_Status st;
            TC_MPI(MPI_Isendrecv_replace(buf, 1, vec, to, 10 + dir, from, 10 + dir, MPI_COMM_WORLD, &r));
            TC_MPI(MPI_Wait(&r, &st));
            int cnt = -1;
            TC_MPI(MPI_Get_count(&st, vec, &cnt));
            TC_CHECK(st.MPI_SOURCE == from && st.MPI_TAG == 10 + dir && cnt == 1,
                     "replace dir %d: source %d tag %d count %d", dir, st.MPI_SOURCE, st.MPI_TAG, cnt);
            long bad = 0;
            for (int i = 0; i < count; i++)
                bad += buf[2 * i] != from * 1000003 + i * 7 + dir || buf[2 * i + 1] != -1 - i;
            TC_CHECK(bad == 0, "replace dir %d: %ld wrong ints", dir, bad);
        }
        TC_MPI(MPI_Type_free(&vec));
        free(buf);
    }

    /* Non-periodic chain: the ends talk to MPI_PROC_NULL. */
    {
        int to = tc_rank + 1 < tc_size ? tc_rank + 1 : MPI_PROC_NULL;
        int from = tc_rank > 0 ? tc_rank - 1 : MPI_PROC_NULL;
        int out = 100 + tc_rank, in = -5, cnt = -1;
        MPI_Request r;
        MPI_Status st;
        TC_MPI(MPI_Isendrecv(&out, 1, MPI_INT, to, 3, &in, 1, MPI_INT, from, 3, MPI_COMM_WORLD, &r));
        TC_MPI(MPI_Wait(&r, &st));
        TC_MPI(MPI_Get_count(&st, MPI_INT, &cnt));
        if (from == MPI_PROC_NULL)
            TC_CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && cnt == 0 && in == -5,
                     "from PROC_NULL: source %d tag %d count %d in %d", st.MPI_SOURCE, st.MPI_TAG, cnt, in);
        else
            TC_CHECK(in == 100 + from && cnt == 1, "chain: got %d count %d", in, cnt);
        /* Replace form, both ends PROC_NULL: buffer untouched. */
        int v = 42;
        TC_MPI(MPI_Isendrecv_replace(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r));
        TC_MPI(MPI_Wait(&r, &st));
        TC_CHECK(v == 42 && st.MPI_SOURCE == MPI_PROC_NULL, "replace PROC_NULL: v %d source %d", v, st.MPI_SOURCE);
        /* With oneself. */
        int self_out = 7 * tc_rank + 1, self_in = 0;
        TC_MPI(MPI_Isendrecv(&self_out, 1, MPI_INT, 0, 4, &self_in, 1, MPI_INT, 0, 4, MPI_COMM_SELF, &r));
        TC_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        TC_CHECK(self_in == self_out, "self: got %d want %d", self_in, self_out);
    }

    /* Completion needs the partner's message: rank 1 sends only after rank 0 tested. */
    if (tc_size >= 2 && tc_rank < 2) {
        int peer = 1 - tc_rank, out = 500 + tc_rank, in = -1, flag = 1, go = 0;
        MPI_Request r;
        if (tc_rank == 0) {
            TC_MPI(MPI_Isendrecv(&out, 1, MPI_INT, peer, 20, &in, 1, MPI_INT, peer, 20, MPI_COMM_WORLD, &r));
            for (int i = 0; i < 50; i++)
                TC_MPI(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
            TC_CHECK(flag == 0 && r != MPI_REQUEST_NULL, "Isendrecv completed before the partner sent");
            TC_MPI(MPI_Send(&go, 1, MPI_INT, peer, 21, MPI_COMM_WORLD));
            TC_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        } else {
            TC_MPI(MPI_Recv(&go, 1, MPI_INT, peer, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            TC_MPI(MPI_Isendrecv(&out, 1, MPI_INT, peer, 20, &in, 1, MPI_INT, peer, 20, MPI_COMM_WORLD, &r));
            TC_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        }
        TC_CHECK(in == 500 + peer, "delayed partner: got %d", in);
    }

    /* Argument errors: the right class, no request, nothing sent or posted. */
    {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int x = 1, y = 0, v = 3;
        MPI_Request r = MPI_REQUEST_NULL;
        struct { int rc, want; const char *what; } c[] = {
            { MPI_Isendrecv(&x, -1, MPI_INT, right, 0, &y, 1, MPI_INT, left, 0, MPI_COMM_WORLD, &r), MPI_ERR_COUNT, "negative send count" },
            { MPI_Isendrecv(&x, 1, MPI_INT, right, 0, &y, -1, MPI_INT, left, 0, MPI_COMM_WORLD, &r), MPI_ERR_COUNT, "negative recv count" },
            { MPI_Isendrecv(&x, 1, MPI_INT, tc_size, 0, &y, 1, MPI_INT, left, 0, MPI_COMM_WORLD, &r), MPI_ERR_RANK, "bad dest" },
            { MPI_Isendrecv(&x, 1, MPI_INT, right, 0, &y, 1, MPI_INT, tc_size + 3, 0, MPI_COMM_WORLD, &r), MPI_ERR_RANK, "bad source" },
            { MPI_Isendrecv(&x, 1, MPI_INT, right, -2, &y, 1, MPI_INT, left, 0, MPI_COMM_WORLD, &r), MPI_ERR_TAG, "bad send tag" },
            { MPI_Isendrecv(&x, 1, MPI_INT, right, 0, &y, 1, MPI_INT, left, -7, MPI_COMM_WORLD, &r), MPI_ERR_TAG, "bad recv tag" },
            { MPI_Isendrecv(&x, 1, MPI_DATATYPE_NULL, right, 0, &y, 1, MPI_INT, left, 0, MPI_COMM_WORLD, &r), MPI_ERR_TYPE, "null send type" },
            { MPI_Isendrecv(&x, 1, MPI_INT, right, 0, &y, 1, MPI_INT, left, 0, MPI_COMM_NULL, &r), MPI_ERR_COMM, "null comm" },
            { MPI_Isendrecv(&x, 1, MPI_INT, right, 0, &y, 1, MPI_INT, left, 0, MPI_COMM_WORLD, NULL), MPI_ERR_ARG, "null request" },
            { MPI_Isendrecv_replace(&v, -1, MPI_INT, right, 0, left, 0, MPI_COMM_WORLD, &r), MPI_ERR_COUNT, "replace negative count" },
            { MPI_Isendrecv_replace(&v, 1, MPI_DATATYPE_NULL, right, 0, left, 0, MPI_COMM_WORLD, &r), MPI_ERR_TYPE, "replace null type" },
            { MPI_Isendrecv_replace(&v, 1, MPI_INT, right, 0, tc_size + 5, 0, MPI_COMM_WORLD, &r), MPI_ERR_RANK, "replace bad source" },
        };
        for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
            TC_CHECK(c[i].rc != MPI_SUCCESS && eclass(c[i].rc) == c[i].want,
                     "%s: class %d, want %d", c[i].what, eclass(c[i].rc), c[i].want);
        TC_CHECK(r == MPI_REQUEST_NULL, "a failed call returned a request");
        /* Nothing stray: the next exchange matches exactly what was sent now. */
        int out = 900 + tc_rank, in = -1;
        TC_MPI(MPI_Isendrecv(&out, 1, MPI_INT, right, 0, &in, 1, MPI_INT, left, 0, MPI_COMM_WORLD, &r));
        TC_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        TC_CHECK(in == 900 + left, "after the errors: got %d want %d", in, 900 + left);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }

    for (int d = 0; d < 2; d++) {
        free(sb[d]);
        free(rb[d]);
    }
    return tc_finalize();
}
