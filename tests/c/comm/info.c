/* ranks: 1 2
 * Info objects: set/get/get_string/get_valuelen/delete/nkeys/nthkey/dup/free, length
 * limits and their error classes, MPI_INFO_ENV, MPI_INFO_NULL checks; communicator info
 * hints (set_info, get_info, dup_with_info). */
#include "check.h"

static int class_of(int rc)
{
    int c = -1;
    MPI_Error_class(rc, &c);
    return c;
}

int main(int argc, char **argv)
{
    int flag, n, len, rc;
    char key[MPI_MAX_INFO_KEY], val[MPI_MAX_INFO_VAL + 1];
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    MPI_Info info, dup;
    MPI_Info_create(&info);
    MPI_Info_get_nkeys(info, &n);
    CHECK(n == 0, "new info has %d keys", n);
    MPI_Info_set(info, "zeta", "1");
    MPI_Info_set(info, "alpha", "two");
    MPI_Info_set(info, "mid", "3");
    MPI_Info_set(info, "zeta", "one"); /* replace keeps the position */
    MPI_Info_get_nkeys(info, &n);
    CHECK(n == 3, "nkeys %d", n);
    MPI_Info_get_nthkey(info, 0, key);
    CHECK(strcmp(key, "zeta") == 0, "key 0 '%.100s'", key);
    MPI_Info_get_nthkey(info, 2, key);
    CHECK(strcmp(key, "mid") == 0, "key 2 '%.100s'", key);
    MPI_Info_get(info, "zeta", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(flag && strcmp(val, "one") == 0, "zeta '%.100s'", val);
    MPI_Info_get(info, "nope", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(!flag, "missing key found");
    MPI_Info_get_valuelen(info, "alpha", &len, &flag);
    CHECK(flag && len == 3, "valuelen %d", len);
    /* Truncation: valuelen characters, then NUL. */
    MPI_Info_get(info, "alpha", 2, val, &flag);
    CHECK(flag && strcmp(val, "tw") == 0, "truncated '%.100s'", val);
    /* get_string: buflen in/out. */
    int buflen = 2;
    MPI_Info_get_string(info, "alpha", &buflen, val, &flag);
    CHECK(flag && buflen == 4 && strcmp(val, "t") == 0, "get_string buflen %d '%.100s'", buflen, val);
    buflen = 0;
    MPI_Info_get_string(info, "mid", &buflen, NULL, &flag);
    CHECK(flag && buflen == 2, "get_string size query %d", buflen);

    MPI_Info_dup(info, &dup);
    MPI_Info_delete(info, "alpha");
    MPI_Info_get_nkeys(info, &n);
    CHECK(n == 2, "nkeys after delete %d", n);
    MPI_Info_get(dup, "alpha", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(flag && strcmp(val, "two") == 0, "dup is not independent");

    /* Errors and their classes. */
    rc = MPI_Info_delete(info, "alpha");
    CHECK(class_of(rc) == MPI_ERR_INFO_NOKEY, "delete missing key: class %d", class_of(rc));
    char longkey[MPI_MAX_INFO_KEY + 10];
    memset(longkey, 'k', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = 0;
    rc = MPI_Info_set(info, longkey, "v");
    CHECK(class_of(rc) == MPI_ERR_INFO_KEY, "long key: class %d", class_of(rc));
    rc = MPI_Info_set(info, "", "v");
    CHECK(class_of(rc) == MPI_ERR_INFO_KEY, "empty key: class %d", class_of(rc));
    static char longval[MPI_MAX_INFO_VAL + 10];
    memset(longval, 'v', sizeof longval - 1);
    rc = MPI_Info_set(info, "k", longval);
    CHECK(class_of(rc) == MPI_ERR_INFO_VALUE, "long value: class %d", class_of(rc));
    rc = MPI_Info_get_nthkey(info, 5, key);
    CHECK(class_of(rc) == MPI_ERR_ARG, "nthkey out of range: class %d", class_of(rc));
    rc = MPI_Info_set(MPI_INFO_NULL, "k", "v");
    CHECK(class_of(rc) == MPI_ERR_INFO, "set on MPI_INFO_NULL: class %d", class_of(rc));
    rc = MPI_Info_get_nkeys(MPI_INFO_NULL, &n);
    CHECK(class_of(rc) == MPI_ERR_INFO, "nkeys of MPI_INFO_NULL: class %d", class_of(rc));

    /* MPI_INFO_ENV: readable, duplicable, not modifiable. */
    MPI_Info_get_nkeys(MPI_INFO_ENV, &n);
    CHECK(n > 0, "MPI_INFO_ENV has no keys");
    MPI_Info_get(MPI_INFO_ENV, "command", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(flag && strstr(val, "info") != NULL, "MPI_INFO_ENV command '%.100s'", flag ? val : "");
    MPI_Info_get(MPI_INFO_ENV, "maxprocs", MPI_MAX_INFO_VAL, val, &flag);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(flag && atoi(val) == size, "MPI_INFO_ENV maxprocs '%.100s'", flag ? val : "");
    MPI_Info envdup;
    MPI_Info_dup(MPI_INFO_ENV, &envdup);
    MPI_Info_set(envdup, "extra", "x");
    MPI_Info_free(&envdup);
    rc = MPI_Info_set(MPI_INFO_ENV, "extra", "x");
    CHECK(rc != MPI_SUCCESS, "MPI_INFO_ENV was modified");

    /* Communicator hints: assertions are kept, unknown keys ignored, dup inherits,
     * dup_with_info replaces. */
    MPI_Comm c, d, e;
    MPI_Info h, used;
    MPI_Info_create(&h);
    MPI_Info_set(h, "mpi_assert_no_any_tag", "true");
    MPI_Info_set(h, "unknown_hint_key", "true");
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_info(c, h);
    MPI_Comm_get_info(c, &used);
    MPI_Info_get(used, "mpi_assert_no_any_tag", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(flag && strcmp(val, "true") == 0, "hint not kept");
    MPI_Info_get(used, "unknown_hint_key", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(!flag, "unknown hint kept");
    MPI_Info_free(&used);
    MPI_Comm_dup(c, &d);
    MPI_Comm_get_info(d, &used);
    MPI_Info_get(used, "mpi_assert_no_any_tag", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(flag, "dup did not inherit hints");
    MPI_Info_free(&used);
    MPI_Comm_dup_with_info(c, MPI_INFO_NULL, &e);
    MPI_Comm_get_info(e, &used);
    MPI_Info_get_nkeys(used, &n);
    CHECK(n == 0, "dup_with_info(MPI_INFO_NULL) kept %d hints", n);
    MPI_Info_free(&used);
    MPI_Comm_free(&c);
    MPI_Comm_free(&d);
    MPI_Comm_free(&e);
    MPI_Info_free(&h);

    MPI_Info_free(&info);
    MPI_Info_free(&dup);
    CHECK(info == MPI_INFO_NULL, "freed info is not MPI_INFO_NULL");
    return finish();
}
