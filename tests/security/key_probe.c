/* Traffic for tests/security/wire.sh: rank 0 records the job key it was given (to a file,
 * never to a socket), then the ranks exchange small and large messages both ways, so the
 * control handshake, the data-path handshake and many data frames cross the wire. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0 && argc > 1) {
        const char *k = getenv("STEADFAST_JOB_KEY");
        FILE *f = fopen(argv[1], "w");
        if (!f || !k) {
            fprintf(stderr, "cannot record the job key\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        fprintf(f, "%s\n", k);
        fclose(f);
    }
    enum { BIG = 1 << 20 };
    unsigned char *buf = malloc(BIG);
    int bad = 0;
    for (int round = 0; round < 4; round++) {
        int len = round % 2 ? BIG : 64;
        int peer = rank ^ 1;
        if (peer >= size)
            break;
        if ((rank + round) % 2 == 0) {
            for (int i = 0; i < len; i++)
                buf[i] = (unsigned char)(i * 7 + round);
            MPI_Send(buf, len, MPI_BYTE, peer, round, MPI_COMM_WORLD);
        } else {
            MPI_Recv(buf, len, MPI_BYTE, peer, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (int i = 0; i < len; i++)
                bad += buf[i] != (unsigned char)(i * 7 + round);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d: %d bad bytes\n", rank, bad);
    free(buf);
    MPI_Finalize();
    return bad != 0;
}
