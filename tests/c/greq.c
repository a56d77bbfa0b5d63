/* greq: generalized requests. Grequest_start / Grequest_complete; Test and
 * Request_get_status say "not complete" until Grequest_complete; the status
 * comes from query_fn (which calls MPI); free_fn runs exactly once when the
 * wait or test frees the request, or at completion for a request freed
 * early; cancel_fn gets the completion state; Waitall mixes generalized and
 * point-to-point requests; error codes of query_fn and free_fn reach the
 * caller; completing twice is MPI_ERR_REQUEST.
 * ranks: 1 2
 * timeout: 30
 */
#include "tc.h"

struct state {
    int queries, frees, cancels, cancel_complete;
    int query_rc, free_rc, mark_cancelled;
    int source, tag, bytes;
};

static int query_fn(void *extra, MPI_Status *st)
{
    struct state *s = extra;
    s->queries++;
    st->MPI_SOURCE = s->source;
    st->MPI_TAG = s->tag;
    /* These are MPI calls: the library must not hold its lock here. */
    if (MPI_Status_set_elements(st, MPI_BYTE, s->bytes) != MPI_SUCCESS)
        return MPI_ERR_INTERN;
    if (MPI_Status_set_cancelled(st, s->mark_cancelled) != MPI_SUCCESS)
        return MPI_ERR_INTERN;
    return s->query_rc;
}

static int free_fn(void *extra)
{
    struct state *s = extra;
    int rank = -1;
    s->frees++;
    /* Callbacks may call MPI. */
    if (MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS || rank != tc_rank)
        return MPI_ERR_INTERN;
    return s->free_rc;
}

static int cancel_fn(void *extra, int complete)
{
    struct state *s = extra;
    int rank = -1;
    if (MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS || rank != tc_rank)
        return MPI_ERR_INTERN;
    s->cancels++;
    s->cancel_complete = complete;
    return MPI_SUCCESS;
}

static int eclass(int rc)
{
    int c = -1;
    MPI_Error_class(rc, &c);
    return c;
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "greq");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Request r;
    MPI_Status st;
    int flag = -1, cnt = -1;

    /* Pending until completed; status from query_fn; free_fn once, by the wait. */
    {
        struct state s = { .source = 3, .tag = 77, .bytes = 12 };
        TC_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &s, &r));
        TC_MPI(MPI_Test(&r, &flag, &st));
        TC_CHECK(flag == 0 && r != MPI_REQUEST_NULL, "pending generalized request tested complete");
        TC_MPI(MPI_Request_get_status(r, &flag, &st));
        TC_CHECK(flag == 0, "Request_get_status: pending request complete");
        TC_MPI(MPI_Grequest_complete(r));
        TC_CHECK(s.frees == 0, "free_fn ran before the request was freed");
        TC_MPI(MPI_Request_get_status(r, &flag, &st));
        TC_CHECK(flag == 1 && r != MPI_REQUEST_NULL && s.frees == 0, "Request_get_status after completion");
        TC_MPI(MPI_Wait(&r, &st));
        TC_MPI(MPI_Get_count(&st, MPI_BYTE, &cnt));
        TC_CHECK(r == MPI_REQUEST_NULL && st.MPI_SOURCE == 3 && st.MPI_TAG == 77 && cnt == 12,
                 "status: source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, cnt);
        TC_CHECK(s.queries >= 1 && s.frees == 1 && s.cancels == 0, "queries %d frees %d cancels %d",
                 s.queries, s.frees, s.cancels);
    }

    /* Freed before completion: free_fn runs at completion, once. */
    {
        struct state s = { 0 };
        TC_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &s, &r));
        TC_MPI(MPI_Request_free(&r));
        TC_CHECK(r == MPI_REQUEST_NULL && s.frees == 0, "free_fn ran for a pending request");
    }
    {
        struct state s = { 0 };
        MPI_Request keep;
        TC_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &s, &r));
        keep = r;
        TC_MPI(MPI_Request_free(&r));
        TC_MPI(MPI_Grequest_complete(keep));
        TC_CHECK(s.frees == 1, "early-freed request: free_fn ran %d times", s.frees);
    }

    /* Cancel: cancel_fn sees whether it was complete; query_fn reports the outcome. */
    {
        struct state s = { .mark_cancelled = 1 };
        TC_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &s, &r));
        TC_MPI(MPI_Cancel(&r));
        TC_CHECK(s.cancels == 1 && s.cancel_complete == 0, "cancel_fn: %d calls, complete %d", s.cancels,
                 s.cancel_complete);
        TC_MPI(MPI_Grequest_complete(r));
        TC_MPI(MPI_Cancel(&r));
        TC_CHECK(s.cancels == 2 && s.cancel_complete == 1, "cancel_fn after completion: complete %d",
                 s.cancel_complete);
        TC_MPI(MPI_Wait(&r, &st));
        TC_MPI(MPI_Test_cancelled(&st, &flag));
        TC_CHECK(flag == 1 && s.frees == 1, "cancelled %d frees %d", flag, s.frees);
    }

    /* Waitall with a generalized request between two point-to-point ones. */
    {
        struct state s = { .source = 0, .tag = 5, .bytes = 4 };
        int out = 1234 + tc_rank, in = 0;
        MPI_Request rs[3];
        MPI_Status sts[3];
        TC_MPI(MPI_Irecv(&in, 1, MPI_INT, 0, 9, MPI_COMM_SELF, &rs[0]));
        TC_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &s, &rs[1]));
        TC_MPI(MPI_Isend(&out, 1, MPI_INT, 0, 9, MPI_COMM_SELF, &rs[2]));
        TC_MPI(MPI_Testall(3, rs, &flag, sts));
        TC_CHECK(flag == 0 && s.frees == 0, "Testall complete with a pending generalized request");
        TC_MPI(MPI_Grequest_complete(rs[1]));
        TC_MPI(MPI_Waitall(3, rs, sts));
        TC_CHECK(in == out && sts[1].MPI_TAG == 5 && s.frees == 1 && rs[1] == MPI_REQUEST_NULL,
                 "Waitall: in %d tag %d frees %d", in, sts[1].MPI_TAG, s.frees);
    }

    /* Errors: query_fn's code through the wait, free_fn's code, double completion. */
    {
        struct state s = { .query_rc = MPI_ERR_OTHER };
        TC_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &s, &r));
        TC_MPI(MPI_Grequest_complete(r));
        int rc = MPI_Grequest_complete(r);
        TC_CHECK(eclass(rc) == MPI_ERR_REQUEST, "second Grequest_complete: class %d", eclass(rc));
        rc = MPI_Wait(&r, &st);
        TC_CHECK(eclass(rc) == MPI_ERR_OTHER && s.frees == 1, "query_fn error: class %d frees %d", eclass(rc),
                 s.frees);
    }
    {
        struct state s = { .free_rc = MPI_ERR_ARG };
        TC_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &s, &r));
        TC_MPI(MPI_Grequest_complete(r));
        int rc = MPI_Test(&r, &flag, &st);
        TC_CHECK(eclass(rc) == MPI_ERR_ARG && s.frees == 1, "free_fn error: class %d", eclass(rc));
    }
    {
        int rc = MPI_Grequest_start(query_fn, free_fn, cancel_fn, NULL, NULL);
        TC_CHECK(eclass(rc) == MPI_ERR_ARG, "NULL request pointer: class %d", eclass(rc));
    }

    return tc_finalize();
}
