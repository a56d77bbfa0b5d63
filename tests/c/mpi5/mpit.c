/* ranks: 1
 * MPI_T: control variables are the STEADFAST_* tunables (read-only strings in category
 * "steadfast"), found by index and by name, readable through handles, refusing writes;
 * performance variables are in a second category (tests/c/mpi5/pvars.c exercises them); no
 * events; MPI_T works before MPI_Init and error codes are MPI_T's. */
#include "../tc.h"

int main(int argc, char **argv)
{
    int provided, n, rc;
    /* Before MPI_Init. */
    rc = MPI_T_cvar_get_num(&n);
    int not_init = rc == MPI_T_ERR_NOT_INITIALIZED;
    TC_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    tc_init(&argc, &argv, "mpit");
    TC_CHECK(not_init, "cvar_get_num before MPI_T_init_thread: %d", rc);
    TC_MPI(MPI_T_cvar_get_num(&n));
    TC_CHECK(n > 10, "%d control variables", n);
    int idx;
    TC_MPI(MPI_T_cvar_get_index("STEADFAST_EAGER_LIMIT", &idx));
    char name[128], desc[512];
    int name_len = sizeof name, desc_len = sizeof desc, verb, bind, scope;
    MPI_Datatype dt;
    MPI_T_enum en;
    TC_MPI(MPI_T_cvar_get_info(idx, name, &name_len, &verb, &dt, &en, desc, &desc_len, &bind, &scope));
    TC_CHECK(strcmp(name, "STEADFAST_EAGER_LIMIT") == 0 && name_len == (int)strlen(name) + 1, "name %s len %d", name, name_len);
    TC_CHECK(dt == MPI_CHAR && scope == MPI_T_SCOPE_READONLY && bind == MPI_T_BIND_NO_OBJECT, "cvar info");
    MPI_T_cvar_handle h;
    int count;
    TC_MPI(MPI_T_cvar_get_index("STEADFAST_PATH", &idx));
    TC_MPI(MPI_T_cvar_handle_alloc(idx, NULL, &h, &count));
    char *val = calloc(count, 1);
    TC_MPI(MPI_T_cvar_read(h, val));
    const char *env = getenv("STEADFAST_PATH");
    TC_CHECK(strcmp(val, env ? env : "shm") == 0, "STEADFAST_PATH reads %s", val);
    TC_CHECK(MPI_T_cvar_write(h, "tcp") == MPI_T_ERR_CVAR_SET_NEVER, "cvar write refused");
    TC_MPI(MPI_T_cvar_handle_free(&h));
    TC_CHECK(h == MPI_T_CVAR_HANDLE_NULL, "handle freed");
    TC_CHECK(MPI_T_cvar_get_index("NO_SUCH_VARIABLE", &idx) == MPI_T_ERR_INVALID_NAME, "unknown name");
    TC_CHECK(MPI_T_cvar_get_info(n, name, &name_len, &verb, &dt, &en, desc, &desc_len, &bind, &scope) == MPI_T_ERR_INVALID_INDEX, "index past the end");
    int ncat, ncv;
    TC_MPI(MPI_T_category_get_num(&ncat));
    TC_CHECK(ncat == 2, "%d categories", ncat);
    name_len = sizeof name;
    desc_len = sizeof desc;
    int npv, nsub;
    TC_MPI(MPI_T_category_get_info(0, name, &name_len, desc, &desc_len, &ncv, &npv, &nsub));
    TC_CHECK(ncv == n && npv == 0 && nsub == 0 && strcmp(name, "steadfast") == 0, "category info");
    int *ix = malloc(n * sizeof(int));
    TC_MPI(MPI_T_category_get_cvars(0, n, ix));
    TC_CHECK(ix[n - 1] == n - 1, "category cvars");
    int npv_all, npv_cat;
    TC_MPI(MPI_T_pvar_get_num(&npv_all));
    name_len = sizeof name;
    desc_len = sizeof desc;
    TC_MPI(MPI_T_category_get_info(1, name, &name_len, desc, &desc_len, &ncv, &npv_cat, &nsub));
    TC_CHECK(ncv == 0 && npv_cat == npv_all && npv_all > 0 && strcmp(name, "steadfast_paths") == 0, "pvar category: %d cvars, %d of %d pvars, %s", ncv, npv_cat, npv_all, name);
    MPI_T_pvar_session ps;
    TC_MPI(MPI_T_pvar_session_create(&ps));
    TC_MPI(MPI_T_pvar_start(ps, MPI_T_PVAR_ALL_HANDLES));
    TC_MPI(MPI_T_pvar_session_free(&ps));
    TC_CHECK(ps == MPI_T_PVAR_SESSION_NULL, "session freed");
    TC_MPI(MPI_T_event_get_num(&n));
    TC_CHECK(n == 0, "%d events", n);
    TC_MPI(MPI_T_finalize());
    free(val);
    free(ix);
    return tc_finalize();
}
