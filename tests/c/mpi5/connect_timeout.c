/* ranks: 3
 * timeout: 60
 * MPI_Comm_connect gives up on a port nobody accepts on (the standard's implementation-defined
 * time-out): with the info key "timeout" of 1 s rank 1's connect fails with MPI_ERR_PORT in
 * about a second and leaves MPI_COMM_NULL. Its request is withdrawn: when rank 0 then
 * accepts on the same port and rank 2 connects, rank 0 meets rank 2, not rank 1's stale
 * request (it would wait for rank 1 forever). A malformed time-out is MPI_ERR_INFO_VALUE.
 */
#include "../tc.h"

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "connect_timeout");
    char port[MPI_MAX_PORT_NAME] = "";
    if (tc_rank == 0)
        TC_MPI(MPI_Open_port(MPI_INFO_NULL, port));
    TC_MPI(MPI_Bcast(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, MPI_COMM_WORLD));
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);

    if (tc_rank == 1) {
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "timeout", "1");
        MPI_Comm inter = MPI_COMM_WORLD;
        double t0 = MPI_Wtime();
        int rc = MPI_Comm_connect(port, info, 0, MPI_COMM_SELF, &inter);
        double took = MPI_Wtime() - t0;
        int cls = -1;
        MPI_Error_class(rc, &cls);
        TC_CHECK(cls == MPI_ERR_PORT, "connect without accept: class %d, expected MPI_ERR_PORT", cls);
        TC_CHECK(inter == MPI_COMM_NULL, "a failed connect leaves MPI_COMM_NULL");
        TC_CHECK(took > 0.5 && took < 20, "the 1 s time-out took %.2f s", took);
        MPI_Info_set(info, "timeout", "soon");
        rc = MPI_Comm_connect(port, info, 0, MPI_COMM_SELF, &inter);
        MPI_Error_class(rc, &cls);
        TC_CHECK(cls == MPI_ERR_INFO_VALUE, "timeout = soon: class %d, expected MPI_ERR_INFO_VALUE", cls);
        MPI_Info_free(&info);
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));

    if (tc_rank == 0 || tc_rank == 2) {
        MPI_Comm inter;
        if (tc_rank == 0)
            TC_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter));
        else
            TC_MPI(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter));
        int mine = tc_rank, theirs = -1;
        TC_MPI(MPI_Sendrecv(&mine, 1, MPI_INT, 0, 3, &theirs, 1, MPI_INT, 0, 3, inter, MPI_STATUS_IGNORE));
        TC_CHECK(theirs == 2 - tc_rank, "rank %d met world rank %d", tc_rank, theirs);
        TC_MPI(MPI_Comm_disconnect(&inter));
    }
    if (tc_rank == 0)
        TC_MPI(MPI_Close_port(port));
    return tc_finalize();
}
