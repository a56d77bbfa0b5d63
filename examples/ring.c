/* ring: pass a token around all ranks a few times, each rank adding its rank number.
 * The classic first MPI program; `make demo` builds and runs it on 4 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, laps = 3;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    long token = 0;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (int lap = 0; lap < laps; lap++) {
        if (rank == 0) {
            MPI_Send(&token, 1, MPI_LONG, next, lap, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_LONG, prev, lap, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            printf("lap %d: token came back as %ld\n", lap, token);
        } else {
            MPI_Recv(&token, 1, MPI_LONG, prev, lap, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            token += rank;
            MPI_Send(&token, 1, MPI_LONG, next, lap, MPI_COMM_WORLD);
        }
    }
    long expect = (long)laps * size * (size - 1) / 2;
    if (rank == 0) {
        printf("ring of %d ranks: token %ld, expected %ld: %s\n", size, token, expect,
               token == expect ? "correct" : "WRONG");
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return (rank == 0 && token != expect) ? 1 : 0;
}
