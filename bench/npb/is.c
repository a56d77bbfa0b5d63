/* NPB IS: rank (sort) a large array of integer keys, ten times, with a parallel bucket
 * sort. Written from the NPB specification (RNR-94-007, NAS-95-020).
 *
 * Key i is floor(max_key/4 * (r[4i] + r[4i+1] + r[4i+2] + r[4i+3])) for the NPB random
 * sequence r, so keys are roughly Gaussian over [0, max_key). Each rank generates a
 * contiguous block of keys. Before ranking pass `it`, key it is set to it and key it+10 to
 * max_key - it. A pass sorts keys into buckets by their high bits, gives every rank a
 * contiguous range of buckets holding about total/size keys, exchanges keys with one
 * all-to-all, and counts the keys of its range: the rank of key value k is the number of
 * keys smaller than k. Five keys per class have published ranks (partial verification);
 * after the last pass the keys are placed at their ranks and checked to be in order
 * (full verification). */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PASSES 10
#define TESTS 5

struct is_class {
    char cls;
    int total_keys_log2, max_key_log2, buckets_log2;
    long test_index[TESTS];
    long test_rank[TESTS];
};

static const struct is_class classes[] = {
    {'S', 16, 11, 9, {48427, 17148, 23627, 62548, 4431}, {0, 18, 346, 64917, 65463}},
    {'W', 20, 16, 10, {357773, 934767, 875723, 898999, 404505},
     {1249, 11698, 1039987, 1043896, 1048018}},
    {'A', 23, 19, 10, {2112377, 662041, 5336171, 3642833, 4250760},
     {104, 17523, 123928, 8288932, 8388264}},
};

/* The published ranks, moved by the pass number as the specification gives per class
 * (the keys set before each pass land below or above the tested ones). */
static long expected_rank(const struct is_class *c, int test, int pass) {
    long r = c->test_rank[test];
    switch (c->cls) {
    case 'S': return test <= 2 ? r + pass : r - pass;
    case 'W': return test < 2 ? r + (pass - 2) : r - pass;
    default: return test <= 2 ? r + (pass - 1) : r - (pass - 1);
    }
}

struct state {
    const struct is_class *c;
    int rank, size;
    long total, local_n, first;     /* all keys, keys here, global index of the first */
    int max_key, nbuckets, shift;
    int *keys;                      /* this rank's generated keys */
    int *sendbuf, *recvbuf;         /* keys grouped by destination; keys received */
    long recv_n, recv_cap;
    long *bucket_local, *bucket_global, *bucket_fill;
    int *bucket_owner;
    int *sendcounts, *senddispls, *recvcounts, *recvdispls;
    int key_lo, key_hi;             /* key values this rank ranks: [key_lo, key_hi) */
    long keys_below;                /* keys in the whole array smaller than key_lo */
    long *count_upto;               /* count_upto[k - key_lo]: received keys <= k */
    long partial_passed;
};

static void generate_keys(struct state *s) {
    double seed = npb_skip(NPB_SEED, 4 * s->first);
    double quarter = s->max_key / 4.0;
    for (long i = 0; i < s->local_n; i++) {
        double x = npb_randlc(&seed, NPB_A);
        x += npb_randlc(&seed, NPB_A);
        x += npb_randlc(&seed, NPB_A);
        x += npb_randlc(&seed, NPB_A);
        s->keys[i] = (int)(quarter * x);
    }
}

/* Set global key `index` on the rank that holds it. */
static void set_key(struct state *s, long index, int value) {
    if (index >= s->first && index < s->first + s->local_n) s->keys[index - s->first] = value;
}

static void rank_pass(struct state *s, int pass) {
    const struct is_class *c = s->c;
    set_key(s, pass, pass);
    set_key(s, pass + PASSES, s->max_key - pass);

    /* The keys whose ranks are checked, read before they move. */
    int probe_local[TESTS], probe[TESTS];
    for (int t = 0; t < TESTS; t++) {
        long i = c->test_index[t];
        probe_local[t] = (i >= s->first && i < s->first + s->local_n) ? s->keys[i - s->first] : -1;
    }

    memset(s->bucket_local, 0, s->nbuckets * sizeof(long));
    for (long i = 0; i < s->local_n; i++) s->bucket_local[s->keys[i] >> s->shift]++;
    MPI_Allreduce(s->bucket_local, s->bucket_global, s->nbuckets, MPI_LONG, MPI_SUM,
                  MPI_COMM_WORLD);
    MPI_Allreduce(probe_local, probe, TESTS, MPI_INT, MPI_MAX, MPI_COMM_WORLD);

    /* Contiguous bucket ranges, each closed once it reaches its share of all keys. */
    long running = 0;
    int owner = 0;
    for (int b = 0; b < s->nbuckets; b++) {
        s->bucket_owner[b] = owner;
        running += s->bucket_global[b];
        if (owner < s->size - 1 && running >= (owner + 1) * (s->total / s->size)) owner++;
    }
    s->keys_below = 0;
    int first_bucket = s->nbuckets, last_bucket = -1;
    for (int b = 0; b < s->nbuckets; b++) {
        if (s->bucket_owner[b] < s->rank) s->keys_below += s->bucket_global[b];
        if (s->bucket_owner[b] == s->rank) {
            if (b < first_bucket) first_bucket = b;
            last_bucket = b;
        }
    }
    s->key_lo = first_bucket << s->shift;
    s->key_hi = last_bucket < 0 ? s->key_lo : (last_bucket + 1) << s->shift;
    if (last_bucket < 0) s->key_lo = s->key_hi = 0;

    /* Group the keys by bucket, which groups them by destination too. */
    memset(s->sendcounts, 0, s->size * sizeof(int));
    long pos = 0;
    for (int b = 0; b < s->nbuckets; b++) {
        s->bucket_fill[b] = pos;
        pos += s->bucket_local[b];
        s->sendcounts[s->bucket_owner[b]] += (int)s->bucket_local[b];
    }
    for (long i = 0; i < s->local_n; i++) s->sendbuf[s->bucket_fill[s->keys[i] >> s->shift]++] = s->keys[i];
    MPI_Alltoall(s->sendcounts, 1, MPI_INT, s->recvcounts, 1, MPI_INT, MPI_COMM_WORLD);
    s->senddispls[0] = s->recvdispls[0] = 0;
    for (int r = 1; r < s->size; r++) {
        s->senddispls[r] = s->senddispls[r - 1] + s->sendcounts[r - 1];
        s->recvdispls[r] = s->recvdispls[r - 1] + s->recvcounts[r - 1];
    }
    s->recv_n = s->recvdispls[s->size - 1] + s->recvcounts[s->size - 1];
    if (s->recv_n > s->recv_cap) {   /* bucket ranges do not split the keys evenly */
        s->recv_cap = s->recv_n + s->recv_n / 4;
        s->recvbuf = realloc(s->recvbuf, s->recv_cap * sizeof(int));
    }
    MPI_Alltoallv(s->sendbuf, s->sendcounts, s->senddispls, MPI_INT, s->recvbuf, s->recvcounts,
                  s->recvdispls, MPI_INT, MPI_COMM_WORLD);

    /* Rank the received keys: a histogram of the range, then running sums. */
    int range = s->key_hi - s->key_lo;
    memset(s->count_upto, 0, (range > 0 ? range : 1) * sizeof(long));
    for (long i = 0; i < s->recv_n; i++) s->count_upto[s->recvbuf[i] - s->key_lo]++;
    for (int k = 1; k < range; k++) s->count_upto[k] += s->count_upto[k - 1];

    for (int t = 0; t < TESTS; t++) {
        int k = probe[t];
        if (k < s->key_lo || k >= s->key_hi) continue;
        long smaller = s->keys_below + (k > s->key_lo ? s->count_upto[k - 1 - s->key_lo] : 0);
        if (smaller == expected_rank(c, t, pass)) s->partial_passed++;
        else
            fprintf(stderr, "IS: pass %d, test key %d (value %d): rank %ld, expected %ld\n",
                    pass, t, k, smaller, expected_rank(c, t, pass));
    }
}

/* Place every received key at its rank and check the result: every slot filled, keys in
 * order within and across ranks, and the same keys (count and sums) as were generated. */
static int full_verify(struct state *s) {
    int range = s->key_hi - s->key_lo;
    long *next = malloc((range > 0 ? range : 1) * sizeof(long));
    for (int k = 0; k < range; k++) next[k] = k > 0 ? s->count_upto[k - 1] : 0;
    int *sorted = malloc((s->recv_n > 0 ? s->recv_n : 1) * sizeof(int));
    for (long i = 0; i < s->recv_n; i++) sorted[i] = -1;
    long bad = 0;
    for (long i = 0; i < s->recv_n; i++) {
        int k = s->recvbuf[i];
        long at = next[k - s->key_lo]++;
        if (at < 0 || at >= s->recv_n || sorted[at] != -1) bad++;
        else sorted[at] = k;
    }
    for (long i = 0; i < s->recv_n; i++) {
        if (sorted[i] < 0) bad++;
        else if (i > 0 && sorted[i - 1] > sorted[i]) bad++;
    }
    /* Order across ranks: every rank's first key against the last key of the nearest
     * lower rank that holds any. */
    int ends[2] = {s->recv_n > 0 ? sorted[0] : -1, s->recv_n > 0 ? sorted[s->recv_n - 1] : -1};
    int *all_ends = malloc(2 * s->size * sizeof(int));
    MPI_Allgather(ends, 2, MPI_INT, all_ends, 2, MPI_INT, MPI_COMM_WORLD);
    int last_seen = -1;
    for (int r = 0; r < s->size; r++) {
        if (all_ends[2 * r] < 0) continue;
        if (r == s->rank && last_seen > all_ends[2 * r]) bad++;
        last_seen = all_ends[2 * r + 1];
    }
    free(all_ends);

    long long sums[6] = {s->recv_n, 0, 0, s->local_n, 0, 0}, total[6];
    for (long i = 0; i < s->recv_n; i++) {
        sums[1] += s->recvbuf[i];
        sums[2] += (long long)s->recvbuf[i] * s->recvbuf[i];
    }
    for (long i = 0; i < s->local_n; i++) {
        sums[4] += s->keys[i];
        sums[5] += (long long)s->keys[i] * s->keys[i];
    }
    MPI_Allreduce(sums, total, 6, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    long all_bad;
    MPI_Allreduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    free(next);
    free(sorted);
    if (s->rank == 0 && all_bad)
        fprintf(stderr, "IS: full verification found %ld keys out of place\n", all_bad);
    return all_bad == 0 && total[0] == s->total && total[0] == total[3] && total[1] == total[4] &&
           total[2] == total[5];
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    struct state s;
    memset(&s, 0, sizeof s);
    MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &s.size);
    char cls = npb_class(argc, argv, s.rank);
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
        if (classes[i].cls == cls) s.c = &classes[i];
    /* Buckets are the unit of distribution: at least one per rank. */
    npb_require_pow2("IS", s.size, 1 << s.c->buckets_log2, s.rank);

    s.total = 1L << s.c->total_keys_log2;
    s.local_n = s.total / s.size;
    s.first = s.local_n * s.rank;
    s.max_key = 1 << s.c->max_key_log2;
    s.nbuckets = 1 << s.c->buckets_log2;
    s.shift = s.c->max_key_log2 - s.c->buckets_log2;
    s.keys = malloc(s.local_n * sizeof(int));
    s.sendbuf = malloc(s.local_n * sizeof(int));
    s.recv_cap = s.local_n + s.local_n / 4;
    s.recvbuf = malloc(s.recv_cap * sizeof(int));
    s.bucket_local = malloc(s.nbuckets * sizeof(long));
    s.bucket_global = malloc(s.nbuckets * sizeof(long));
    s.bucket_fill = malloc(s.nbuckets * sizeof(long));
    s.bucket_owner = malloc(s.nbuckets * sizeof(int));
    s.sendcounts = malloc(s.size * sizeof(int));
    s.senddispls = malloc(s.size * sizeof(int));
    s.recvcounts = malloc(s.size * sizeof(int));
    s.recvdispls = malloc(s.size * sizeof(int));
    s.count_upto = malloc(s.max_key * sizeof(long));

    if (s.rank == 0) {
        printf("\n NAS Parallel Benchmarks - IS Benchmark\n\n");
        printf(" Size:  %ld  (class %c)\n Iterations:   %d\n Number of processes:     %d\n\n",
               s.total, cls, PASSES, s.size);
    }
    generate_keys(&s);

    /* One untimed pass (it sets the same keys as pass 1) brings every page in. */
    rank_pass(&s, 1);
    s.partial_passed = 0;

    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int pass = 1; pass <= PASSES; pass++) {
        if (s.rank == 0) printf("        iteration %d\n", pass);
        rank_pass(&s, pass);
    }
    double elapsed = MPI_Wtime() - start, slowest;
    MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    long partial = 0;
    MPI_Allreduce(&s.partial_passed, &partial, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    int full = full_verify(&s);
    if (s.rank == 0)
        printf("\n partial verification: %ld of %d ranks correct; full verification: %s\n",
               partial, TESTS * PASSES, full ? "keys in order" : "FAILED");
    int verified = full && partial == TESTS * PASSES;
    double mops = (double)PASSES * s.total / slowest / 1e6;
    char sizebuf[32];
    snprintf(sizebuf, sizeof sizebuf, "%ld", s.total);
    int status = npb_report("IS", cls, sizebuf, PASSES, slowest, mops, "keys ranked", verified,
                            s.size, s.rank);
    MPI_Finalize();
    return status;
}
