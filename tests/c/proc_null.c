/* proc_null: every point-to-point call with MPI_PROC_NULL as peer succeeds
 * at once; receives leave the buffer alone and return source
 * MPI_PROC_NULL, tag MPI_ANY_TAG and count 0.
 * ranks: 1 2
 * timeout: 30
 */
#include "tc.h"

static void check_null_status(const MPI_Status *st, const char *what)
{
    int cnt = -1, el = -1;
    TC_MPI(MPI_Get_count(st, MPI_INT, &cnt));
    TC_MPI(MPI_Get_elements(st, MPI_INT, &el));
    TC_CHECK(st->MPI_SOURCE == MPI_PROC_NULL, "%s: source %d, want MPI_PROC_NULL", what, st->MPI_SOURCE);
    TC_CHECK(st->MPI_TAG == MPI_ANY_TAG, "%s: tag %d, want MPI_ANY_TAG", what, st->MPI_TAG);
    TC_CHECK(cnt == 0 && el == 0, "%s: count %d elements %d, want 0", what, cnt, el);
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "proc_null");
    int buf[8], sbuf[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    MPI_Status st;
    MPI_Request rq[4];
    int flag = 0;

    for (int i = 0; i < 8; i++) buf[i] = 99;
    TC_MPI(MPI_Send(sbuf, 8, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    TC_MPI(MPI_Ssend(sbuf, 8, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    TC_MPI(MPI_Rsend(sbuf, 8, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    TC_MPI(MPI_Bsend(sbuf, 8, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));

    st.MPI_SOURCE = 5; st.MPI_TAG = 5;
    TC_MPI(MPI_Recv(buf, 8, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st));
    check_null_status(&st, "Recv");
    /* Tag MPI_ANY_TAG is also allowed with MPI_PROC_NULL. */
    TC_MPI(MPI_Recv(buf, 8, MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    check_null_status(&st, "Recv any tag");

    TC_MPI(MPI_Irecv(buf, 8, MPI_INT, MPI_PROC_NULL, 2, MPI_COMM_WORLD, &rq[0]));
    TC_MPI(MPI_Isend(sbuf, 8, MPI_INT, MPI_PROC_NULL, 2, MPI_COMM_WORLD, &rq[1]));
    TC_MPI(MPI_Issend(sbuf, 8, MPI_INT, MPI_PROC_NULL, 2, MPI_COMM_WORLD, &rq[2]));
    TC_MPI(MPI_Irsend(sbuf, 8, MPI_INT, MPI_PROC_NULL, 2, MPI_COMM_WORLD, &rq[3]));
    /* They complete without any partner: the first Test must succeed. */
    TC_MPI(MPI_Test(&rq[0], &flag, &st));
    TC_CHECK(flag, "Irecv(PROC_NULL) not complete at first Test");
    if (flag)
        check_null_status(&st, "Irecv");
    flag = 0;
    TC_MPI(MPI_Testall(3, &rq[1], &flag, MPI_STATUSES_IGNORE));
    TC_CHECK(flag, "Isend/Issend/Irsend(PROC_NULL) not complete at first Testall");
    if (!flag)
        TC_MPI(MPI_Waitall(3, &rq[1], MPI_STATUSES_IGNORE));

    TC_MPI(MPI_Sendrecv(sbuf, 8, MPI_INT, MPI_PROC_NULL, 3, buf, 8, MPI_INT, MPI_PROC_NULL, 3,
                        MPI_COMM_WORLD, &st));
    check_null_status(&st, "Sendrecv");
    TC_MPI(MPI_Sendrecv_replace(buf, 8, MPI_INT, MPI_PROC_NULL, 3, MPI_PROC_NULL, 3,
                                MPI_COMM_WORLD, &st));
    check_null_status(&st, "Sendrecv_replace");

    /* Persistent requests to and from PROC_NULL. */
    TC_MPI(MPI_Recv_init(buf, 8, MPI_INT, MPI_PROC_NULL, 4, MPI_COMM_WORLD, &rq[0]));
    TC_MPI(MPI_Send_init(sbuf, 8, MPI_INT, MPI_PROC_NULL, 4, MPI_COMM_WORLD, &rq[1]));
    for (int it = 0; it < 3; it++) {
        MPI_Status sts[2];
        TC_MPI(MPI_Startall(2, rq));
        TC_MPI(MPI_Waitall(2, rq, sts));
        check_null_status(&sts[0], "persistent Recv_init");
    }
    TC_MPI(MPI_Request_free(&rq[0]));
    TC_MPI(MPI_Request_free(&rq[1]));

    for (int i = 0; i < 8; i++)
        TC_CHECK(buf[i] == 99, "receive from MPI_PROC_NULL wrote buf[%d] = %d", i, buf[i]);
    return tc_finalize();
}
