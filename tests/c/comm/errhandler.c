/* ranks: 1 2 4
 * Error handlers: user handlers called with the communicator and the error code (and free
 * to call MPI), inherited by dup, reference-counted through Errhandler_free and
 * Comm_get_errhandler, Comm_call_errhandler; user error classes, codes and strings. */
#include "check.h"

static int calls = 0, last_code = 0, last_class = 0;
static MPI_Comm last_comm = MPI_COMM_NULL;
static char last_text[MPI_MAX_ERROR_STRING];

static void handler(MPI_Comm *comm, int *code, ...)
{
    int len = 0;
    calls++;
    last_comm = *comm;
    last_code = *code;
    /* MPI calls from inside a handler work: the library lock is not held. */
    MPI_Error_class(*code, &last_class);
    MPI_Error_string(*code, last_text, &len);
}

int main(int argc, char **argv)
{
    int rank, size, rc, cls, len;
    char text[MPI_MAX_ERROR_STRING];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    MPI_Errhandler eh, got;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &got);
    CHECK(got == MPI_ERRORS_ARE_FATAL, "default handler of MPI_COMM_WORLD");
    MPI_Errhandler_free(&got);

    MPI_Comm_create_errhandler(handler, &eh);
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, eh);
    MPI_Comm_get_errhandler(c, &got);
    CHECK(got == eh, "get_errhandler returned another handler");
    MPI_Errhandler_free(&got);
    /* Freeing our handle keeps the handler alive while c uses it. */
    MPI_Errhandler_free(&eh);
    CHECK(eh == MPI_ERRHANDLER_NULL, "freed handler is not MPI_ERRHANDLER_NULL");

    /* An invalid rank: the handler sees c and an MPI_ERR_RANK code, the call returns it. */
    int buf = 0;
    rc = MPI_Send(&buf, 1, MPI_INT, size + 3, 0, c);
    CHECK(calls == 1, "handler called %d times", calls);
    CHECK(last_comm == c, "handler got another communicator");
    CHECK(last_code == rc, "handler code %d, call returned %d", last_code, rc);
    CHECK(last_class == MPI_ERR_RANK, "handler saw class %d", last_class);
    CHECK(strstr(last_text, "MPI_Send") != NULL, "error string '%.100s'", last_text);

    /* Another class: invalid tag. */
    rc = MPI_Send(&buf, 1, MPI_INT, 0, -7, c);
    MPI_Error_class(rc, &cls);
    CHECK(calls == 2 && cls == MPI_ERR_TAG && last_class == MPI_ERR_TAG, "tag error: calls %d class %d", calls, cls);

    /* Dup inherits the handler; call_errhandler invokes it with the given code. */
    MPI_Comm d;
    MPI_Comm_dup(c, &d);
    calls = 0;
    rc = MPI_Comm_call_errhandler(d, MPI_ERR_OTHER);
    CHECK(rc == MPI_SUCCESS, "call_errhandler returned %d", rc);
    CHECK(calls == 1 && last_code == MPI_ERR_OTHER && last_comm == d, "call_errhandler: calls %d code %d", calls, last_code);
    MPI_Comm_free(&d);
    MPI_Comm_free(&c);

    /* Split and create inherit the handler too. */
    MPI_Comm_create_errhandler(handler, &eh);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
    MPI_Errhandler_free(&eh);
    MPI_Comm s;
    MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &s);
    calls = 0;
    MPI_Comm_call_errhandler(s, MPI_ERR_ARG);
    CHECK(calls == 1 && last_comm == s && last_code == MPI_ERR_ARG, "split did not inherit the handler");
    MPI_Comm_free(&s);
    /* Errors not tied to a communicator go to MPI_COMM_WORLD's handler. */
    calls = 0;
    rc = MPI_Group_size(MPI_GROUP_NULL, &buf);
    CHECK(calls == 1 && last_comm == MPI_COMM_WORLD && last_class == MPI_ERR_GROUP, "group error: calls %d class %d", calls, last_class);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* MPI_ERRORS_RETURN: call_errhandler returns success, calls return codes. */
    rc = MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER);
    CHECK(rc == MPI_SUCCESS, "call_errhandler with MPI_ERRORS_RETURN returned %d", rc);
    rc = MPI_Errhandler_free(&eh);
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_ARG, "freeing MPI_ERRHANDLER_NULL: class %d", cls);

    /* User error classes, codes and strings. */
    int c1, c2, code1, code2, code3, lastused_before, *lu, flag;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &lu, &flag);
    lastused_before = *lu;
    MPI_Add_error_class(&c1);
    MPI_Add_error_class(&c2);
    CHECK(c1 != c2 && c1 > MPI_ERR_ABI && c2 > MPI_ERR_ABI, "new classes %d %d", c1, c2);
    MPI_Add_error_code(c1, &code1);
    MPI_Add_error_code(c1, &code2);
    MPI_Add_error_code(MPI_ERR_ARG, &code3);
    CHECK(code1 != code2 && code1 != c1 && code1 != c2, "new codes %d %d", code1, code2);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &lu, &flag);
    CHECK(*lu >= lastused_before && *lu >= c2 && *lu >= code3 && *lu >= MPI_ERR_LASTCODE, "MPI_LASTUSEDCODE %d", *lu);
    MPI_Error_class(code1, &cls);
    CHECK(cls == c1, "class of code1 %d", cls);
    MPI_Error_class(c2, &cls);
    CHECK(cls == c2, "class of class c2 %d", cls);
    MPI_Error_class(code3, &cls);
    CHECK(cls == MPI_ERR_ARG, "class of code in MPI_ERR_ARG %d", cls);
    MPI_Add_error_string(code1, "first code of the new class");
    MPI_Add_error_string(c1, "the new class");
    MPI_Error_string(code1, text, &len);
    CHECK(strcmp(text, "first code of the new class") == 0 && len == (int)strlen(text), "string '%.100s'", text);
    MPI_Error_string(c1, text, &len);
    CHECK(strcmp(text, "the new class") == 0, "class string '%.100s'", text);
    MPI_Add_error_string(code1, "replaced");
    MPI_Error_string(code1, text, &len);
    CHECK(strcmp(text, "replaced") == 0, "replaced string '%.100s'", text);
    MPI_Error_string(code2, text, &len);
    CHECK(len == 0, "code without a string gave '%.100s'", text);
    rc = MPI_Add_error_string(MPI_ERR_ARG, "no");
    CHECK(rc != MPI_SUCCESS, "changing a predefined class's string succeeded");

    /* A user code through a user handler. */
    MPI_Comm_create_errhandler(handler, &eh);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, eh);
    calls = 0;
    MPI_Comm_call_errhandler(MPI_COMM_SELF, code2);
    CHECK(calls == 1 && last_code == code2 && last_class == c1 && last_comm == MPI_COMM_SELF, "user code through handler");
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Errhandler_free(&eh);

    /* Removal (MPI 4.1): values come back for reuse, removed ones are invalid. */
    rc = MPI_Remove_error_class(c1);
    CHECK(rc != MPI_SUCCESS, "removing a class that has codes succeeded");
    rc = MPI_Remove_error_code(code1);
    CHECK(rc != MPI_SUCCESS, "removing a code that has a string succeeded");
    MPI_Remove_error_string(code1);
    MPI_Remove_error_code(code1);
    MPI_Remove_error_code(code2);
    MPI_Remove_error_code(code3);
    rc = MPI_Remove_error_class(c1);
    CHECK(rc != MPI_SUCCESS, "removing a class that has a string succeeded");
    MPI_Remove_error_string(c1);
    rc = MPI_Remove_error_class(c1);
    CHECK(rc == MPI_SUCCESS, "removing class c1 failed");
    MPI_Remove_error_class(c2);
    rc = MPI_Error_class(code1, &cls);
    CHECK(rc != MPI_SUCCESS, "removed code still has a class (%d)", cls);
    for (int i = 0; i < 2000; i++) {
        int k, kc;
        MPI_Add_error_class(&k);
        MPI_Add_error_code(k, &kc);
        MPI_Remove_error_code(kc);
        MPI_Remove_error_class(k);
    }

    return finish();
}
