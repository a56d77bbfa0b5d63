/* ranks: 1 2 4
 * One-sided communication over every window flavor: put/get/accumulate with fence,
 * on one host or spread over hosts (tests/c/rma/hosts.sh),
 * post-start-complete-wait, exclusive and shared locks (a counter raised with Fetch_and_op
 * by every rank, Compare_and_swap), request-based operations, strided target datatypes,
 * direct load/store into MPI_Win_allocate_shared memory, dynamic windows, window
 * attributes, names and info, error classes for out-of-range and unsynchronized
 * accesses, accumulates of nothing (a zero count, a zero-size type) and of a derived
 * type built from a pair type. */
#include "../tc.h"

#define N 64

static void check_flavor(MPI_Win win, int want)
{
    int *flavor, flag;
    TC_MPI(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag));
    TC_CHECK(flag && *flavor == want, "flavor %d, want %d", flag ? *flavor : -1, want);
    int *model;
    TC_MPI(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag));
    TC_CHECK(flag && *model == MPI_WIN_UNIFIED, "memory model");
}

/* Fence epochs: each rank puts its rank into slot `me` of every target, gets it back,
 * and accumulates (sum) into slot N-1. */
static void fence_round(MPI_Win win, int *mem)
{
    int me = tc_rank, n = tc_size;
    for (int i = 0; i < N; i++)
        mem[i] = 0;
    /* A zero-size type carries no data: accumulates of it are accepted whatever the
     * operation, on every target (those of other hosts included). */
    MPI_Datatype empty;
    TC_MPI(MPI_Type_contiguous(0, MPI_INT, &empty));
    TC_MPI(MPI_Type_commit(&empty));
    TC_MPI(MPI_Win_fence(0, win));
    for (int t = 0; t < n; t++) {
        int v = 1000 * me + t;
        TC_MPI(MPI_Put(&v, 1, MPI_INT, t, me, 1, MPI_INT, win));
        int one = me + 1, res = -7;
        TC_MPI(MPI_Accumulate(&one, 1, MPI_INT, t, N - 1, 1, MPI_INT, MPI_SUM, win));
        TC_MPI(MPI_Accumulate(&one, 1, empty, t, 0, 2, empty, MPI_SUM, win));
        TC_MPI(MPI_Get_accumulate(&one, 0, MPI_INT, &res, 0, MPI_INT, t, 0, 0, MPI_INT, MPI_SUM, win));
        TC_CHECK(res == -7, "a get_accumulate of nothing wrote %d", res);
    }
    TC_MPI(MPI_Win_fence(0, win));
    TC_MPI(MPI_Type_free(&empty));
    for (int s = 0; s < n; s++)
        TC_CHECK(mem[s] == 1000 * s + me, "slot %d holds %d, want %d", s, mem[s], 1000 * s + me);
    TC_CHECK(mem[N - 1] == n * (n + 1) / 2, "sum %d, want %d", mem[N - 1], n * (n + 1) / 2);
    int got[8] = {0};
    int t = (me + 1) % n;
    TC_MPI(MPI_Get(got, n, MPI_INT, t, 0, n, MPI_INT, win));
    TC_MPI(MPI_Win_fence(0, win));
    for (int s = 0; s < n && s < 8; s++)
        TC_CHECK(got[s] == 1000 * s + t, "get slot %d: %d", s, got[s]);
    TC_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
}

static void strided(MPI_Win win, int *mem)
{
    /* Every second int of the target's first 2*8 ints, from a contiguous origin. */
    MPI_Datatype vec;
    TC_MPI(MPI_Type_vector(8, 1, 2, MPI_INT, &vec));
    TC_MPI(MPI_Type_commit(&vec));
    for (int i = 0; i < N; i++)
        mem[i] = -1;
    TC_MPI(MPI_Win_fence(0, win));
    int t = (tc_rank + 1) % tc_size;
    int src[8];
    for (int i = 0; i < 8; i++)
        src[i] = 100 * tc_rank + i;
    TC_MPI(MPI_Put(src, 8, MPI_INT, t, 0, 1, vec, win));
    TC_MPI(MPI_Win_fence(0, win));
    int from = (tc_rank + tc_size - 1) % tc_size;
    for (int i = 0; i < 16; i++) {
        int want = i % 2 ? -1 : 100 * from + i / 2;
        TC_CHECK(mem[i] == want, "strided put: mem[%d] = %d, want %d", i, mem[i], want);
    }
    TC_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    MPI_Type_free(&vec);
}

static void pscw(MPI_Win win, int *mem)
{
    MPI_Group world, peers;
    TC_MPI(MPI_Win_get_group(win, &world));
    int next = (tc_rank + 1) % tc_size, prev = (tc_rank + tc_size - 1) % tc_size;
    mem[0] = -1;
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    /* Ring: expose to prev, access next. */
    MPI_Group to, from;
    TC_MPI(MPI_Group_incl(world, 1, &prev, &from));
    TC_MPI(MPI_Group_incl(world, 1, &next, &to));
    TC_MPI(MPI_Win_post(from, 0, win));
    TC_MPI(MPI_Win_start(to, 0, win));
    int v = 7000 + tc_rank;
    TC_MPI(MPI_Put(&v, 1, MPI_INT, next, 0, 1, MPI_INT, win));
    TC_MPI(MPI_Win_complete(win));
    int flag = 0;
    while (!flag)
        TC_MPI(MPI_Win_test(win, &flag));
    TC_CHECK(mem[0] == 7000 + prev, "pscw: %d, want %d", mem[0], 7000 + prev);
    MPI_Group_free(&to);
    MPI_Group_free(&from);
    MPI_Group_free(&world);
    (void)peers;
}

static void passive(MPI_Win win, int *mem)
{
    mem[1] = 0;
    mem[2] = 0;
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    /* Everyone raises rank 0's counter 10 times under shared locks (atomic fetch-and-op). */
    int seen_max = -1;
    for (int i = 0; i < 10; i++) {
        int one = 1, old;
        TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        TC_MPI(MPI_Fetch_and_op(&one, &old, MPI_INT, 0, 1, MPI_SUM, win));
        TC_MPI(MPI_Win_unlock(0, win));
        TC_CHECK(old > seen_max, "fetch_and_op went backwards: %d after %d", old, seen_max);
        seen_max = old;
    }
    /* Exclusive lock: read-modify-write by hand. */
    TC_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
    int v;
    TC_MPI(MPI_Get(&v, 1, MPI_INT, 0, 2, 1, MPI_INT, win));
    TC_MPI(MPI_Win_flush(0, win));
    v += 1;
    TC_MPI(MPI_Put(&v, 1, MPI_INT, 0, 2, 1, MPI_INT, win));
    TC_MPI(MPI_Win_unlock(0, win));
    /* Compare-and-swap: exactly one rank wins slot 3. */
    int none = -1, mine = tc_rank, prior;
    if (tc_rank == 0)
        mem[3] = -1;
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    TC_MPI(MPI_Win_lock_all(0, win));
    TC_MPI(MPI_Compare_and_swap(&mine, &none, &prior, MPI_INT, 0, 3, win));
    MPI_Request r;
    int g = 0;
    TC_MPI(MPI_Rget(&g, 1, MPI_INT, 0, 3, 1, MPI_INT, win, &r));
    TC_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    TC_MPI(MPI_Win_unlock_all(win));
    int won = prior == -1, winners;
    TC_MPI(MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    TC_CHECK(winners == 1, "compare_and_swap: %d winners", winners);
    TC_CHECK(g >= 0 && g < tc_size, "rget after cas: %d", g);
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (tc_rank == 0) {
        TC_CHECK(mem[1] == 10 * tc_size, "counter %d, want %d", mem[1], 10 * tc_size);
        TC_CHECK(mem[2] == tc_size, "exclusive increments %d, want %d", mem[2], tc_size);
    }
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void get_accumulate(MPI_Win win, int *mem)
{
    mem[4] = 5;
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    int add = 2, old = -1;
    TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    TC_MPI(MPI_Get_accumulate(&add, 1, MPI_INT, &old, 1, MPI_INT, 0, 4, 1, MPI_INT, MPI_SUM, win));
    TC_MPI(MPI_Win_unlock(0, win));
    TC_CHECK(old >= 5 && old <= 5 + 2 * (tc_size - 1) && (old - 5) % 2 == 0, "get_accumulate old %d", old);
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (tc_rank == 0)
        TC_CHECK(mem[4] == 5 + 2 * tc_size, "get_accumulate total %d", mem[4]);
    double dmax = tc_rank, dres;
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    TC_MPI(MPI_Get_accumulate(NULL, 0, MPI_DOUBLE, &dres, 1, MPI_DOUBLE, 0, 8, 1, MPI_DOUBLE, MPI_NO_OP, win));
    TC_MPI(MPI_Win_unlock(0, win));
    (void)dmax;
    TC_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void errors(MPI_Win win)
{
    TC_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int v = 1, cls;
    /* Outside any epoch. */
    int rc = MPI_Put(&v, 1, MPI_INT, 0, 0, 1, MPI_INT, win);
    MPI_Error_class(rc, &cls);
    TC_CHECK(cls == MPI_ERR_RMA_SYNC, "put outside an epoch: class %d", cls);
    TC_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    rc = MPI_Put(&v, 1, MPI_INT, 0, N + 10, 1, MPI_INT, win);
    MPI_Error_class(rc, &cls);
    TC_CHECK(cls == MPI_ERR_RMA_RANGE, "put out of range: class %d", cls);
    rc = MPI_Accumulate(&v, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_OP_NULL, win);
    MPI_Error_class(rc, &cls);
    TC_CHECK(cls == MPI_ERR_OP, "accumulate with MPI_OP_NULL: class %d", cls);
    TC_MPI(MPI_Win_unlock(0, win));
    rc = MPI_Win_unlock(0, win);
    MPI_Error_class(rc, &cls);
    TC_CHECK(cls == MPI_ERR_RMA_SYNC, "unlock without lock: class %d", cls);
    rc = MPI_Win_lock(12345, 0, 0, win);
    MPI_Error_class(rc, &cls);
    TC_CHECK(cls == MPI_ERR_LOCKTYPE, "bad lock type: class %d", cls);
}

/* A derived type built from a pair type (every other MPI_DOUBLE_INT of 8): MPI_MAXLOC
 * accumulates from every rank into every target, and the same type through MPI_Allreduce
 * with MPI_MINLOC. Values repeat across ranks, so ties must go to the smaller index; the
 * pairs the type skips stay untouched. */
typedef struct {
    double v;
    int i;
} double_int;

static void pair_type(void)
{
    int me = tc_rank, n = tc_size;
    double_int *mem, src[8], out[8];
    MPI_Win win;
    TC_MPI(MPI_Win_allocate(8 * sizeof(double_int), sizeof(double_int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    for (int k = 0; k < 8; k++) {
        mem[k].v = -1.0;
        mem[k].i = -1;
        src[k].v = (double)((me * 3 + k) % (n > 1 ? n - 1 : 1));
        src[k].i = me;
        out[k].v = -2.0;
        out[k].i = -2;
    }
    MPI_Datatype vec;
    TC_MPI(MPI_Type_vector(4, 1, 2, MPI_DOUBLE_INT, &vec));
    TC_MPI(MPI_Type_commit(&vec));
    TC_MPI(MPI_Win_fence(0, win));
    for (int t = 0; t < n; t++)
        TC_MPI(MPI_Accumulate(src, 1, vec, t, 0, 1, vec, MPI_MAXLOC, win));
    TC_MPI(MPI_Win_fence(0, win));
    TC_MPI(MPI_Allreduce(src, out, 1, vec, MPI_MINLOC, MPI_COMM_WORLD));
    for (int k = 0; k < 8; k++) {
        if (k % 2) {
            TC_CHECK(mem[k].v == -1.0 && mem[k].i == -1, "maxloc: skipped pair %d changed", k);
            TC_CHECK(out[k].v == -2.0 && out[k].i == -2, "minloc: skipped pair %d changed", k);
            continue;
        }
        double hi = -1.0, lo = 1e9;
        int hi_at = -1, lo_at = -1;
        for (int r = 0; r < n; r++) {
            double v = (double)((r * 3 + k) % (n > 1 ? n - 1 : 1));
            if (v > hi) {
                hi = v;
                hi_at = r;
            }
            if (v < lo) {
                lo = v;
                lo_at = r;
            }
        }
        TC_CHECK(mem[k].v == hi && mem[k].i == hi_at, "maxloc pair %d: (%g, %d), want (%g, %d)", k, mem[k].v, mem[k].i, hi, hi_at);
        TC_CHECK(out[k].v == lo && out[k].i == lo_at, "minloc pair %d: (%g, %d), want (%g, %d)", k, out[k].v, out[k].i, lo, lo_at);
    }
    TC_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    TC_MPI(MPI_Type_free(&vec));
    TC_MPI(MPI_Win_free(&win));
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "rma_basic");
    pair_type();
    int *mem;
    MPI_Win win;

    /* MPI_Win_create over the application's memory. */
    TC_MPI(MPI_Alloc_mem(N * sizeof(int) + 64, MPI_INFO_NULL, &mem));
    TC_MPI(MPI_Win_create(mem, N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    check_flavor(win, MPI_WIN_FLAVOR_CREATE);
    void *base;
    int flag;
    TC_MPI(MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag));
    TC_CHECK(flag && base == mem, "MPI_WIN_BASE");
    MPI_Aint *size;
    TC_MPI(MPI_Win_get_attr(win, MPI_WIN_SIZE, &size, &flag));
    TC_CHECK(flag && *size == N * (MPI_Aint)sizeof(int), "MPI_WIN_SIZE");
    TC_MPI(MPI_Win_set_name(win, "created"));
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    TC_MPI(MPI_Win_get_name(win, name, &len));
    TC_CHECK(strcmp(name, "created") == 0 && len == 7, "window name %s", name);
    fence_round(win, mem);
    strided(win, mem);
    pscw(win, mem);
    passive(win, mem);
    get_accumulate(win, mem);
    errors(win);
    TC_MPI(MPI_Win_free(&win));
    TC_CHECK(win == MPI_WIN_NULL, "Win_free sets MPI_WIN_NULL");
    MPI_Free_mem(mem);

    /* MPI_Win_allocate. */
    TC_MPI(MPI_Win_allocate(N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    check_flavor(win, MPI_WIN_FLAVOR_ALLOCATE);
    fence_round(win, mem);
    passive(win, mem);
    TC_MPI(MPI_Win_free(&win));

    /* MPI_Win_allocate_shared among the ranks of one host (all of them on one host):
     * neighbours' memory by direct load/store; across hosts it is refused. */
    MPI_Comm node;
    int node_rank, node_size, cls, world_hosts;
    TC_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    TC_MPI(MPI_Comm_rank(node, &node_rank));
    TC_MPI(MPI_Comm_size(node, &node_size));
    int first = node_rank == 0;
    TC_MPI(MPI_Allreduce(&first, &world_hosts, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (world_hosts > 1) {
        TC_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        int rc = MPI_Win_allocate_shared(N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
        MPI_Error_class(rc, &cls);
        TC_CHECK(cls == MPI_ERR_RMA_SHARED, "allocate_shared across hosts: class %d", cls);
        TC_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    }
    TC_MPI(MPI_Win_allocate_shared(N * sizeof(int), sizeof(int), MPI_INFO_NULL, node, &mem, &win));
    check_flavor(win, MPI_WIN_FLAVOR_SHARED);
    if (world_hosts == 1)
        fence_round(win, mem);
    TC_MPI(MPI_Win_lock_all(0, win));
    for (int i = 0; i < N; i++)
        mem[i] = 10000 * node_rank + i;
    TC_MPI(MPI_Win_sync(win));
    TC_MPI(MPI_Barrier(node));
    TC_MPI(MPI_Win_sync(win));
    int next = (node_rank + 1) % node_size;
    MPI_Aint qsize;
    int qunit;
    int *theirs;
    TC_MPI(MPI_Win_shared_query(win, next, &qsize, &qunit, &theirs));
    TC_CHECK(qsize == N * (MPI_Aint)sizeof(int) && qunit == (int)sizeof(int), "shared_query size/unit");
    for (int i = 0; i < N; i++)
        TC_CHECK(theirs[i] == 10000 * next + i, "shared load [%d] = %d", i, theirs[i]);
    TC_MPI(MPI_Win_unlock_all(win));
    TC_MPI(MPI_Win_free(&win));
    MPI_Comm_free(&node);
    next = (tc_rank + 1) % tc_size;

    /* Dynamic window: attach, exchange addresses, put. */
    TC_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    check_flavor(win, MPI_WIN_FLAVOR_DYNAMIC);
    int dyn[4] = {0, 0, 0, 0};
    TC_MPI(MPI_Win_attach(win, dyn, sizeof dyn));
    MPI_Aint mine, *addrs = malloc(tc_size * sizeof(MPI_Aint));
    TC_MPI(MPI_Get_address(dyn, &mine));
    TC_MPI(MPI_Allgather(&mine, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD));
    TC_MPI(MPI_Win_fence(0, win));
    int v = 4242 + tc_rank;
    TC_MPI(MPI_Put(&v, 1, MPI_INT, next, addrs[next] + sizeof(int), 1, MPI_INT, win));
    TC_MPI(MPI_Win_fence(0, win));
    int prev = (tc_rank + tc_size - 1) % tc_size;
    TC_CHECK(dyn[1] == 4242 + prev, "dynamic put: %d", dyn[1]);
    TC_MPI(MPI_Win_detach(win, dyn));
    TC_MPI(MPI_Win_free(&win));
    free(addrs);

    return tc_finalize();
}
