/* ranks: 2 4
 * Partitioned point-to-point (even ranks send to the next odd rank): partitions marked ready
 * out of order with Pready, Pready_range and Pready_list over several rounds of one
 * persistent request pair, MPI_Parrived, and argument errors. */
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
    return tc_finalize();
}
