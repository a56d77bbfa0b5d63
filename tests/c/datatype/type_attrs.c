/* type_attrs: datatype attributes. Type_create_keyval / Type_set_attr /
 * Type_get_attr / Type_delete_attr / Type_free_keyval; copy callbacks on
 * Type_dup (user function, MPI_TYPE_DUP_FN, MPI_TYPE_NULL_COPY_FN, flag 0,
 * a failing copy fails the dup); delete callbacks on delete, on replacement,
 * on Type_free (last set first), with the right handle, keyval and
 * extra_state, and allowed to call MPI; a keyval freed while attached keeps
 * working; predefined types carry attributes; error classes for the wrong
 * kind of keyval, MPI_DATATYPE_NULL and invalid keyvals.
 * ranks: 1
 * timeout: 30
 */
#include "../tc.h"

static int copies, deletes;
static MPI_Datatype last_type;
static int last_key;
static void *last_extra;
static int order[8], norder;

static int copy_fn(MPI_Datatype t, int key, void *extra, void *in, void *out, int *flag)
{
    copies++;
    last_type = t;
    last_key = key;
    last_extra = extra;
    *(long *)out = (long)in + 1; /* the copy is the value plus one */
    *flag = 1;
    return MPI_SUCCESS;
}

static int nocopy_fn(MPI_Datatype t, int key, void *extra, void *in, void *out, int *flag)
{
    (void)t, (void)key, (void)extra, (void)in, (void)out;
    copies++;
    *flag = 0;
    return MPI_SUCCESS;
}

static int failcopy_fn(MPI_Datatype t, int key, void *extra, void *in, void *out, int *flag)
{
    (void)t, (void)key, (void)extra, (void)in, (void)out, (void)flag;
    return MPI_ERR_OTHER;
}

static int delete_fn(MPI_Datatype t, int key, void *val, void *extra)
{
    int size = -1;
    deletes++;
    last_type = t;
    last_key = key;
    last_extra = extra;
    if (norder < 8)
        order[norder++] = (int)(long)val;
    /* Callbacks may call MPI (the library must not hold its lock here). */
    if (MPI_Type_size(t, &size) != MPI_SUCCESS || size < 0)
        return MPI_ERR_OTHER;
    return MPI_SUCCESS;
}

static int eclass(int rc)
{
    int c = -1;
    MPI_Error_class(rc, &c);
    return c;
}

int main(int argc, char **argv)
{
    tc_init(&argc, &argv, "type_attrs");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int extra_marker = 0, flag = -1, key, key2, ckey;
    void *val = NULL;
    MPI_Datatype t, d;

    TC_MPI(MPI_Type_contiguous(3, MPI_INT, &t));
    TC_MPI(MPI_Type_create_keyval(copy_fn, delete_fn, &key, &extra_marker));
    TC_CHECK(key != MPI_KEYVAL_INVALID, "keyval not set");

    /* Not set yet. */
    TC_MPI(MPI_Type_get_attr(t, key, &val, &flag));
    TC_CHECK(flag == 0, "attribute reported before it was set");

    /* Set, get, replace (old value deleted), get. */
    TC_MPI(MPI_Type_set_attr(t, key, (void *)10L));
    TC_MPI(MPI_Type_get_attr(t, key, &val, &flag));
    TC_CHECK(flag == 1 && val == (void *)10L, "get: flag %d value %p", flag, val);
    TC_MPI(MPI_Type_set_attr(t, key, (void *)20L));
    TC_CHECK(deletes == 1 && order[0] == 10 && last_type == t && last_key == key && last_extra == &extra_marker,
             "replacing did not delete the old value properly (deletes %d)", deletes);
    TC_MPI(MPI_Type_get_attr(t, key, &val, &flag));
    TC_CHECK(flag == 1 && val == (void *)20L, "after replace: flag %d value %p", flag, val);

    /* Dup copies through the callback (uncommitted type: allowed). */
    TC_MPI(MPI_Type_dup(t, &d));
    TC_CHECK(copies == 1 && last_type == t && last_key == key && last_extra == &extra_marker,
             "copy callback: %d calls", copies);
    TC_MPI(MPI_Type_get_attr(d, key, &val, &flag));
    TC_CHECK(flag == 1 && val == (void *)21L, "dup: flag %d value %p", flag, val);
    TC_MPI(MPI_Type_get_attr(t, key, &val, &flag));
    TC_CHECK(flag == 1 && val == (void *)20L, "original after dup: value %p", val);

    /* Free the dup: its attribute is deleted with the dup's handle. */
    MPI_Datatype dsave = d;
    norder = 0;
    TC_MPI(MPI_Type_free(&d));
    TC_CHECK(d == MPI_DATATYPE_NULL && deletes == 2 && order[0] == 21 && last_type == dsave,
             "Type_free of the dup: deletes %d", deletes);

    /* Explicit delete. */
    TC_MPI(MPI_Type_delete_attr(t, key));
    TC_CHECK(deletes == 3, "delete_attr did not call the delete callback");
    TC_MPI(MPI_Type_get_attr(t, key, &val, &flag));
    TC_CHECK(flag == 0, "attribute still there after delete");
    TC_MPI(MPI_Type_delete_attr(t, key)); /* not set: nothing to do */
    TC_CHECK(deletes == 3, "delete of an absent attribute called back");

    /* MPI_TYPE_DUP_FN copies the value; MPI_TYPE_NULL_COPY_FN and flag 0 do not. */
    {
        int kd, kn, kz;
        TC_MPI(MPI_Type_create_keyval(MPI_TYPE_DUP_FN, MPI_TYPE_NULL_DELETE_FN, &kd, NULL));
        TC_MPI(MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &kn, NULL));
        TC_MPI(MPI_Type_create_keyval(nocopy_fn, MPI_TYPE_NULL_DELETE_FN, &kz, NULL));
        TC_MPI(MPI_Type_set_attr(t, kd, (void *)5L));
        TC_MPI(MPI_Type_set_attr(t, kn, (void *)6L));
        TC_MPI(MPI_Type_set_attr(t, kz, (void *)7L));
        copies = 0;
        TC_MPI(MPI_Type_dup(t, &d));
        TC_CHECK(copies == 1, "nocopy_fn called %d times", copies);
        TC_MPI(MPI_Type_get_attr(d, kd, &val, &flag));
        TC_CHECK(flag == 1 && val == (void *)5L, "TYPE_DUP_FN: flag %d value %p", flag, val);
        TC_MPI(MPI_Type_get_attr(d, kn, &val, &flag));
        TC_CHECK(flag == 0, "TYPE_NULL_COPY_FN copied");
        TC_MPI(MPI_Type_get_attr(d, kz, &val, &flag));
        TC_CHECK(flag == 0, "a copy callback returning flag 0 copied");
        TC_MPI(MPI_Type_free(&d));
        TC_MPI(MPI_Type_delete_attr(t, kd));
        TC_MPI(MPI_Type_delete_attr(t, kn));
        TC_MPI(MPI_Type_delete_attr(t, kz));
        TC_MPI(MPI_Type_free_keyval(&kd));
        TC_CHECK(kd == MPI_KEYVAL_INVALID, "Type_free_keyval did not reset the keyval");
        TC_MPI(MPI_Type_free_keyval(&kn));
        TC_MPI(MPI_Type_free_keyval(&kz));
    }

    /* A failing copy callback fails the dup with its code. */
    {
        int kf;
        TC_MPI(MPI_Type_create_keyval(failcopy_fn, MPI_TYPE_NULL_DELETE_FN, &kf, NULL));
        TC_MPI(MPI_Type_set_attr(t, kf, (void *)1L));
        d = MPI_DATATYPE_NULL;
        int rc = MPI_Type_dup(t, &d);
        TC_CHECK(rc != MPI_SUCCESS && eclass(rc) == MPI_ERR_OTHER, "failing copy: class %d", eclass(rc));
        TC_MPI(MPI_Type_delete_attr(t, kf));
        TC_MPI(MPI_Type_free_keyval(&kf));
    }

    /* Freeing a type deletes its attributes, last set first, even with a freed keyval. */
    TC_MPI(MPI_Type_create_keyval(copy_fn, delete_fn, &key2, NULL));
    TC_MPI(MPI_Type_set_attr(t, key, (void *)1L));
    TC_MPI(MPI_Type_set_attr(t, key2, (void *)2L));
    TC_MPI(MPI_Type_free_keyval(&key2));
    TC_MPI(MPI_Type_commit(&t));
    norder = 0;
    deletes = 0;
    TC_MPI(MPI_Type_free(&t));
    TC_CHECK(deletes == 2 && order[0] == 2 && order[1] == 1, "Type_free: %d deletes, order %d %d",
             deletes, order[0], order[1]);

    /* Predefined types carry attributes too. */
    deletes = 0;
    TC_MPI(MPI_Type_set_attr(MPI_INT, key, (void *)33L));
    TC_MPI(MPI_Type_get_attr(MPI_INT, key, &val, &flag));
    TC_CHECK(flag == 1 && val == (void *)33L, "MPI_INT: flag %d value %p", flag, val);
    TC_MPI(MPI_Type_get_attr(MPI_DOUBLE, key, &val, &flag));
    TC_CHECK(flag == 0, "MPI_DOUBLE has MPI_INT's attribute");
    TC_MPI(MPI_Type_delete_attr(MPI_INT, key));
    TC_CHECK(deletes == 1 && last_type == MPI_INT, "MPI_INT delete: %d", deletes);

    /* Errors. */
    TC_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &ckey, NULL));
    int rc = MPI_Type_set_attr(MPI_INT, ckey, NULL);
    TC_CHECK(eclass(rc) == MPI_ERR_KEYVAL, "communicator keyval on a type: class %d", eclass(rc));
    rc = MPI_Comm_set_attr(MPI_COMM_WORLD, key, NULL);
    TC_CHECK(eclass(rc) == MPI_ERR_KEYVAL, "type keyval on a communicator: class %d", eclass(rc));
    rc = MPI_Type_get_attr(MPI_DATATYPE_NULL, key, &val, &flag);
    TC_CHECK(eclass(rc) == MPI_ERR_TYPE, "MPI_DATATYPE_NULL: class %d", eclass(rc));
    rc = MPI_Type_set_attr(MPI_INT, MPI_KEYVAL_INVALID, NULL);
    TC_CHECK(eclass(rc) == MPI_ERR_KEYVAL, "MPI_KEYVAL_INVALID: class %d", eclass(rc));
    rc = MPI_Type_free_keyval(&ckey);
    TC_CHECK(eclass(rc) == MPI_ERR_KEYVAL, "Type_free_keyval of a communicator keyval: class %d", eclass(rc));
    TC_MPI(MPI_Comm_free_keyval(&ckey));
    int ksave = key;
    TC_MPI(MPI_Type_free_keyval(&key));
    rc = MPI_Type_get_attr(MPI_INT, ksave, &val, &flag);
    TC_CHECK(eclass(rc) == MPI_ERR_KEYVAL, "freed keyval: class %d", eclass(rc));

    return tc_finalize();
}
