/* ranks: 2
 *
 * MPI_Get_count / MPI_Get_elements (_x, _c) for derived types: partial elements of a
 * derived type (count MPI_UNDEFINED, elements counted; MPI_UNDEFINED where the bytes end
 * inside a basic element), struct types whose basic types
 * differ, pair types counting two basic elements each, zero-size types, and
 * MPI_Status_set_elements (_x, _c) giving back what Get_elements reads.
 */
#include "dt.h"

int main(int argc, char **argv)
{
    dt_init(&argc, &argv);
    const int peer = 1 - dt_rank;
    int ints[64];
    double dbl[16];
    for (int i = 0; i < 64; i++) ints[i] = i;
    for (int i = 0; i < 16; i++) dbl[i] = i;

    /* { int, double } struct and a contiguous triple of ints */
    MPI_Datatype id, tri;
    int bl[] = {1, 1};
    MPI_Aint d[] = {0, 8};
    MPI_Datatype ty[] = {MPI_INT, MPI_DOUBLE};
    DT_MPI(MPI_Type_create_struct(2, bl, d, ty, &id));
    DT_MPI(MPI_Type_commit(&id));
    DT_MPI(MPI_Type_contiguous(3, MPI_INT, &tri));
    DT_MPI(MPI_Type_commit(&tri));

    if (dt_rank == 1) {
        /* 7 ints; {int,double} x2 + one int; 3 bytes; nothing; double,int,double */
        DT_MPI(MPI_Send(ints, 7, MPI_INT, peer, 1, MPI_COMM_WORLD));
        char raw[40];
        int pos = 0;
        for (int k = 0; k < 2; k++) {
            DT_MPI(MPI_Pack(&ints[k], 1, MPI_INT, raw, 40, &pos, MPI_COMM_WORLD));
            DT_MPI(MPI_Pack(&dbl[k], 1, MPI_DOUBLE, raw, 40, &pos, MPI_COMM_WORLD));
        }
        DT_MPI(MPI_Pack(&ints[9], 1, MPI_INT, raw, 40, &pos, MPI_COMM_WORLD));
        DT_MPI(MPI_Send(raw, pos, MPI_PACKED, peer, 2, MPI_COMM_WORLD));
        DT_MPI(MPI_Send(raw, 3, MPI_BYTE, peer, 3, MPI_COMM_WORLD));
        DT_MPI(MPI_Send(raw, 0, MPI_BYTE, peer, 4, MPI_COMM_WORLD));
        pos = 0;
        DT_MPI(MPI_Pack(&dbl[1], 1, MPI_DOUBLE, raw, 40, &pos, MPI_COMM_WORLD));
        DT_MPI(MPI_Pack(&ints[2], 1, MPI_INT, raw, 40, &pos, MPI_COMM_WORLD));
        DT_MPI(MPI_Pack(&dbl[3], 1, MPI_DOUBLE, raw, 40, &pos, MPI_COMM_WORLD));
        DT_MPI(MPI_Send(raw, pos, MPI_PACKED, peer, 5, MPI_COMM_WORLD));
    } else {
        MPI_Status st;
        int c, e;
        MPI_Count ex, ec;
        int r[64];
        /* 7 ints as triples: 2 whole triples and one int */
        DT_MPI(MPI_Recv(r, 4, tri, peer, 1, MPI_COMM_WORLD, &st));
        DT_MPI(MPI_Get_count(&st, tri, &c));
        DT_MPI(MPI_Get_elements(&st, tri, &e));
        DT_MPI(MPI_Get_elements_x(&st, tri, &ex));
        DT_MPI(MPI_Get_elements_c(&st, tri, &ec));
        DT_CHECK(c == MPI_UNDEFINED && e == 7 && ex == 7 && ec == 7, "7 ints as triples: count %d elements %d/%lld/%lld",
                 c, e, (long long)ex, (long long)ec);
        DT_CHECK(r[6] == 6, "7 ints as triples: data");
        /* two {int,double} and one more int: 5 basic elements, 2 whole structs + part */
        struct { int i; double x; } s[4];
        DT_MPI(MPI_Recv(s, 4, id, peer, 2, MPI_COMM_WORLD, &st));
        DT_MPI(MPI_Get_count(&st, id, &c));
        DT_MPI(MPI_Get_elements(&st, id, &e));
        DT_CHECK(c == MPI_UNDEFINED && e == 5, "{int,double} x2.5: count %d elements %d", c, e);
        DT_CHECK(s[1].i == 1 && s[1].x == 1.0 && s[2].i == 9, "{int,double} data");
        /* 3 bytes as ints: not even one element */
        DT_MPI(MPI_Recv(r, 4, MPI_INT, peer, 3, MPI_COMM_WORLD, &st));
        DT_MPI(MPI_Get_count(&st, MPI_INT, &c));
        DT_MPI(MPI_Get_elements(&st, MPI_INT, &e));
        DT_CHECK(c == MPI_UNDEFINED && e == MPI_UNDEFINED, "3 bytes as MPI_INT: count %d elements %d", c, e);
        /* ... nor as triples: the bytes end inside the first int, which no matching send
         * makes (MPICH's errors/datatype/getcnterr wants an error or MPI_UNDEFINED) */
        DT_MPI(MPI_Get_elements(&st, tri, &e));
        DT_CHECK(e == MPI_UNDEFINED, "3 bytes as triples: %d elements, want MPI_UNDEFINED", e);
        /* nothing */
        DT_MPI(MPI_Recv(r, 4, id, peer, 4, MPI_COMM_WORLD, &st));
        DT_MPI(MPI_Get_count(&st, id, &c));
        DT_MPI(MPI_Get_elements(&st, id, &e));
        DT_CHECK(c == 0 && e == 0, "empty message: count %d elements %d", c, e);
        /* double,int,double received as two MPI_DOUBLE_INT: 3 basic elements */
        struct { double v; int k; } p[2];
        DT_MPI(MPI_Recv(p, 2, MPI_DOUBLE_INT, peer, 5, MPI_COMM_WORLD, &st));
        DT_MPI(MPI_Get_elements(&st, MPI_DOUBLE_INT, &e));
        DT_MPI(MPI_Get_count(&st, MPI_DOUBLE_INT, &c));
        DT_CHECK(e == 3 && c == MPI_UNDEFINED, "double,int,double as MPI_DOUBLE_INT: count %d elements %d, want 3 elements", c, e);
        MPI_Datatype two_pairs;
        DT_MPI(MPI_Type_contiguous(2, MPI_DOUBLE_INT, &two_pairs));
        DT_MPI(MPI_Type_commit(&two_pairs));
        DT_MPI(MPI_Get_elements(&st, two_pairs, &e));
        DT_CHECK(e == 3, "double,int,double as contiguous(2, MPI_DOUBLE_INT): %d elements, want 3", e);
        DT_CHECK(p[0].v == 1.0 && p[0].k == 2 && p[1].v == 3.0, "pair data");
        DT_MPI(MPI_Type_free(&two_pairs));
    }

    /* Status_set_elements round trips through Get_elements and Get_count */
    {
        MPI_Status st;
        int c, e;
        MPI_Count ex;
        DT_MPI(MPI_Status_set_elements(&st, id, 5));
        DT_MPI(MPI_Get_elements(&st, id, &e));
        DT_MPI(MPI_Get_count(&st, id, &c));
        DT_CHECK(e == 5 && c == MPI_UNDEFINED, "set_elements(5 of {int,double}): elements %d count %d", e, c);
        DT_MPI(MPI_Get_count(&st, MPI_BYTE, &c));
        DT_CHECK(c == 28, "set_elements(5 of {int,double}) is %d bytes, want 28", c);
        DT_MPI(MPI_Status_set_elements_x(&st, tri, 9));
        DT_MPI(MPI_Get_count(&st, tri, &c));
        DT_CHECK(c == 3, "set_elements_x(9 ints): count of triples %d", c);
        DT_MPI(MPI_Status_set_elements_c(&st, MPI_2INT, 6));
        DT_MPI(MPI_Get_elements_x(&st, MPI_2INT, &ex));
        DT_MPI(MPI_Get_count(&st, MPI_2INT, &c));
        DT_CHECK(ex == 6 && c == 3, "set_elements_c(6 of MPI_2INT): elements %lld count %d", (long long)ex, c);
        /* more than INT_MAX elements: the int query says MPI_UNDEFINED */
        MPI_Datatype big;
        DT_MPI(MPI_Type_contiguous(1 << 20, MPI_CHAR, &big));
        DT_MPI(MPI_Type_commit(&big));
        DT_MPI(MPI_Status_set_elements_c(&st, big, (MPI_Count)3 << 30));
        DT_MPI(MPI_Get_elements(&st, big, &e));
        DT_MPI(MPI_Get_elements_c(&st, big, &ex));
        DT_CHECK(e == MPI_UNDEFINED && ex == (MPI_Count)3 << 30, "3 Gi elements: %d / %lld", e, (long long)ex);
        DT_MPI(MPI_Type_free(&big));
        DT_FAILS(MPI_Status_set_elements(&st, MPI_INT, -1), MPI_ERR_COUNT);
    }

    DT_MPI(MPI_Type_free(&id));
    DT_MPI(MPI_Type_free(&tri));
    return dt_finalize();
}
