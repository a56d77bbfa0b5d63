/* ranks: 1 2 4
 * Communicator attributes: keyvals, set/get/delete, copy callbacks on dup (null, dup, user,
 * failing), delete callbacks on replace, delete and free (last set first, allowed to call
 * MPI and to delete other attributes), failing delete callbacks, freed keyvals living on,
 * predefined attributes, the deprecated interface, and MPI_COMM_SELF's attributes deleted
 * at the start of MPI_Finalize in reverse order of setting. */
#include "check.h"

#define NLOG 64
static int log_key[NLOG];
static int nlog = 0;
static int fail_delete = 0;

static int copy_plus_one(MPI_Comm old, int key, void *extra, void *in, void *out, int *flag)
{
    (void)old;
    (void)key;
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r); /* callbacks may call MPI */
    *(MPI_Aint *)out = (MPI_Aint)in + 1 + *(int *)extra;
    *flag = 1;
    return MPI_SUCCESS;
}

static int copy_fails(MPI_Comm old, int key, void *extra, void *in, void *out, int *flag)
{
    (void)old, (void)key, (void)extra, (void)in, (void)out;
    *flag = 1;
    return MPI_ERR_OTHER;
}

static int delete_log(MPI_Comm comm, int key, void *val, void *extra)
{
    (void)val, (void)extra;
    int s;
    MPI_Comm_size(comm, &s); /* the communicator is still usable here */
    if (nlog < NLOG)
        log_key[nlog++] = key;
    return fail_delete ? MPI_ERR_OTHER : MPI_SUCCESS;
}

static int other_key1, other_key2;
static int delete_others(MPI_Comm comm, int key, void *val, void *extra)
{
    (void)key, (void)val, (void)extra;
    MPI_Comm_delete_attr(comm, other_key1);
    MPI_Comm_delete_attr(comm, other_key2);
    return MPI_SUCCESS;
}

/* Finalize checks: the rank-0 process checks its own log after MPI_Finalize. */
#define NSELF 8
static int self_keys[NSELF], self_called[NSELF], self_order_ok = 1, self_finalized_seen = 0;
static int self_delete(MPI_Comm comm, int key, void *val, void *extra)
{
    (void)comm, (void)key, (void)extra;
    int idx = (int)(MPI_Aint)val, flag = 1;
    self_called[idx]++;
    for (int i = idx + 1; i < NSELF; i++)
        if (self_called[i] != 1)
            self_order_ok = 0;
    for (int i = 0; i < idx; i++)
        if (self_called[i] != 0)
            self_order_ok = 0;
    MPI_Finalized(&flag);
    self_finalized_seen |= flag;
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    int rank, size, flag, key_dup, key_null, key_user, rc, cls;
    void *v;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Predefined attributes. */
    int *p;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &p, &flag);
    CHECK(flag && *p >= 32767, "MPI_TAG_UB %d", flag ? *p : -1);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_HOST, &p, &flag);
    CHECK(flag && (*p == MPI_PROC_NULL || (*p >= 0 && *p < size)), "MPI_HOST");
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_IO, &p, &flag);
    CHECK(flag && (*p == MPI_ANY_SOURCE || *p == MPI_PROC_NULL || (*p >= 0 && *p < size)), "MPI_IO");
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &p, &flag);
    CHECK(!flag || *p == 0 || *p == 1, "MPI_WTIME_IS_GLOBAL");
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &p, &flag);
    CHECK(!flag || *p >= size, "MPI_UNIVERSE_SIZE %d", flag ? *p : -1);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &p, &flag);
    CHECK(!flag || *p == 0, "MPI_APPNUM");
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &p, &flag);
    CHECK(flag && *p >= MPI_ERR_LASTCODE, "MPI_LASTUSEDCODE %d", flag ? *p : -1);

    /* Copy semantics on dup. */
    static int extra = 10;
    MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &key_dup, NULL);
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key_null, NULL);
    MPI_Comm_create_keyval(copy_plus_one, delete_log, &key_user, &extra);
    CHECK(key_dup != MPI_KEYVAL_INVALID && key_dup != key_null && key_null != key_user, "keyvals not distinct");
    MPI_Comm c1, c2;
    MPI_Comm_dup(MPI_COMM_WORLD, &c1);
    MPI_Comm_get_attr(c1, key_dup, &v, &flag);
    CHECK(!flag, "unset attribute found");
    MPI_Comm_set_attr(c1, key_dup, (void *)(MPI_Aint)(100 + rank));
    MPI_Comm_set_attr(c1, key_null, (void *)(MPI_Aint)200);
    MPI_Comm_set_attr(c1, key_user, (void *)(MPI_Aint)300);
    MPI_Comm_get_attr(c1, key_dup, &v, &flag);
    CHECK(flag && (MPI_Aint)v == 100 + rank, "get after set: %ld", (long)(MPI_Aint)v);
    MPI_Comm_dup(c1, &c2);
    MPI_Comm_get_attr(c2, key_dup, &v, &flag);
    CHECK(flag && (MPI_Aint)v == 100 + rank, "MPI_COMM_DUP_FN copy: flag %d value %ld", flag, (long)(MPI_Aint)v);
    MPI_Comm_get_attr(c2, key_null, &v, &flag);
    CHECK(!flag, "MPI_COMM_NULL_COPY_FN attribute was copied");
    MPI_Comm_get_attr(c2, key_user, &v, &flag);
    CHECK(flag && (MPI_Aint)v == 311, "user copy callback value %ld", (long)(MPI_Aint)v);

    /* Idup copies too. */
    MPI_Comm c3;
    MPI_Request req;
    MPI_Comm_idup(c2, &c3, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Comm_get_attr(c3, key_user, &v, &flag);
    CHECK(flag && (MPI_Aint)v == 322, "idup copy value %ld", (long)(MPI_Aint)v);

    /* Delete callbacks: on replace, on delete, on free (last set first). */
    nlog = 0;
    MPI_Comm_set_attr(c3, key_user, (void *)(MPI_Aint)1);
    CHECK(nlog == 1 && log_key[0] == key_user, "replace did not call the delete callback once (%d)", nlog);
    MPI_Comm_delete_attr(c3, key_user);
    CHECK(nlog == 2, "delete_attr did not call the delete callback (%d)", nlog);
    MPI_Comm_get_attr(c3, key_user, &v, &flag);
    CHECK(!flag, "attribute still there after delete");
    int k2, k3;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_log, &k2, NULL);
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_log, &k3, NULL);
    nlog = 0;
    MPI_Comm_set_attr(c3, k3, NULL);
    MPI_Comm_set_attr(c3, key_user, NULL);
    MPI_Comm_set_attr(c3, k2, NULL);
    MPI_Comm_free(&c3);
    CHECK(c3 == MPI_COMM_NULL, "freed comm not MPI_COMM_NULL");
    CHECK(nlog == 3 && log_key[0] == k2 && log_key[1] == key_user && log_key[2] == k3,
          "free deleted %d attributes, not in reverse order of setting", nlog);

    /* A freed keyval lives on while attributes use it; its callback still runs. */
    nlog = 0;
    MPI_Comm_set_attr(c2, k2, NULL);
    int k2copy = k2;
    MPI_Comm_free_keyval(&k2);
    CHECK(k2 == MPI_KEYVAL_INVALID, "freed keyval not MPI_KEYVAL_INVALID");
    MPI_Comm_free(&c2); /* deletes key_user's and k2copy's attributes */
    CHECK(nlog == 2 && log_key[0] == k2copy, "callback of a freed keyval did not run (%d)", nlog);

    /* A delete callback that deletes other attributes. */
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &other_key1, NULL);
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &other_key2, NULL);
    int kd;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_others, &kd, NULL);
    MPI_Comm_set_attr(c1, other_key1, NULL);
    MPI_Comm_set_attr(c1, kd, NULL);
    MPI_Comm_set_attr(c1, other_key2, NULL);
    MPI_Comm_delete_attr(c1, kd);
    MPI_Comm_get_attr(c1, other_key1, &v, &flag);
    CHECK(!flag, "other_key1 survived");
    MPI_Comm_get_attr(c1, other_key2, &v, &flag);
    CHECK(!flag, "other_key2 survived");

    /* Failing callbacks: the call fails, the attribute stays, a failed dup gives NULL. */
    MPI_Comm_set_errhandler(c1, MPI_ERRORS_RETURN);
    MPI_Comm_set_attr(c1, k3, (void *)(MPI_Aint)5);
    fail_delete = 1;
    rc = MPI_Comm_delete_attr(c1, k3);
    CHECK(rc != MPI_SUCCESS, "failing delete callback: delete_attr succeeded");
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_OTHER, "failing delete callback: class %d", cls);
    MPI_Comm_get_attr(c1, k3, &v, &flag);
    CHECK(flag && (MPI_Aint)v == 5, "attribute removed although its delete callback failed");
    rc = MPI_Comm_set_attr(c1, k3, (void *)(MPI_Aint)6);
    CHECK(rc != MPI_SUCCESS, "failing delete callback: set_attr over it succeeded");
    fail_delete = 0;
    MPI_Comm_delete_attr(c1, k3);
    int kf;
    MPI_Comm_create_keyval(copy_fails, MPI_COMM_NULL_DELETE_FN, &kf, NULL);
    MPI_Comm_set_attr(c1, kf, NULL);
    MPI_Comm bad = MPI_COMM_WORLD;
    rc = MPI_Comm_dup(c1, &bad);
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_OTHER, "failing copy callback: rc %d class %d", rc, cls);
    CHECK(bad == MPI_COMM_NULL, "failed dup did not give MPI_COMM_NULL");
    MPI_Comm_delete_attr(c1, kf);
    MPI_Comm_free_keyval(&kf);

    /* Errors: unknown keyval, predefined keyval set. */
    rc = MPI_Comm_set_attr(c1, 987654, NULL);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_KEYVAL, "set with unknown keyval: class %d", cls);
    rc = MPI_Comm_set_attr(c1, MPI_TAG_UB, NULL);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_KEYVAL, "set of MPI_TAG_UB: class %d", cls);

    /* Deprecated interface. */
    int kold;
    MPI_Keyval_create(MPI_DUP_FN, MPI_NULL_DELETE_FN, &kold, NULL);
    MPI_Attr_put(c1, kold, (void *)(MPI_Aint)77);
    MPI_Attr_get(c1, kold, &v, &flag);
    CHECK(flag && (MPI_Aint)v == 77, "Attr_get %ld", (long)(MPI_Aint)v);
    MPI_Attr_delete(c1, kold);
    MPI_Keyval_free(&kold);

    MPI_Comm_free(&c1);
    MPI_Comm_free_keyval(&key_dup);
    MPI_Comm_free_keyval(&key_null);
    MPI_Comm_free_keyval(&key_user);
    MPI_Comm_free_keyval(&k3);
    MPI_Comm_free_keyval(&kd);
    MPI_Comm_free_keyval(&other_key1);
    MPI_Comm_free_keyval(&other_key2);

    /* Attributes on MPI_COMM_SELF: deleted at the start of MPI_Finalize, last set first. */
    for (int i = 0; i < NSELF; i++) {
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &self_keys[i], NULL);
        MPI_Comm_set_attr(MPI_COMM_SELF, self_keys[i], (void *)(MPI_Aint)i);
        MPI_Comm_free_keyval(&self_keys[i]);
    }
    /* finish() finalizes; check the finalize-time callbacks after it. */
    int world_errs = finish();
    int bad_self = 0;
    for (int i = 0; i < NSELF; i++)
        bad_self += self_called[i] != 1;
    if (bad_self || !self_order_ok || self_finalized_seen) {
        fprintf(stderr, "rank %d: COMM_SELF attributes at finalize: %d wrong counts, order %s, finalized %d\n",
                rank, bad_self, self_order_ok ? "ok" : "wrong", self_finalized_seen);
        return 1;
    }
    return world_errs;
}
