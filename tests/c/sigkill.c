/* sigkill: rank 1 is killed by SIGKILL after MPI_Init (and one exchange)
 * while the other ranks block in a receive from it.  The launcher must end
 * the job with a non-zero status within seconds and say on stderr which
 * rank died.
 * ranks: 2 4
 * expect: fail
 * timeout: 20
 */
#include "tc.h"
#include <signal.h>

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "sigkill");
    if (tc_size < 2)
        tc_die("needs at least 2 ranks");
    int v = tc_rank, got = -1;
    const int right = (tc_rank + 1) % tc_size, left = (tc_rank + tc_size - 1) % tc_size;
    TC_MPI(MPI_Sendrecv(&v, 1, MPI_INT, right, 0, &got, 1, MPI_INT, left, 0, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
    if (tc_rank == 1) {
        fflush(stdout);
        raise(SIGKILL);
    }
    TC_MPI(MPI_Recv(&got, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    printf("rank %d: receive from the killed rank completed\n", tc_rank);
    return tc_finalize();
}
