/* status: MPI_Request_get_status (does not free the request), MPI_Get_count
 * and MPI_Get_elements(_x) including the MPI_UNDEFINED cases (a message
 * that is not a whole number of the datatype; a derived type only partly
 * filled), zero-length messages, and MPI_STATUS_IGNORE /
 * MPI_STATUSES_IGNORE accepted everywhere a status is returned.
 * ranks: 2
 * timeout: 60
 */
#include "tc.h"

static void get_status(void)
{
    /* Request_get_status on MPI_REQUEST_NULL: flag true, empty status. */
    MPI_Request rq = MPI_REQUEST_NULL;
    MPI_Status st;
    int flag = 0, cnt = -1;
    st.MPI_SOURCE = 77; st.MPI_TAG = 77;
    TC_MPI(MPI_Request_get_status(rq, &flag, &st));
    TC_MPI(MPI_Get_count(&st, MPI_BYTE, &cnt));
    TC_CHECK(flag && st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG && cnt == 0,
             "get_status(REQUEST_NULL): flag %d source %d tag %d count %d", flag,
             st.MPI_SOURCE, st.MPI_TAG, cnt);

    int data[100];
    if (tc_rank == 0) {
        for (int i = 0; i < 100; i++) data[i] = -1;
        TC_MPI(MPI_Irecv(data, 100, MPI_INT, 1, 21, MPI_COMM_WORLD, &rq));
        flag = 0;
        TC_MPI(MPI_Request_get_status(rq, &flag, &st));
        TC_CHECK(!flag, "get_status: complete before the sender was told to send");
        int go = 1;
        TC_MPI(MPI_Send(&go, 1, MPI_INT, 1, 20, MPI_COMM_WORLD));
        long polls = 0;
        while (!flag) {
            TC_MPI(MPI_Request_get_status(rq, &flag, &st));
            if (++polls > 500000000L) tc_die("Request_get_status never completed");
        }
        TC_CHECK(rq != MPI_REQUEST_NULL, "Request_get_status freed the request");
        TC_MPI(MPI_Get_count(&st, MPI_INT, &cnt));
        TC_CHECK(st.MPI_SOURCE == 1 && st.MPI_TAG == 21 && cnt == 37,
                 "get_status: source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, cnt);
        /* Calling it again is fine and still does not free. */
        TC_MPI(MPI_Request_get_status(rq, &flag, MPI_STATUS_IGNORE));
        TC_CHECK(flag && rq != MPI_REQUEST_NULL, "second get_status");
        MPI_Status st2;
        TC_MPI(MPI_Wait(&rq, &st2));
        TC_MPI(MPI_Get_count(&st2, MPI_INT, &cnt));
        TC_CHECK(rq == MPI_REQUEST_NULL && st2.MPI_SOURCE == 1 && st2.MPI_TAG == 21 && cnt == 37,
                 "Wait after get_status: source %d tag %d count %d", st2.MPI_SOURCE, st2.MPI_TAG, cnt);
        for (int i = 0; i < 37; i++)
            TC_CHECK(data[i] == i * 3 + 1, "data[%d] = %d", i, data[i]);
        TC_CHECK(data[37] == -1, "data[37] overwritten");
    } else {
        int go;
        TC_MPI(MPI_Recv(&go, 1, MPI_INT, 0, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < 37; i++) data[i] = i * 3 + 1;
        TC_MPI(MPI_Send(data, 37, MPI_INT, 0, 21, MPI_COMM_WORLD));
    }
}

static void counts(void)
{
    MPI_Datatype pair;
    TC_MPI(MPI_Type_contiguous(2, MPI_INT, &pair));
    TC_MPI(MPI_Type_commit(&pair));
    if (tc_rank == 1) {
        char bytes[7] = { 1, 2, 3, 4, 5, 6, 7 };
        int ints[3] = { 10, 20, 30 };
        TC_MPI(MPI_Send(bytes, 7, MPI_BYTE, 0, 30, MPI_COMM_WORLD));
        TC_MPI(MPI_Send(ints, 3, MPI_INT, 0, 31, MPI_COMM_WORLD));
        TC_MPI(MPI_Send(ints, 0, MPI_INT, 0, 32, MPI_COMM_WORLD));
        TC_MPI(MPI_Send(ints, 2, MPI_INT, 0, 33, MPI_COMM_WORLD));
    } else {
        MPI_Status st;
        int cnt, el;
        MPI_Count elx;
        char buf[64];
        int ib[16];

        /* 7 bytes: not a whole number of ints. */
        TC_MPI(MPI_Recv(buf, 64, MPI_BYTE, 1, 30, MPI_COMM_WORLD, &st));
        TC_MPI(MPI_Get_count(&st, MPI_BYTE, &cnt));
        TC_CHECK(cnt == 7, "7 bytes: Get_count(BYTE) %d", cnt);
        TC_MPI(MPI_Get_count(&st, MPI_INT, &cnt));
        TC_CHECK(cnt == MPI_UNDEFINED, "7 bytes: Get_count(INT) %d, want MPI_UNDEFINED", cnt);
        TC_MPI(MPI_Get_elements(&st, MPI_INT, &el));
        TC_CHECK(el == MPI_UNDEFINED, "7 bytes: Get_elements(INT) %d, want MPI_UNDEFINED", el);
        TC_MPI(MPI_Get_elements_x(&st, MPI_BYTE, &elx));
        TC_CHECK(elx == 7, "7 bytes: Get_elements_x(BYTE) %lld", (long long)elx);
        for (int i = 0; i < 7; i++)
            TC_CHECK(buf[i] == i + 1, "7 bytes: byte %d = %d", i, buf[i]);

        /* 3 ints received as pairs: 1.5 pairs. */
        TC_MPI(MPI_Recv(ib, 8, pair, 1, 31, MPI_COMM_WORLD, &st));
        TC_MPI(MPI_Get_count(&st, pair, &cnt));
        TC_CHECK(cnt == MPI_UNDEFINED, "3 ints: Get_count(pair) %d, want MPI_UNDEFINED", cnt);
        TC_MPI(MPI_Get_elements(&st, pair, &el));
        TC_CHECK(el == 3, "3 ints: Get_elements(pair) %d, want 3", el);
        TC_MPI(MPI_Get_elements_x(&st, pair, &elx));
        TC_CHECK(elx == 3, "3 ints: Get_elements_x(pair) %lld", (long long)elx);
        TC_MPI(MPI_Get_count(&st, MPI_INT, &cnt));
        TC_CHECK(cnt == 3, "3 ints: Get_count(INT) %d", cnt);
        TC_CHECK(ib[0] == 10 && ib[1] == 20 && ib[2] == 30, "3 ints: data %d %d %d", ib[0], ib[1], ib[2]);

        /* Zero-length. */
        TC_MPI(MPI_Recv(ib, 8, pair, 1, 32, MPI_COMM_WORLD, &st));
        TC_MPI(MPI_Get_count(&st, pair, &cnt));
        TC_MPI(MPI_Get_elements(&st, pair, &el));
        TC_CHECK(cnt == 0 && el == 0, "empty: Get_count %d Get_elements %d", cnt, el);

        /* Whole pair. */
        TC_MPI(MPI_Recv(ib, 8, pair, 1, 33, MPI_COMM_WORLD, &st));
        TC_MPI(MPI_Get_count(&st, pair, &cnt));
        TC_MPI(MPI_Get_elements(&st, pair, &el));
        TC_CHECK(cnt == 1 && el == 2, "one pair: Get_count %d Get_elements %d", cnt, el);
    }
    TC_MPI(MPI_Type_free(&pair));
    TC_CHECK(pair == MPI_DATATYPE_NULL, "Type_free did not reset the handle");
}

static void ignore(void)
{
    const int peer = 1 - tc_rank;
    int s[4] = { 1, 2, 3, 4 }, r[4] = { 0 };
    MPI_Request rq[4];
    int flag = 0, outcount = 0, idx[4], index;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 4; i++) r[i] = 0;
        TC_MPI(MPI_Irecv(&r[0], 1, MPI_INT, peer, 40, MPI_COMM_WORLD, &rq[0]));
        TC_MPI(MPI_Irecv(&r[1], 1, MPI_INT, peer, 41, MPI_COMM_WORLD, &rq[1]));
        TC_MPI(MPI_Isend(&s[0], 1, MPI_INT, peer, 40, MPI_COMM_WORLD, &rq[2]));
        TC_MPI(MPI_Isend(&s[1], 1, MPI_INT, peer, 41, MPI_COMM_WORLD, &rq[3]));
        switch (round) {
        case 0: TC_MPI(MPI_Waitall(4, rq, MPI_STATUSES_IGNORE)); break;
        case 1:
            flag = 0;
            while (!flag) TC_MPI(MPI_Testall(4, rq, &flag, MPI_STATUSES_IGNORE));
            break;
        case 2: {
            int left = 4;
            while (left > 0) {
                TC_MPI(MPI_Waitsome(4, rq, &outcount, idx, MPI_STATUSES_IGNORE));
                left -= outcount;
            }
            break;
        }
        default:
            for (int k = 0; k < 4; k++) {
                TC_MPI(MPI_Waitany(4, rq, &index, MPI_STATUS_IGNORE));
                TC_CHECK(index != MPI_UNDEFINED, "Waitany returned MPI_UNDEFINED early");
            }
            break;
        }
        TC_CHECK(r[0] == 1 && r[1] == 2, "STATUSES_IGNORE round %d: got %d %d", round, r[0], r[1]);
    }
    /* Blocking calls with MPI_STATUS_IGNORE. */
    TC_MPI(MPI_Sendrecv(&s[2], 1, MPI_INT, peer, 42, &r[2], 1, MPI_INT, peer, 42,
                        MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    TC_CHECK(r[2] == 3, "Sendrecv STATUS_IGNORE: %d", r[2]);
    if (tc_rank == 0) {
        TC_MPI(MPI_Send(&s[3], 1, MPI_INT, 1, 43, MPI_COMM_WORLD));
    } else {
        TC_MPI(MPI_Probe(0, 43, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        TC_MPI(MPI_Recv(&r[3], 1, MPI_INT, 0, 43, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        TC_CHECK(r[3] == 4, "Recv STATUS_IGNORE: %d", r[3]);
    }
    TC_MPI(MPI_Irecv(&r[0], 1, MPI_INT, peer, 44, MPI_COMM_WORLD, &rq[0]));
    TC_MPI(MPI_Send(&s[0], 1, MPI_INT, peer, 44, MPI_COMM_WORLD));
    flag = 0;
    while (!flag)
        TC_MPI(MPI_Test(&rq[0], &flag, MPI_STATUS_IGNORE));
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "status");
    if (tc_size != 2)
        tc_die("needs exactly 2 ranks");
    get_status();
    tc_sync(MPI_COMM_WORLD);
    counts();
    tc_sync(MPI_COMM_WORLD);
    ignore();
    return tc_finalize();
}
