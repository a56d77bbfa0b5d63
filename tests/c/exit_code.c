/* exit_code: rank 1 calls exit(3) after MPI_Init (and one exchange, so
 * connections exist) while the other ranks block in a receive from it.
 * The launcher must end the job with a non-zero status within seconds and
 * say on stderr which rank failed.
 * ranks: 2 4
 * expect: fail
 * timeout: 20
 */
#include "tc.h"
#include <unistd.h>

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "exit_code");
    if (tc_size < 2)
        tc_die("needs at least 2 ranks");
    int v = tc_rank, got = -1;
    const int right = (tc_rank + 1) % tc_size, left = (tc_rank + tc_size - 1) % tc_size;
    TC_MPI(MPI_Sendrecv(&v, 1, MPI_INT, right, 0, &got, 1, MPI_INT, left, 0, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
    if (tc_rank == 1) {
        fflush(stdout);
        exit(3);
    }
    /* Never satisfied: rank 1 is gone. The launcher must clean us up. */
    TC_MPI(MPI_Recv(&got, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    printf("rank %d: receive from the exited rank completed\n", tc_rank);
    return tc_finalize();
}
