/* ranks: 2
 * MPI_T performance variables (the path counters): found by index and by name, counters of
 * MPI_UNSIGNED_LONG_LONG; a started handle counts the bytes and packets of messages sent in
 * between (at least what was sent), a stopped one does not move, reset and readreset start
 * from 0, MPI_T_PVAR_ALL_HANDLES starts and stops every handle of a session, handles of one
 * session are refused in another, writes are refused, and the per-path variables add up to
 * the total. */
#include "../tc.h"

#define N 10
#define BYTES 4096

static int pvar(const char *name)
{
    int i = -1;
    TC_MPI(MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &i));
    return i;
}

static void traffic(int rounds)
{
    static char buf[BYTES];
    /* Both sides have started or stopped their handles before anything is sent (a path
     * counts a packet when it takes it in, which may be in any call). */
    tc_sync(MPI_COMM_WORLD);
    for (int i = 0; i < rounds; i++) {
        if (tc_rank == 0)
            TC_MPI(MPI_Send(buf, BYTES, MPI_CHAR, 1, 5, MPI_COMM_WORLD));
        else
            TC_MPI(MPI_Recv(buf, BYTES, MPI_CHAR, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
    /* Both sides done before counting again. */
    tc_sync(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    int provided, n;
    TC_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    tc_init(&argc, &argv, "pvars");
    TC_MPI(MPI_T_pvar_get_num(&n));
    TC_CHECK(n >= 18, "%d performance variables", n);
    /* Every variable describes itself and is found again by its name. */
    for (int i = 0; i < n; i++) {
        char name[128], desc[256];
        int name_len = sizeof name, desc_len = sizeof desc, verb, cls, bind, ro, cont, atomic, j = -1;
        MPI_Datatype dt;
        MPI_T_enum en;
        TC_MPI(MPI_T_pvar_get_info(i, name, &name_len, &verb, &cls, &dt, &en, desc, &desc_len, &bind, &ro, &cont, &atomic));
        TC_CHECK(cls == MPI_T_PVAR_CLASS_COUNTER && dt == MPI_UNSIGNED_LONG_LONG && bind == MPI_T_BIND_NO_OBJECT && ro && !cont,
                 "pvar %d (%s) info", i, name);
        TC_MPI(MPI_T_pvar_get_index(name, cls, &j));
        TC_CHECK(i == j, "pvar %s: index %d, found %d", name, i, j);
    }
    int idx;
    TC_CHECK(MPI_T_pvar_get_index("steadfast_no_such_counter", MPI_T_PVAR_CLASS_COUNTER, &idx) == MPI_T_ERR_INVALID_NAME, "unknown name");
    TC_CHECK(MPI_T_pvar_get_index("steadfast_bytes_sent", MPI_T_PVAR_CLASS_TIMER, &idx) == MPI_T_ERR_INVALID_NAME, "wrong class");
    int i_sent = pvar("steadfast_bytes_sent"), i_recv = pvar("steadfast_bytes_received");
    int i_pk = pvar(tc_rank == 0 ? "steadfast_packets_sent" : "steadfast_packets_received");
    int i_crc = pvar("steadfast_corrupt_detected");

    MPI_T_pvar_session s, other;
    MPI_T_pvar_handle hb, hp, hc, hpath[3];
    int count;
    TC_MPI(MPI_T_pvar_session_create(&s));
    TC_MPI(MPI_T_pvar_session_create(&other));
    TC_MPI(MPI_T_pvar_handle_alloc(s, tc_rank == 0 ? i_sent : i_recv, NULL, &hb, &count));
    TC_CHECK(count == 1, "count %d", count);
    TC_MPI(MPI_T_pvar_handle_alloc(s, i_pk, NULL, &hp, &count));
    TC_MPI(MPI_T_pvar_handle_alloc(s, i_crc, NULL, &hc, &count));
    const char *paths[3] = {"shm", "tcp", "udp"};
    for (int k = 0; k < 3; k++) {
        char nm[64];
        snprintf(nm, sizeof nm, "steadfast_%s_%s", paths[k], tc_rank == 0 ? "bytes_sent" : "bytes_received");
        TC_MPI(MPI_T_pvar_handle_alloc(s, pvar(nm), NULL, &hpath[k], &count));
    }
    unsigned long long v = 1, pk = 0, crc = 1;

    /* Not started: nothing counted. */
    traffic(2);
    TC_MPI(MPI_T_pvar_read(s, hb, &v));
    TC_CHECK(v == 0, "handle never started reads %llu", v);

    TC_MPI(MPI_T_pvar_start(s, MPI_T_PVAR_ALL_HANDLES));
    traffic(N);
    TC_MPI(MPI_T_pvar_read(s, hb, &v));
    TC_MPI(MPI_T_pvar_read(s, hp, &pk));
    TC_MPI(MPI_T_pvar_read(s, hc, &crc));
    TC_CHECK(v >= (unsigned long long)N * BYTES && v < (unsigned long long)N * BYTES * 4, "%d messages of %d bytes counted as %llu bytes", N, BYTES, v);
    TC_CHECK(pk >= N, "%llu packets for %d messages", pk, N);
    TC_CHECK(crc == 0, "%llu CRC failures on a clean run", crc);
    unsigned long long sum = 0;
    for (int k = 0; k < 3; k++) {
        unsigned long long x = 0;
        TC_MPI(MPI_T_pvar_read(s, hpath[k], &x));
        sum += x;
    }
    TC_CHECK(sum == v, "per-path bytes add up to %llu, total %llu", sum, v);

    /* Stopped: frozen. */
    TC_MPI(MPI_T_pvar_stop(s, MPI_T_PVAR_ALL_HANDLES));
    unsigned long long frozen = 0;
    traffic(N);
    TC_MPI(MPI_T_pvar_read(s, hb, &frozen));
    TC_CHECK(frozen == v, "stopped handle moved from %llu to %llu", v, frozen);

    /* Restarted: goes on from where it stopped; readreset gives that and starts from 0. */
    TC_MPI(MPI_T_pvar_start(s, hb));
    traffic(N);
    unsigned long long more = 0, after = 1;
    TC_MPI(MPI_T_pvar_readreset(s, hb, &more));
    TC_CHECK(more >= v + (unsigned long long)N * BYTES, "after restart %llu, before %llu", more, v);
    TC_MPI(MPI_T_pvar_read(s, hb, &after));
    TC_CHECK(after < (unsigned long long)BYTES, "readreset left %llu", after);
    traffic(1);
    TC_MPI(MPI_T_pvar_reset(s, hb));
    TC_MPI(MPI_T_pvar_read(s, hb, &after));
    TC_CHECK(after < (unsigned long long)BYTES, "reset left %llu", after);

    /* Errors. */
    TC_CHECK(MPI_T_pvar_write(s, hb, &v) == MPI_T_ERR_PVAR_NO_WRITE, "write refused");
    TC_CHECK(MPI_T_pvar_read(other, hb, &v) == MPI_T_ERR_INVALID_HANDLE, "handle of another session");
    TC_CHECK(MPI_T_pvar_read(s, MPI_T_PVAR_ALL_HANDLES, &v) == MPI_T_ERR_INVALID_HANDLE, "read of all handles");
    TC_CHECK(MPI_T_pvar_handle_alloc(s, n, NULL, &hc, &count) == MPI_T_ERR_INVALID_INDEX, "index past the end");

    TC_MPI(MPI_T_pvar_handle_free(s, &hp));
    TC_CHECK(hp == MPI_T_PVAR_HANDLE_NULL, "handle freed");
    TC_MPI(MPI_T_pvar_session_free(&s));
    TC_CHECK(s == MPI_T_PVAR_SESSION_NULL, "session freed");
    TC_MPI(MPI_T_pvar_session_free(&other));
    TC_MPI(MPI_T_finalize());
    return tc_finalize();
}
