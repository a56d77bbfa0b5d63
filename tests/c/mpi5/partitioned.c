/* ranks: 2 4
 * Partitioned point-to-point (even ranks send to the next odd rank): partitions marked ready
 * out of order with Pready, Pready_range and Pready_list over several rounds of one
 * persistent request pair, MPI_Parrived, and argument errors; partitioned messages do not
 * match ordinary (wildcard) receives. */
#include "../tc.h"

#define PARTS 8
#define COUNT 16

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "partitioned");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int buf[PARTS * COUNT];
    MPI_Request req;
    int peer = tc_rank ^ 1;
    if (peer >= tc_size)
        return tc_finalize();
    int sender = tc_rank % 2 == 0;
    if (sender)
        TC_MPI(MPI_Psend_init(buf, PARTS, COUNT, MPI_INT, peer, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &req));
    else
        TC_MPI(MPI_Precv_init(buf, PARTS, COUNT, MPI_INT, peer, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &req));
    for (int round = 0; round < 3; round++) {
        if (!sender)
            for (int i = 0; i < PARTS * COUNT; i++)
                buf[i] = -1; /* before MPI_Start: the message may land at once */
        TC_MPI(MPI_Start(&req));
        if (sender) {
            for (int i = 0; i < PARTS * COUNT; i++)
                buf[i] = round * 100000 + i;
            int cls, rc = MPI_Pready(PARTS, req);
            MPI_Error_class(rc, &cls);
            TC_CHECK(cls == MPI_ERR_ARG, "Pready out of range: class %d", cls);
            TC_MPI(MPI_Pready(7, req));
            TC_MPI(MPI_Pready_range(2, 4, req));
            int list[] = {0, 6, 1};
            TC_MPI(MPI_Pready_list(3, list, req));
            TC_MPI(MPI_Pready(5, req));
        } else {
            int flag = 0;
            while (!flag)
                TC_MPI(MPI_Parrived(req, PARTS - 1, &flag));
        }
        MPI_Status st;
        TC_MPI(MPI_Wait(&req, &st));
        if (!sender)
            for (int i = 0; i < PARTS * COUNT; i++)
                TC_CHECK(buf[i] == round * 100000 + i, "round %d: buf[%d] = %d", round, i, buf[i]);
    }
    TC_MPI(MPI_Request_free(&req));

    /* Partitioned messages never match ordinary receives: the sender's partitioned message
     * leaves before an ordinary one with the same tag, and the receiver's wildcard receive
     * still gets the ordinary one (and a count-0 MPI_DATATYPE_NULL handshake as in MPICH's
     * part/nonblocking_pready works beside it). */
    int one = 0, got = -1;
    if (sender) {
        TC_MPI(MPI_Psend_init(buf, 1, 1, MPI_INT, peer, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &req));
        TC_MPI(MPI_Start(&req));
        buf[0] = 4242;
        TC_MPI(MPI_Pready(0, req));
        one = 99;
        TC_MPI(MPI_Send(&one, 1, MPI_INT, peer, 5, MPI_COMM_WORLD));
        TC_MPI(MPI_Send(NULL, 0, MPI_DATATYPE_NULL, peer, 5, MPI_COMM_WORLD));
    } else {
        MPI_Status st;
        TC_MPI(MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        TC_CHECK(got == 99, "an ordinary wildcard receive got %d, not the ordinary message", got);
        TC_MPI(MPI_Recv(NULL, 0, MPI_DATATYPE_NULL, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        TC_MPI(MPI_Precv_init(buf, 1, 1, MPI_INT, peer, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &req));
        buf[0] = -1;
        TC_MPI(MPI_Start(&req));
    }
    TC_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    if (!sender)
        TC_CHECK(buf[0] == 4242, "the partitioned receive got %d", buf[0]);
    TC_MPI(MPI_Request_free(&req));
    return tc_finalize();
}
