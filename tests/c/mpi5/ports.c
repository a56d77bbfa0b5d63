/* ranks: 2 4
 * Dynamic processes within one job: rank 0 alone (on MPI_COMM_SELF) accepts on a port and
 * the other ranks connect as one group, then the roles turn round (rank 1 opens the port,
 * its group accepts); a message goes through each intercommunicator both ways and its
 * sizes are checked. Then the port is published under a name, looked up and unpublished,
 * and ranks 0 and 1 join over a TCP socket on the loopback interface (MPI_Comm_join). A
 * connect to a bogus port name fails on every rank. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include "../tc.h"

static void check_inter(MPI_Comm inter, int remote_size, int alone)
{
    int rs = -1, ls = -1, flag = 0;
    MPI_Comm_test_inter(inter, &flag);
    MPI_Comm_remote_size(inter, &rs);
    MPI_Comm_size(inter, &ls);
    TC_CHECK(flag && rs == remote_size && ls == (alone ? 1 : tc_size - 1), "inter %d remote %d local %d", flag, rs, ls);
    /* The lone side sends its world rank to every remote rank; they answer with theirs. */
    if (alone) {
        for (int r = 0; r < rs; r++) {
            int x = tc_rank, y = -1;
            TC_MPI(MPI_Sendrecv(&x, 1, MPI_INT, r, 7, &y, 1, MPI_INT, r, 8, inter, MPI_STATUS_IGNORE));
            TC_CHECK(y >= 0 && y < tc_size && y != tc_rank, "answer %d from remote %d", y, r);
        }
    } else {
        int y = -1, me;
        MPI_Comm_rank(inter, &me);
        TC_MPI(MPI_Recv(&y, 1, MPI_INT, 0, 7, inter, MPI_STATUS_IGNORE));
        TC_MPI(MPI_Send(&tc_rank, 1, MPI_INT, 0, 8, inter));
        TC_CHECK(y >= 0 && y < tc_size, "lone side's rank %d", y);
    }
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "ports");
    char port[MPI_MAX_PORT_NAME] = "";
    MPI_Comm rest, inter;
    TC_MPI(MPI_Comm_split(MPI_COMM_WORLD, tc_rank == 0, tc_rank, &rest));

    /* Rank 0 accepts, the others connect. */
    if (tc_rank == 0) {
        TC_MPI(MPI_Open_port(MPI_INFO_NULL, port));
        TC_MPI(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 1, 1, MPI_COMM_WORLD));
        TC_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter));
        check_inter(inter, tc_size - 1, 1);
        TC_MPI(MPI_Close_port(port));
    } else {
        if (tc_rank == 1)
            TC_MPI(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        TC_MPI(MPI_Comm_connect(port, MPI_INFO_NULL, 0, rest, &inter));
        check_inter(inter, 1, 0);
    }
    TC_MPI(MPI_Comm_disconnect(&inter));

    /* Rank 1 opens, its group accepts, rank 0 connects; the port travels by name. */
    if (tc_rank == 1) {
        TC_MPI(MPI_Open_port(MPI_INFO_NULL, port));
        TC_MPI(MPI_Publish_name("ports-test", MPI_INFO_NULL, port));
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int rc = MPI_Publish_name("ports-test", MPI_INFO_NULL, port), cls = -1;
        MPI_Error_class(rc, &cls);
        TC_CHECK(cls == MPI_ERR_SERVICE, "a name published twice: class %d", cls);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (tc_rank == 0) {
        TC_MPI(MPI_Lookup_name("ports-test", MPI_INFO_NULL, port));
        TC_MPI(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter));
        check_inter(inter, tc_size - 1, 1);
    } else {
        TC_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, rest, &inter));
        check_inter(inter, 1, 0);
    }
    TC_MPI(MPI_Comm_free(&inter));
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (tc_rank == 1) {
        TC_MPI(MPI_Unpublish_name("ports-test", MPI_INFO_NULL, port));
        TC_MPI(MPI_Close_port(port));
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int rc = MPI_Lookup_name("ports-test", MPI_INFO_NULL, port), cls = -1;
        MPI_Error_class(rc, &cls);
        TC_CHECK(cls == MPI_ERR_NAME, "lookup after unpublish: class %d", cls);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }

    /* MPI_Comm_join over a loopback TCP connection between ranks 0 and 1. */
    if (tc_rank < 2) {
        int fd = -1;
        if (tc_rank == 0) {
            int ls = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a = {0};
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            socklen_t len = sizeof a;
            if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 1) != 0 ||
                getsockname(ls, (struct sockaddr *)&a, &len) != 0)
                tc_die("listening socket");
            int p = ntohs(a.sin_port);
            TC_MPI(MPI_Send(&p, 1, MPI_INT, 1, 2, MPI_COMM_WORLD));
            fd = accept(ls, NULL, NULL);
            close(ls);
        } else {
            int p = 0;
            TC_MPI(MPI_Recv(&p, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            fd = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a = {0};
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            a.sin_port = htons((unsigned short)p);
            if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
                tc_die("connecting socket");
        }
        if (fd < 0)
            tc_die("socket");
        TC_MPI(MPI_Comm_join(fd, &inter));
        int rs = -1, x = tc_rank, y = -1;
        MPI_Comm_remote_size(inter, &rs);
        TC_CHECK(rs == 1, "join: remote size %d", rs);
        TC_MPI(MPI_Sendrecv(&x, 1, MPI_INT, 0, 3, &y, 1, MPI_INT, 0, 3, inter, MPI_STATUS_IGNORE));
        TC_CHECK(y == 1 - tc_rank, "join: peer says %d", y);
        TC_MPI(MPI_Comm_disconnect(&inter));
        close(fd);
    }
    TC_MPI(MPI_Comm_free(&rest));

    /* A port name that is not ours (MPICH's errors/spawn/badport): the root's connect fails
     * with MPI_ERR_PORT and the other ranks fail too instead of waiting for it, every rank
     * left with MPI_COMM_NULL. */
    {
        MPI_Comm bad = MPI_COMM_WORLD;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int rc = MPI_Comm_connect((char *)"myhost:27", MPI_INFO_NULL, 0, MPI_COMM_WORLD, &bad);
        int cls = -1;
        MPI_Error_class(rc, &cls);
        TC_CHECK(cls == MPI_ERR_PORT, "connect to a bogus port: class %d, want MPI_ERR_PORT", cls);
        TC_CHECK(bad == MPI_COMM_NULL, "a failed connect left a communicator");
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }
    return tc_finalize();
}
