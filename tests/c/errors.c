/* errors: with MPI_ERRORS_RETURN, bad arguments return the right error
 * class (checked through MPI_Error_class) and every code has a non-empty
 * MPI_Error_string; the communicator still works afterwards.
 * ranks: 1 2
 * timeout: 30
 */
#include "tc.h"
#include <limits.h>

static void expect_class(int rc, int want, const char *wname, const char *call, int line)
{
    int cls = -1, len = 0;
    char s[MPI_MAX_ERROR_STRING];
    if (rc == MPI_SUCCESS) {
        tc_err_at(__FILE__, line, "%s returned MPI_SUCCESS, want %s", call, wname);
        return;
    }
    if (MPI_Error_class(rc, &cls) != MPI_SUCCESS) {
        tc_err_at(__FILE__, line, "%s: MPI_Error_class(%d) failed", call, rc);
        return;
    }
    if (cls != want) {
        s[0] = 0;
        MPI_Error_string(rc, s, &len);
        tc_err_at(__FILE__, line, "%s: error class %d, want %s (%d); message: %s", call, cls,
                  wname, want, s);
    }
    s[0] = 0;
    len = -1;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS || len <= 0 || s[0] == 0 ||
        len >= MPI_MAX_ERROR_STRING || (int)strlen(s) != len)
        tc_err_at(__FILE__, line, "%s: MPI_Error_string(%d) empty or bad length %d", call, rc, len);
}

#define EXPECT(call, cls) expect_class((call), cls, #cls, #call, __LINE__)

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "errors");
    MPI_Comm w = MPI_COMM_WORLD;
    int tag_ub = 0, *tag_ub_p = NULL, flag = 0;
    int ibuf[4] = { 0 };
    MPI_Request rq = MPI_REQUEST_NULL;
    MPI_Status st;

    /* Errors on a null communicator are raised on the initial handler,
     * which MPI_COMM_SELF and MPI_COMM_WORLD share by default: set both. */
    TC_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    TC_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    {
        MPI_Errhandler eh;
        TC_MPI(MPI_Comm_get_errhandler(w, &eh));
        TC_CHECK(eh == MPI_ERRORS_RETURN, "Comm_get_errhandler does not give MPI_ERRORS_RETURN");
        TC_MPI(MPI_Errhandler_free(&eh));
    }
    TC_MPI(MPI_Comm_get_attr(w, MPI_TAG_UB, &tag_ub_p, &flag));
    TC_CHECK(flag && tag_ub_p && *tag_ub_p >= 32767, "MPI_TAG_UB attribute missing or < 32767");
    if (flag && tag_ub_p)
        tag_ub = *tag_ub_p;

    /* Counts. */
    EXPECT(MPI_Send(ibuf, -1, MPI_INT, 0, 0, w), MPI_ERR_COUNT);
    EXPECT(MPI_Recv(ibuf, -1, MPI_INT, 0, 0, w, &st), MPI_ERR_COUNT);
    EXPECT(MPI_Isend(ibuf, -5, MPI_INT, 0, 0, w, &rq), MPI_ERR_COUNT);
    EXPECT(MPI_Irecv(ibuf, -5, MPI_INT, 0, 0, w, &rq), MPI_ERR_COUNT);

    /* Ranks. */
    EXPECT(MPI_Send(ibuf, 1, MPI_INT, tc_size, 0, w), MPI_ERR_RANK);
    EXPECT(MPI_Send(ibuf, 1, MPI_INT, -7, 0, w), MPI_ERR_RANK);
    EXPECT(MPI_Send(ibuf, 1, MPI_INT, MPI_ANY_SOURCE, 0, w), MPI_ERR_RANK);
    EXPECT(MPI_Recv(ibuf, 1, MPI_INT, tc_size + 3, 0, w, &st), MPI_ERR_RANK);
    EXPECT(MPI_Irecv(ibuf, 1, MPI_INT, -7, 0, w, &rq), MPI_ERR_RANK);
    EXPECT(MPI_Probe(tc_size, 0, w, &st), MPI_ERR_RANK);

    /* Tags. */
    EXPECT(MPI_Send(ibuf, 1, MPI_INT, 0, -1, w), MPI_ERR_TAG);
    EXPECT(MPI_Send(ibuf, 1, MPI_INT, 0, MPI_ANY_TAG, w), MPI_ERR_TAG);
    EXPECT(MPI_Isend(ibuf, 1, MPI_INT, 0, -3, w, &rq), MPI_ERR_TAG);
    EXPECT(MPI_Recv(ibuf, 1, MPI_INT, 0, -5, w, &st), MPI_ERR_TAG);
    if (tag_ub > 0 && tag_ub < INT_MAX)
        EXPECT(MPI_Send(ibuf, 1, MPI_INT, 0, tag_ub + 1, w), MPI_ERR_TAG);

    /* Communicators. */
    EXPECT(MPI_Send(ibuf, 1, MPI_INT, 0, 0, MPI_COMM_NULL), MPI_ERR_COMM);
    EXPECT(MPI_Recv(ibuf, 1, MPI_INT, 0, 0, MPI_COMM_NULL, &st), MPI_ERR_COMM);
    EXPECT(MPI_Irecv(ibuf, 1, MPI_INT, 0, 0, MPI_COMM_NULL, &rq), MPI_ERR_COMM);
    {
        int r;
        EXPECT(MPI_Comm_rank(MPI_COMM_NULL, &r), MPI_ERR_COMM);
        EXPECT(MPI_Comm_size(MPI_COMM_NULL, &r), MPI_ERR_COMM);
    }

    /* NULL output arguments are MPI_ERR_ARG, checked before anything else (MPICH's
     * errors/datatype and errors/group *_nullarg tests). */
    {
        MPI_Aint a;
        MPI_Count c;
        MPI_Group wg;
        int range[1][3] = {{tc_size, tc_size + 5, 1}}; /* out of range too: the NULL wins */
        EXPECT(MPI_Type_get_extent(MPI_INT, &a, NULL), MPI_ERR_ARG);
        EXPECT(MPI_Type_get_true_extent(MPI_INT, NULL, &a), MPI_ERR_ARG);
        EXPECT(MPI_Type_size_x(MPI_INT, NULL), MPI_ERR_ARG);
        EXPECT(MPI_Type_get_extent_x(MPI_INT, &c, NULL), MPI_ERR_ARG);
        TC_MPI(MPI_Comm_group(w, &wg));
        EXPECT(MPI_Group_range_excl(wg, 1, range, NULL), MPI_ERR_ARG);
        EXPECT(MPI_Group_range_incl(wg, 1, range, NULL), MPI_ERR_ARG);
        TC_MPI(MPI_Group_free(&wg));
    }
    /* A Cart_create that fails leaves MPI_COMM_NULL (errors/topo/cartsmall). */
    {
        int dims[2] = {tc_size + 1, tc_size + 1}, periods[2] = {0, 0};
        MPI_Comm cart = w;
        EXPECT(MPI_Cart_create(w, 2, dims, periods, 0, &cart), MPI_ERR_TOPOLOGY);
        TC_CHECK(cart == MPI_COMM_NULL, "a failed MPI_Cart_create left a communicator");
    }

    /* Datatypes. */
    EXPECT(MPI_Send(ibuf, 1, MPI_DATATYPE_NULL, 0, 0, w), MPI_ERR_TYPE);
    EXPECT(MPI_Recv(ibuf, 1, MPI_DATATYPE_NULL, 0, 0, w, &st), MPI_ERR_TYPE);
    {
        /* With count 0 it moves nothing and is accepted, as MPICH does (programs
         * synchronize with MPI_Send(NULL, 0, MPI_DATATYPE_NULL, ...)). */
        MPI_Request rq;
        TC_MPI(MPI_Irecv(NULL, 0, MPI_DATATYPE_NULL, tc_rank, 7, w, &rq));
        TC_MPI(MPI_Send(NULL, 0, MPI_DATATYPE_NULL, tc_rank, 7, w));
        TC_MPI(MPI_Wait(&rq, &st));
        int cnt = -1;
        TC_MPI(MPI_Get_count(&st, MPI_BYTE, &cnt));
        TC_CHECK(cnt == 0, "a count-0 MPI_DATATYPE_NULL message carried %d bytes", cnt);
    }
    {
        int sz;
        EXPECT(MPI_Type_size(MPI_DATATYPE_NULL, &sz), MPI_ERR_TYPE);
    }
    {
        /* An uncommitted derived type may not be used for communication. */
        MPI_Datatype t;
        TC_MPI(MPI_Type_contiguous(2, MPI_INT, &t));
        EXPECT(MPI_Send(ibuf, 1, t, 0, 0, w), MPI_ERR_TYPE);
        TC_MPI(MPI_Type_free(&t));
    }

    /* Buffers. */
    EXPECT(MPI_Send(NULL, 4, MPI_INT, 0, 0, w), MPI_ERR_BUFFER);
    EXPECT(MPI_Recv(NULL, 4, MPI_INT, 0, 0, w, &st), MPI_ERR_BUFFER);
    /* NULL with count 0 is fine: send to self and receive it. */
    TC_MPI(MPI_Irecv(NULL, 0, MPI_INT, tc_rank, 5, w, &rq));
    TC_MPI(MPI_Send(NULL, 0, MPI_INT, tc_rank, 5, w));
    TC_MPI(MPI_Wait(&rq, &st));

    /* Requests. */
    rq = MPI_REQUEST_NULL;
    EXPECT(MPI_Start(&rq), MPI_ERR_REQUEST);
    rq = MPI_REQUEST_NULL;
    EXPECT(MPI_Request_free(&rq), MPI_ERR_REQUEST);
    {
        MPI_Request two[2] = { MPI_REQUEST_NULL, MPI_REQUEST_NULL };
        EXPECT(MPI_Startall(2, two), MPI_ERR_REQUEST);
    }
    /* A stale request in MPI_Waitall fails the call before it waits (the receive next to it
       has no message yet) and completes nothing. */
    {
        MPI_Request arr[2], done;
        int x = 0, y = 7, z = 0;
        TC_MPI(MPI_Irecv(&z, 1, MPI_INT, tc_rank, 10, w, &done));
        arr[1] = done; /* kept: stale once the receive is completed below */
        TC_MPI(MPI_Send(&y, 1, MPI_INT, tc_rank, 10, w));
        TC_MPI(MPI_Wait(&done, &st));
        TC_MPI(MPI_Irecv(&x, 1, MPI_INT, tc_rank, 9, w, &arr[0]));
        EXPECT(MPI_Waitall(2, arr, MPI_STATUSES_IGNORE), MPI_ERR_REQUEST);
        TC_CHECK(arr[0] != MPI_REQUEST_NULL, "MPI_Waitall released a request although it failed");
        TC_MPI(MPI_Send(&y, 1, MPI_INT, tc_rank, 9, w));
        TC_MPI(MPI_Wait(&arr[0], &st));
        TC_CHECK(x == 7 && z == 7, "received %d and %d, expected 7 and 7", x, z);
    }

    /* Truncation: the receive reports MPI_ERR_TRUNCATE. */
    {
        int big[4] = { 1, 2, 3, 4 }, small[2] = { 0, 0 };
        TC_MPI(MPI_Irecv(small, 2, MPI_INT, tc_rank, 6, w, &rq));
        TC_MPI(MPI_Send(big, 4, MPI_INT, tc_rank, 6, w));
        EXPECT(MPI_Wait(&rq, &st), MPI_ERR_TRUNCATE);
        TC_MPI(MPI_Isend(big, 4, MPI_INT, tc_rank, 7, w, &rq));
        EXPECT(MPI_Recv(small, 2, MPI_INT, tc_rank, 7, w, &st), MPI_ERR_TRUNCATE);
        TC_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        /* The same between two ranks (a different path in most MPIs). */
        int peer = tc_rank ^ 1;
        if (peer < tc_size) {
            TC_MPI(MPI_Irecv(small, 2, MPI_INT, peer, 8, w, &rq));
            TC_MPI(MPI_Send(big, 4, MPI_INT, peer, 8, w));
            EXPECT(MPI_Wait(&rq, &st), MPI_ERR_TRUNCATE);
        }
    }

    /* Every error class has a message. */
    {
        int classes[] = { MPI_ERR_BUFFER, MPI_ERR_COUNT, MPI_ERR_TYPE, MPI_ERR_TAG, MPI_ERR_COMM,
                          MPI_ERR_RANK, MPI_ERR_REQUEST, MPI_ERR_ROOT, MPI_ERR_GROUP, MPI_ERR_OP,
                          MPI_ERR_TOPOLOGY, MPI_ERR_DIMS, MPI_ERR_ARG, MPI_ERR_UNKNOWN,
                          MPI_ERR_TRUNCATE, MPI_ERR_OTHER, MPI_ERR_INTERN, MPI_ERR_IN_STATUS,
                          MPI_ERR_PENDING };
        for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
            char s[MPI_MAX_ERROR_STRING];
            int len = -1, cls = -1;
            s[0] = 0;
            TC_MPI(MPI_Error_string(classes[i], s, &len));
            TC_CHECK(len > 0 && s[0] != 0, "Error_string(class %d) empty", classes[i]);
            TC_MPI(MPI_Error_class(classes[i], &cls));
            TC_CHECK(cls == classes[i], "Error_class(%d) = %d", classes[i], cls);
        }
        char s[MPI_MAX_ERROR_STRING];
        int len = -1, cls = -1;
        TC_MPI(MPI_Error_string(MPI_SUCCESS, s, &len));
        TC_CHECK(len >= 0, "Error_string(MPI_SUCCESS) length %d", len);
        TC_MPI(MPI_Error_class(MPI_SUCCESS, &cls));
        TC_CHECK(cls == MPI_SUCCESS, "Error_class(MPI_SUCCESS) = %d", cls);
        TC_CHECK(MPI_ERR_LASTCODE >= MPI_ERR_PENDING, "MPI_ERR_LASTCODE too small");
    }

    /* After all that, communication still works. */
    if (tc_size > 1) {
        const int right = (tc_rank + 1) % tc_size, left = (tc_rank + tc_size - 1) % tc_size;
        int v = -1;
        TC_MPI(MPI_Sendrecv(&tc_rank, 1, MPI_INT, right, 9, &v, 1, MPI_INT, left, 9, w, &st));
        TC_CHECK(v == left, "after errors: got %d from left %d", v, left);
    }
    return tc_finalize();
}
