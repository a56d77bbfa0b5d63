/* A rank dies and is started again (mpiexec --on-failure relaunch): the new incarnation
 * starts from main and exchanges messages with the survivors, which never stopped.
 *
 * Rank 0 answers every request (tag 1) with a reply (tag 2) computed from it; ranks 1..n-1
 * send ROUNDS requests each and check every reply. Rank KILLED kills itself (SIGKILL) in
 * its first incarnation after KILL_AT rounds. Rank 0 receives with MPI_ANY_SOURCE and
 * acknowledges failures when told of one (MPIX_ERR_PROC_FAILED / _PENDING), as a ULFM
 * program does; it is done when every worker's last request (round ROUNDS-1) arrived.
 * Each process prints "rank R incarnation K: ok" when all its checks passed.
 *
 * driver: tests/c/ft/run.sh (needs --on-failure relaunch; not run by run-tests.sh)
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define ROUNDS 40
#define KILL_AT 5
#define KILLED 2

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const char *inc_env = getenv("STEADFAST_INCARNATION");
    int inc = inc_env ? atoi(inc_env) : 0, mine = -1;
    MPIX_Steadfast_incarnation(rank, &mine);
    if (mine != inc) {
        fprintf(stderr, "rank %d: incarnation %d, environment says %d\n", rank, mine, inc);
        return 1;
    }

    if (rank == 0) {
        int remaining = size - 1, failures = 0, served = 0, rejoined = 0;
        int *done = calloc(size, sizeof(int));
        int *seen_inc = calloc(size, sizeof(int));
        while (remaining > 0) {
            int req[2];
            MPI_Status st;
            int rc = MPI_Recv(req, 2, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &st);
            if (rc != MPI_SUCCESS) {
                int cls;
                MPI_Error_class(rc, &cls);
                if (cls != MPIX_ERR_PROC_FAILED && cls != MPIX_ERR_PROC_FAILED_PENDING) {
                    fprintf(stderr, "rank 0: receive failed with class %d\n", cls);
                    return 1;
                }
                failures++;
                MPIX_Comm_failure_ack(MPI_COMM_WORLD);
                usleep(1000);
                continue;
            }
            int w = st.MPI_SOURCE;
            if (req[1] > seen_inc[w]) {
                seen_inc[w] = req[1];
                rejoined++;
            }
            int reply = req[0] * 10 + w;
            /* The requester may die right after asking: a failed reply is not an error. */
            MPI_Send(&reply, 1, MPI_INT, w, 2, MPI_COMM_WORLD);
            served++;
            if (req[0] == ROUNDS - 1 && !done[w]) {
                done[w] = 1;
                remaining--;
            }
        }
        if (rejoined < 1) {
            fprintf(stderr, "rank 0: no request came from a restarted rank\n");
            return 1;
        }
        /* The view and the incarnations show the rank back. */
        int known = -1, nlive = -1;
        MPIX_Steadfast_incarnation(KILLED, &known);
        MPIX_Steadfast_view(NULL, &nlive, NULL, 0);
        if (known != 1 || nlive != size) {
            fprintf(stderr, "rank 0: rank %d is incarnation %d with %d of %d live, expected 1 and all\n", KILLED,
                    known, nlive, size);
            return 1;
        }
        printf("rank 0 incarnation %d: ok (served %d requests, %d failure notices, %d rejoined)\n", inc, served,
               failures, rejoined);
        free(done);
        free(seen_inc);
    } else {
        for (int i = 0; i < ROUNDS; i++) {
            if (rank == KILLED && inc == 0 && i == KILL_AT) {
                fflush(stdout);
                raise(SIGKILL);
            }
            int req[2] = {i, inc}, reply = -1;
            if (MPI_Send(req, 2, MPI_INT, 0, 1, MPI_COMM_WORLD) != MPI_SUCCESS ||
                MPI_Recv(&reply, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
                fprintf(stderr, "rank %d incarnation %d: exchange %d failed\n", rank, inc, i);
                return 1;
            }
            if (reply != i * 10 + rank) {
                fprintf(stderr, "rank %d incarnation %d: reply %d to request %d, expected %d\n", rank, inc, reply, i,
                        i * 10 + rank);
                return 1;
            }
        }
        printf("rank %d incarnation %d: ok\n", rank, inc);
    }
    MPI_Finalize();
    return 0;
}
