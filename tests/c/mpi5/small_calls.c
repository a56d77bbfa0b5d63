/* ranks: 1 2
 * MPI 4.1 / 5.0 small calls: status field accessors, handle toint/fromint round trips,
 * Request_get_status_any/all/some (non-destructive), buffer flushing with per-communicator
 * buffers, ABI and hardware information, sessions with their process sets, and the error
 * classes of dynamic-process calls the launcher cannot serve. */
#include "../tc.h"

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "small_calls");
    MPI_Status st;
    TC_MPI(MPI_Status_set_source(&st, 3));
    TC_MPI(MPI_Status_set_tag(&st, 44));
    TC_MPI(MPI_Status_set_error(&st, MPI_ERR_TAG));
    int v;
    TC_MPI(MPI_Status_get_source(&st, &v));
    TC_CHECK(v == 3, "source %d", v);
    TC_MPI(MPI_Status_get_tag(&st, &v));
    TC_CHECK(v == 44, "tag %d", v);
    TC_MPI(MPI_Status_get_error(&st, &v));
    TC_CHECK(v == MPI_ERR_TAG, "error %d", v);

    MPI_Comm dup;
    TC_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    int i1 = MPI_Comm_toint(dup);
    TC_CHECK(MPI_Comm_fromint(i1) == dup, "comm toint/fromint");
    TC_CHECK(MPI_Comm_toint(dup) == i1, "comm toint is stable");
    TC_CHECK(MPI_Comm_fromint(MPI_Comm_toint(MPI_COMM_WORLD)) == MPI_COMM_WORLD, "world toint");
    TC_CHECK(MPI_Type_fromint(MPI_Type_toint(MPI_DOUBLE)) == MPI_DOUBLE, "type toint");
    MPI_Group grp;
    TC_MPI(MPI_Comm_group(dup, &grp));
    TC_CHECK(MPI_Group_fromint(MPI_Group_toint(grp)) == grp, "group toint");
    MPI_Group_free(&grp);

    /* Request_get_status_*: nothing is freed. */
    int peer = (tc_rank + 1) % tc_size, from = (tc_rank + tc_size - 1) % tc_size;
    int sbuf = tc_rank, rbuf = -1;
    MPI_Request r[3];
    TC_MPI(MPI_Irecv(&rbuf, 1, MPI_INT, from, 9, dup, &r[0]));
    r[1] = MPI_REQUEST_NULL;
    TC_MPI(MPI_Isend(&sbuf, 1, MPI_INT, peer, 9, dup, &r[2]));
    int flag = 0;
    while (!flag)
        TC_MPI(MPI_Request_get_status_all(3, r, &flag, MPI_STATUSES_IGNORE));
    TC_CHECK(r[0] != MPI_REQUEST_NULL && r[2] != MPI_REQUEST_NULL, "get_status_all freed a request");
    int idx;
    TC_MPI(MPI_Request_get_status_any(3, r, &idx, &flag, &st));
    TC_CHECK(flag && (idx == 0 || idx == 2), "get_status_any index %d flag %d", idx, flag);
    int out, idxs[3];
    MPI_Status sts[3];
    TC_MPI(MPI_Request_get_status_some(3, r, &out, idxs, sts));
    TC_CHECK(out == 2, "get_status_some outcount %d", out);
    TC_MPI(MPI_Waitall(3, r, MPI_STATUSES_IGNORE));
    TC_CHECK(rbuf == from, "received %d", rbuf);
    TC_MPI(MPI_Request_get_status_some(3, r, &out, idxs, sts));
    TC_CHECK(out == MPI_UNDEFINED, "all null: outcount %d", out);

    /* Buffers attached to a communicator. */
    static char space[4096 + MPI_BSEND_OVERHEAD];
    TC_MPI(MPI_Comm_attach_buffer(dup, space, sizeof space));
    TC_MPI(MPI_Bsend(&sbuf, 1, MPI_INT, peer, 10, dup));
    TC_MPI(MPI_Recv(&rbuf, 1, MPI_INT, from, 10, dup, MPI_STATUS_IGNORE));
    TC_MPI(MPI_Comm_flush_buffer(dup));
    MPI_Request fr;
    TC_MPI(MPI_Buffer_iflush(&fr));
    TC_MPI(MPI_Wait(&fr, MPI_STATUS_IGNORE));
    void *addr;
    int size;
    TC_MPI(MPI_Comm_detach_buffer(dup, &addr, &size));
    TC_CHECK(addr == space && size == (int)sizeof space, "detach returned %p %d", addr, size);
    TC_MPI(MPI_Buffer_flush());

    MPI_Info info;
    char val[MPI_MAX_INFO_VAL];
    TC_MPI(MPI_Abi_get_info(&info));
    TC_MPI(MPI_Info_get_string(info, "mpi_aint_size", &(int){sizeof val}, val, &flag));
    TC_CHECK(flag && atoi(val) == (int)sizeof(MPI_Aint), "mpi_aint_size %s", val);
    MPI_Info_free(&info);
    TC_MPI(MPI_Get_hw_resource_info(&info));
    MPI_Info_free(&info);

    /* Sessions next to the World Model. */
    MPI_Session s;
    TC_MPI(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s));
    int n;
    TC_MPI(MPI_Session_get_num_psets(s, MPI_INFO_NULL, &n));
    TC_CHECK(n == 2, "psets %d", n);
    char pname[64];
    int plen = 0;
    TC_MPI(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, 0, &plen, NULL));
    TC_CHECK(plen == (int)strlen("mpi://WORLD") + 1, "pset name length %d", plen);
    plen = sizeof pname;
    TC_MPI(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, 0, &plen, pname));
    TC_CHECK(strcmp(pname, "mpi://WORLD") == 0, "pset 0 %s", pname);
    TC_MPI(MPI_Session_get_pset_info(s, "mpi://WORLD", &info));
    TC_MPI(MPI_Info_get_string(info, "mpi_size", &(int){sizeof val}, val, &flag));
    TC_CHECK(flag && atoi(val) == tc_size, "mpi_size %s", val);
    MPI_Info_free(&info);
    MPI_Group wg;
    TC_MPI(MPI_Group_from_session_pset(s, "mpi://WORLD", &wg));
    MPI_Comm sc;
    TC_MPI(MPI_Comm_create_from_group(wg, "org.steadfast.test", MPI_INFO_NULL, MPI_ERRORS_RETURN, &sc));
    int sum;
    TC_MPI(MPI_Allreduce(&tc_rank, &sum, 1, MPI_INT, MPI_SUM, sc));
    TC_CHECK(sum == tc_size * (tc_size - 1) / 2, "allreduce over the session communicator %d", sum);
    MPI_Comm_free(&sc);
    MPI_Group_free(&wg);
    int cls, rc = MPI_Group_from_session_pset(s, "mpi://NOWHERE", &wg);
    MPI_Error_class(rc, &cls);
    TC_CHECK(cls == MPI_ERR_ARG, "unknown pset: class %d", cls);
    TC_MPI(MPI_Session_finalize(&s));
    TC_CHECK(s == MPI_SESSION_NULL, "session handle after finalize");

    /* Dynamic processes: proper error classes. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm parent;
    TC_MPI(MPI_Comm_get_parent(&parent));
    TC_CHECK(parent == MPI_COMM_NULL, "parent");
    MPI_Comm child;
    int errcodes[2];
    rc = MPI_Comm_spawn("true", MPI_ARGV_NULL, 2, MPI_INFO_NULL, 0, MPI_COMM_SELF, &child, errcodes);
    MPI_Error_class(rc, &cls);
    TC_CHECK(cls == MPI_ERR_SPAWN && errcodes[0] == MPI_ERR_SPAWN, "spawn: class %d", cls);
    /* Wrong arguments get their own class before that. */
    rc = MPI_Comm_spawn("true", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 1, MPI_COMM_SELF, &child, MPI_ERRCODES_IGNORE);
    MPI_Error_class(rc, &cls);
    TC_CHECK(cls == MPI_ERR_ROOT, "spawn with root 1 on MPI_COMM_SELF: class %d", cls);
    rc = MPI_Comm_spawn("true", MPI_ARGV_NULL, -1, MPI_INFO_NULL, 0, MPI_COMM_SELF, &child, MPI_ERRCODES_IGNORE);
    MPI_Error_class(rc, &cls);
    TC_CHECK(cls == MPI_ERR_ARG, "spawn of -1 processes: class %d", cls);
    char *cmds[1] = {"true"};
    int np1[1] = {1};
    MPI_Info infos[1] = {MPI_INFO_NULL};
    rc = MPI_Comm_spawn_multiple(1, cmds, MPI_ARGVS_NULL, np1, infos, 0, MPI_COMM_SELF, &child, errcodes);
    MPI_Error_class(rc, &cls);
    TC_CHECK(cls == MPI_ERR_SPAWN && errcodes[0] == MPI_ERR_SPAWN && child == MPI_COMM_NULL, "spawn_multiple: class %d", cls);
    char port[MPI_MAX_PORT_NAME];
    /* A port of another job cannot be reached (tests/c/mpi5/ports.c covers ports). */
    rc = MPI_Comm_connect("steadfast-port:another-job:0:0", MPI_INFO_NULL, 0, MPI_COMM_SELF, &child);
    MPI_Error_class(rc, &cls);
    TC_CHECK(cls == MPI_ERR_PORT, "connect to another job's port: class %d", cls);
    rc = MPI_Lookup_name("svc-never-published", MPI_INFO_NULL, port);
    MPI_Error_class(rc, &cls);
    TC_CHECK(cls == MPI_ERR_NAME, "lookup_name: class %d", cls);
    TC_MPI(MPI_Comm_disconnect(&dup));
    TC_CHECK(dup == MPI_COMM_NULL, "disconnect sets MPI_COMM_NULL");
    return tc_finalize();
}
