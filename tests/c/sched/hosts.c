/* hosts: every rank checks the bootstrap's view of the job against the process manager's
 * own variables when they are set (STEADFAST_RANK under steadfast run, PMI_RANK/PMI_SIZE
 * under Hydra and srun --mpi=pmi2, SLURM_PROCID/SLURM_NTASKS under srun), then all pairs
 * exchange messages of 1 B .. 1 MiB, verifying every byte. Run by scripts/slurm-tests.sh and run-tests.sh.
 * ranks: 1 2 4
 * timeout: 60
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int env_int(const char *a, const char *b, const char *c)
{
    const char *v = getenv(a);
    if (!v) v = getenv(b);
    if (!v) v = getenv(c);
    return v ? atoi(v) : -1;
}

int main(int argc, char **argv)
{
    int rank, size, errs = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* Our launcher's variables first: inside an allocation it starts each rank as a
     * one-task srun step (SLURM_PROCID 0), and Hydra's proxies are srun tasks too. */
    int er = env_int("STEADFAST_RANK", "PMI_RANK", "SLURM_PROCID");
    int es = env_int("STEADFAST_SIZE", "PMI_SIZE", "SLURM_NTASKS");
    if (er >= 0 && er != rank) { printf("rank %d: process manager says rank %d\n", rank, er); errs++; }
    if (es >= 0 && es != size) { printf("rank %d: process manager says size %d\n", rank, es); errs++; }
    static const int sizes[] = { 1, 100, 16384, 65537, 1 << 20 };
    const int max = 1 << 20;
    unsigned char *s = malloc(max), *r = malloc(max);
    for (unsigned k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int n = sizes[k];
        for (int d = 1; d < size; d++) {
            int to = (rank + d) % size, from = (rank - d + size) % size;
            for (int i = 0; i < n; i++) s[i] = (unsigned char)(rank * 31 + to * 7 + i + k);
            memset(r, 0, n);
            MPI_Sendrecv(s, n, MPI_BYTE, to, k, r, n, MPI_BYTE, from, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (int i = 0; i < n; i++)
                if (r[i] != (unsigned char)(from * 31 + rank * 7 + i + k)) {
                    if (errs++ < 5) printf("rank %d: byte %d of %d from %d wrong\n", rank, i, n, from);
                    break;
                }
        }
    }
    int all = 0;
    MPI_Reduce(&errs, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        if (all == 0) printf(" No Errors\n");
        else printf(" Found %d errors\n", all);
    }
    free(s);
    free(r);
    MPI_Finalize();
    return all != 0;
}
