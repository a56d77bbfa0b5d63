/* ranks: 1 2 4 8
 * Comm_dup, Comm_idup, Comm_dup_with_info: congruent copies with their own traffic;
 * names; comparison; many dup/free cycles. */
#include "check.h"

int main(int argc, char **argv)
{
    int rank, size, cmp, len;
    char name[MPI_MAX_OBJECT_NAME];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    MPI_Comm_get_name(MPI_COMM_WORLD, name, &len);
    CHECK(strcmp(name, "MPI_COMM_WORLD") == 0, "world name '%.100s'", name);

    MPI_Comm a, b, c;
    MPI_Request req;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_idup(a, &b, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    CHECK(req == MPI_REQUEST_NULL, "idup request not freed by wait");
    MPI_Comm_dup_with_info(b, MPI_INFO_NULL, &c);
    MPI_Comm_compare(a, MPI_COMM_WORLD, &cmp);
    CHECK(cmp == MPI_CONGRUENT, "dup vs world %d", cmp);
    MPI_Comm_compare(a, a, &cmp);
    CHECK(cmp == MPI_IDENT, "a vs a %d", cmp);
    MPI_Comm_compare(b, c, &cmp);
    CHECK(cmp == MPI_CONGRUENT, "idup vs dup_with_info %d", cmp);
    MPI_Comm_get_name(a, name, &len);
    CHECK(len == 0, "dup carries a name '%.100s'", name);
    MPI_Comm_set_name(a, "first copy");
    MPI_Comm_get_name(a, name, &len);
    CHECK(strcmp(name, "first copy") == 0 && len == 10, "name '%.100s'", name);

    /* Same source and tag on four communicators: each message lands on its own. */
    if (size > 1) {
        int to = (rank + 1) % size, from = (rank - 1 + size) % size;
        int got[4] = {-1, -1, -1, -1};
        MPI_Comm cs[4] = {MPI_COMM_WORLD, a, b, c};
        MPI_Request rq[4];
        for (int i = 0; i < 4; i++)
            MPI_Irecv(&got[i], 1, MPI_INT, from, 0, cs[i], &rq[i]);
        for (int i = 3; i >= 0; i--)
            MPI_Send(&(int){i * 100 + from * 0 + rank}, 1, MPI_INT, to, 0, cs[i]);
        MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
        for (int i = 0; i < 4; i++)
            CHECK(got[i] == i * 100 + from, "comm %d got %d", i, got[i]);
    }

    /* Many dup/free cycles, and a dup of a dup of a dup. */
    for (int i = 0; i < 30; i++) {
        MPI_Comm t;
        MPI_Comm_dup(i % 2 ? a : b, &t);
        MPI_Comm_free(&t);
    }
    MPI_Comm chain = MPI_COMM_WORLD;
    for (int i = 0; i < 10; i++) {
        MPI_Comm n;
        MPI_Comm_dup(chain, &n);
        if (chain != MPI_COMM_WORLD)
            MPI_Comm_free(&chain);
        chain = n;
    }
    int r;
    MPI_Comm_rank(chain, &r);
    CHECK(r == rank, "rank after dup chain %d", r);
    MPI_Comm_free(&chain);

    /* Self: dup of MPI_COMM_SELF has one rank. */
    MPI_Comm s;
    MPI_Comm_dup(MPI_COMM_SELF, &s);
    int ss;
    MPI_Comm_size(s, &ss);
    CHECK(ss == 1, "self dup size %d", ss);
    MPI_Comm_free(&s);

    /* Freeing a predefined communicator is an error. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm w = MPI_COMM_WORLD;
    int rc = MPI_Comm_free(&w), cls;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COMM, "freeing MPI_COMM_WORLD: class %d", cls);

    MPI_Comm_free(&a);
    MPI_Comm_free(&b);
    MPI_Comm_free(&c);
    return finish();
}
