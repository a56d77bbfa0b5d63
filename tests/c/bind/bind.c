/* Run by tests/c/bind/run.sh under `mpiexec --bind-to WHAT` (argv[1]: none, core or
 * hwthread; argv[2]: how many CPUs the launcher may use; argv[3]: how many units of WHAT
 * they make: CPUs for hwthread, cores for core). Each rank reads the CPUs it is bound to
 * and checks them against the policy: none leaves all of them; hwthread gives one, core the
 * hardware threads of one core (all sharing a core id in sysfs, CPUs / units of them).
 * Ranks of one host (this test runs on one) with local ranks below the number of units get
 * different units, and local rank i + units the same as local rank i (wrapping). Without
 * arguments (as tests/c/run-tests.sh runs it) it only reads the affinity. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include "../tc.h"

static int core_id(int cpu)
{
    char path[128];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
    FILE *f = fopen(path, "r");
    int id = -1;
    if (f) {
        if (fscanf(f, "%d", &id) != 1)
            id = -1;
        fclose(f);
    }
    return id;
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "bind");
    if (argc < 4) {
        /* Run without arguments (tests/c/run-tests.sh picks up every program): only check
         * that the rank can read where it may run. */
        cpu_set_t any;
        CPU_ZERO(&any);
        TC_CHECK(sched_getaffinity(0, sizeof any, &any) == 0 && CPU_COUNT(&any) > 0, "no CPU affinity");
        return tc_finalize();
    }
    const char *what = argv[1];
    int ncpus = atoi(argv[2]), units = atoi(argv[3]);
    cpu_set_t set;
    CPU_ZERO(&set);
    TC_CHECK(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity failed");
    int n = CPU_COUNT(&set), first = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) {
            if (first < 0)
                first = c;
            if (!strcmp(what, "core"))
                TC_CHECK(core_id(c) == core_id(first), "CPUs %d and %d of different cores", first, c);
        }
    int bound = strcmp(what, "none") != 0;
    if (!bound)
        TC_CHECK(n == ncpus, "unbound rank has %d CPUs, the launcher %d", n, ncpus);
    else
        TC_CHECK(units > 0 && n == ncpus / units, "%s binding gave %d CPUs, expected %d", what, n, units ? ncpus / units : 0);

    /* Every rank's first CPU: the same unit exactly when the local ranks differ by a
     * multiple of the number of units. */
    int all[256];
    TC_CHECK(tc_size <= 256, "too many ranks for this test");
    TC_MPI(MPI_Allgather(&first, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD));
    if (bound && units > 0)
        for (int i = 0; i < tc_size && i < 256; i++)
            for (int j = 0; j < i; j++) {
                int same = all[i] == all[j], want = (i - j) % units == 0;
                TC_CHECK(same == want, "ranks %d and %d on CPU %d and %d (%d units)", j, i, all[j], all[i], units);
            }
    return tc_finalize();
}
