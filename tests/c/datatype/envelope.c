/* ranks: 1
 *
 * Type_get_envelope / Type_get_contents (and their _c forms) report every constructor's
 * arguments; a type rebuilt from its contents, recursively, packs exactly like the
 * original. Names: predefined types carry their C names, derived ones start unnamed,
 * Type_set_name renames both.
 */
#include "dt.h"

/* Rebuild `t` from its envelope, recursively, with the non-large or the large calls. */
static MPI_Datatype rebuild(MPI_Datatype t, int large)
{
    int ni, na, nd, comb, deep = large;
    MPI_Count cni = 0, cna = 0, cnc = 0, cnd = 0;
    if (large) {
        DT_MPI(MPI_Type_get_envelope_c(t, &cni, &cna, &cnc, &cnd, &comb));
        ni = (int)cni;
        na = (int)cna;
        nd = (int)cnd;
        /* a type made by a non-large constructor has no large counts: rebuild it as such */
        if (cnc == 0)
            large = 0;
    } else {
        DT_MPI(MPI_Type_get_envelope(t, &ni, &na, &nd, &comb));
    }
    if (comb == MPI_COMBINER_NAMED)
        return t;
    int *in = malloc(sizeof(int) * (size_t)(ni + 1));
    MPI_Aint *ad = malloc(sizeof(MPI_Aint) * (size_t)(na + 1));
    MPI_Count *co = malloc(sizeof(MPI_Count) * (size_t)(cnc + 1));
    MPI_Datatype *ty = malloc(sizeof(MPI_Datatype) * (size_t)(nd + 1));
    if (cnc > 0)
        DT_MPI(MPI_Type_get_contents_c(t, ni, na, cnc, nd, in, ad, co, ty));
    else
        DT_MPI(MPI_Type_get_contents(t, ni, na, nd, in, ad, ty));
    MPI_Datatype kids[16], out = MPI_DATATYPE_NULL;
    for (int i = 0; i < nd && i < 16; i++)
        kids[i] = rebuild(ty[i], deep);
    switch (comb) {
    case MPI_COMBINER_DUP:
        DT_MPI(MPI_Type_dup(kids[0], &out));
        break;
    case MPI_COMBINER_CONTIGUOUS:
        if (large) DT_MPI(MPI_Type_contiguous_c(co[0], kids[0], &out));
        else DT_MPI(MPI_Type_contiguous(in[0], kids[0], &out));
        break;
    case MPI_COMBINER_VECTOR:
        if (large) DT_MPI(MPI_Type_vector_c(co[0], co[1], co[2], kids[0], &out));
        else DT_MPI(MPI_Type_vector(in[0], in[1], in[2], kids[0], &out));
        break;
    case MPI_COMBINER_HVECTOR:
        if (large) DT_MPI(MPI_Type_create_hvector_c(co[0], co[1], co[2], kids[0], &out));
        else DT_MPI(MPI_Type_create_hvector(in[0], in[1], ad[0], kids[0], &out));
        break;
    case MPI_COMBINER_INDEXED:
        if (large) DT_MPI(MPI_Type_indexed_c(co[0], co + 1, co + 1 + co[0], kids[0], &out));
        else DT_MPI(MPI_Type_indexed(in[0], in + 1, in + 1 + in[0], kids[0], &out));
        break;
    case MPI_COMBINER_HINDEXED:
        if (large) DT_MPI(MPI_Type_create_hindexed_c(co[0], co + 1, co + 1 + co[0], kids[0], &out));
        else DT_MPI(MPI_Type_create_hindexed(in[0], in + 1, ad, kids[0], &out));
        break;
    case MPI_COMBINER_INDEXED_BLOCK:
        if (large) DT_MPI(MPI_Type_create_indexed_block_c(co[0], co[1], co + 2, kids[0], &out));
        else DT_MPI(MPI_Type_create_indexed_block(in[0], in[1], in + 2, kids[0], &out));
        break;
    case MPI_COMBINER_HINDEXED_BLOCK:
        if (large) DT_MPI(MPI_Type_create_hindexed_block_c(co[0], co[1], co + 2, kids[0], &out));
        else DT_MPI(MPI_Type_create_hindexed_block(in[0], in[1], ad, kids[0], &out));
        break;
    case MPI_COMBINER_STRUCT:
        if (large) DT_MPI(MPI_Type_create_struct_c(co[0], co + 1, co + 1 + co[0], kids, &out));
        else DT_MPI(MPI_Type_create_struct(in[0], in + 1, ad, kids, &out));
        break;
    case MPI_COMBINER_SUBARRAY:
        if (large) {
            int n = in[0];
            DT_MPI(MPI_Type_create_subarray_c(n, co, co + n, co + 2 * n, in[1], kids[0], &out));
        } else {
            int n = in[0];
            DT_MPI(MPI_Type_create_subarray(n, in + 1, in + 1 + n, in + 1 + 2 * n, in[1 + 3 * n], kids[0], &out));
        }
        break;
    case MPI_COMBINER_DARRAY:
        if (large) {
            int n = in[2];
            DT_MPI(MPI_Type_create_darray_c(in[0], in[1], n, co, in + 3, in + 3 + n, in + 3 + 2 * n, in[3 + 3 * n],
                                            kids[0], &out));
        } else {
            int n = in[2];
            DT_MPI(MPI_Type_create_darray(in[0], in[1], n, in + 3, in + 3 + n, in + 3 + 2 * n, in + 3 + 3 * n,
                                          in[3 + 4 * n], kids[0], &out));
        }
        break;
    case MPI_COMBINER_RESIZED:
        if (large) DT_MPI(MPI_Type_create_resized_c(kids[0], co[0], co[1], &out));
        else DT_MPI(MPI_Type_create_resized(kids[0], ad[0], ad[1], &out));
        break;
    default:
        DT_ERR("unexpected combiner %d", comb);
        out = MPI_INT;
    }
    for (int i = 0; i < nd && i < 16; i++) {
        MPI_Count a, b, c, e;
        int k;
        DT_MPI(MPI_Type_get_envelope_c(ty[i], &a, &b, &c, &e, &k));
        if (k != MPI_COMBINER_NAMED) {
            DT_MPI(MPI_Type_free(&kids[i]));
            DT_MPI(MPI_Type_free(&ty[i]));
        }
    }
    free(in);
    free(ad);
    free(co);
    free(ty);
    return out;
}

/* `t` and its rebuilt copy describe the same data: same size, bounds, and packed bytes. */
static void same_as_rebuilt(const char *what, MPI_Datatype t, int large)
{
    MPI_Datatype r = rebuild(t, large);
    DT_MPI(MPI_Type_commit(&r));
    MPI_Aint lb1, e1, lb2, e2;
    int s1, s2;
    DT_MPI(MPI_Type_get_extent(t, &lb1, &e1));
    DT_MPI(MPI_Type_get_extent(r, &lb2, &e2));
    DT_MPI(MPI_Type_size(t, &s1));
    DT_MPI(MPI_Type_size(r, &s2));
    DT_CHECK(lb1 == lb2 && e1 == e2 && s1 == s2, "%s: rebuilt lb/extent/size %ld/%ld/%d, original %ld/%ld/%d", what,
             (long)lb2, (long)e2, s2, (long)lb1, (long)e1, s1);
    enum { SPAN = 1 << 16 };
    unsigned char *buf = malloc(SPAN), *p1 = malloc(SPAN), *p2 = malloc(SPAN);
    for (int i = 0; i < SPAN; i++)
        buf[i] = dt_pat(i);
    int pos1 = 0, pos2 = 0;
    DT_MPI(MPI_Pack(buf + SPAN / 2, 2, t, p1, SPAN, &pos1, MPI_COMM_WORLD));
    DT_MPI(MPI_Pack(buf + SPAN / 2, 2, r, p2, SPAN, &pos2, MPI_COMM_WORLD));
    DT_CHECK(pos1 == pos2 && memcmp(p1, p2, (size_t)pos1) == 0, "%s: rebuilt type packs differently", what);
    free(buf);
    free(p1);
    free(p2);
    if (r != t)
        DT_MPI(MPI_Type_free(&r));
}

static void expect_envelope(const char *what, MPI_Datatype t, int comb, int ni, int na, int nd)
{
    int a = -1, b = -1, c = -1, k = -1;
    DT_MPI(MPI_Type_get_envelope(t, &a, &b, &c, &k));
    DT_CHECK(k == comb && a == ni && b == na && c == nd, "%s: envelope (%d,%d,%d) combiner %d, want (%d,%d,%d) %d",
             what, a, b, c, k, ni, na, nd, comb);
}

static void expect_envelope_c(const char *what, MPI_Datatype t, int comb, MPI_Count ni, MPI_Count na, MPI_Count nc,
                              MPI_Count nd)
{
    MPI_Count a = -1, b = -1, c = -1, d = -1;
    int k = -1;
    DT_MPI(MPI_Type_get_envelope_c(t, &a, &b, &c, &d, &k));
    DT_CHECK(k == comb && a == ni && b == na && c == nc && d == nd,
             "%s: envelope_c (%lld,%lld,%lld,%lld) combiner %d, want (%lld,%lld,%lld,%lld) %d", what, (long long)a,
             (long long)b, (long long)c, (long long)d, k, (long long)ni, (long long)na, (long long)nc, (long long)nd,
             comb);
}

int main(int argc, char **argv)
{
    dt_init(&argc, &argv);
    MPI_Datatype t, v, s, st;

    /* predefined */
    expect_envelope("MPI_INT", MPI_INT, MPI_COMBINER_NAMED, 0, 0, 0);
    expect_envelope_c("MPI_DOUBLE_INT", MPI_DOUBLE_INT, MPI_COMBINER_NAMED, 0, 0, 0, 0);
    {
        int in[1];
        MPI_Aint ad[1];
        MPI_Datatype ty[1];
        DT_FAILS(MPI_Type_get_contents(MPI_INT, 1, 1, 1, in, ad, ty), MPI_ERR_TYPE);
    }

    /* vector: ints (count, blocklength, stride) */
    DT_MPI(MPI_Type_vector(3, 2, 5, MPI_INT, &v));
    expect_envelope("vector", v, MPI_COMBINER_VECTOR, 3, 0, 1);
    expect_envelope_c("vector", v, MPI_COMBINER_VECTOR, 3, 0, 0, 1);
    {
        int in[3];
        MPI_Aint ad[1];
        MPI_Datatype ty[1];
        DT_MPI(MPI_Type_get_contents(v, 3, 0, 1, in, ad, ty));
        DT_CHECK(in[0] == 3 && in[1] == 2 && in[2] == 5 && ty[0] == MPI_INT, "vector contents %d %d %d", in[0], in[1],
                 in[2]);
        DT_FAILS(MPI_Type_get_contents(v, 2, 0, 1, in, ad, ty), MPI_ERR_ARG);
    }
    DT_MPI(MPI_Type_commit(&v));
    same_as_rebuilt("vector", v, 0);

    /* hvector of the vector: (count, blocklength) ints, stride address, one derived type */
    DT_MPI(MPI_Type_create_hvector(2, 1, 200, v, &t));
    expect_envelope("hvector", t, MPI_COMBINER_HVECTOR, 2, 1, 1);
    {
        int in[2], k, a, b, c;
        MPI_Aint ad[1];
        MPI_Datatype ty[1];
        DT_MPI(MPI_Type_get_contents(t, 2, 1, 1, in, ad, ty));
        DT_CHECK(in[0] == 2 && in[1] == 1 && ad[0] == 200, "hvector contents %d %d %ld", in[0], in[1], (long)ad[0]);
        /* a derived old type comes back as a handle of its own, with the same envelope */
        DT_MPI(MPI_Type_get_envelope(ty[0], &a, &b, &c, &k));
        DT_CHECK(k == MPI_COMBINER_VECTOR && a == 3, "hvector's old type: combiner %d", k);
        DT_MPI(MPI_Type_free(&ty[0]));
    }
    DT_MPI(MPI_Type_commit(&t));
    same_as_rebuilt("hvector", t, 0);
    DT_MPI(MPI_Type_free(&t));

    /* indexed, hindexed, indexed_block, hindexed_block */
    {
        int bl[] = {1, 2, 3}, d[] = {7, 0, 3};
        MPI_Aint hd[] = {64, 0, -16};
        DT_MPI(MPI_Type_indexed(3, bl, d, MPI_SHORT, &t));
        expect_envelope("indexed", t, MPI_COMBINER_INDEXED, 7, 0, 1);
        DT_MPI(MPI_Type_commit(&t));
        same_as_rebuilt("indexed", t, 0);
        DT_MPI(MPI_Type_free(&t));
        DT_MPI(MPI_Type_create_hindexed(3, bl, hd, MPI_DOUBLE, &t));
        expect_envelope("hindexed", t, MPI_COMBINER_HINDEXED, 4, 3, 1);
        DT_MPI(MPI_Type_commit(&t));
        same_as_rebuilt("hindexed", t, 0);
        DT_MPI(MPI_Type_free(&t));
        DT_MPI(MPI_Type_create_indexed_block(3, 2, d, MPI_INT, &t));
        expect_envelope("indexed_block", t, MPI_COMBINER_INDEXED_BLOCK, 5, 0, 1);
        DT_MPI(MPI_Type_commit(&t));
        same_as_rebuilt("indexed_block", t, 0);
        DT_MPI(MPI_Type_free(&t));
        DT_MPI(MPI_Type_create_hindexed_block(3, 2, hd, MPI_INT, &t));
        expect_envelope("hindexed_block", t, MPI_COMBINER_HINDEXED_BLOCK, 2, 3, 1);
        DT_MPI(MPI_Type_commit(&t));
        same_as_rebuilt("hindexed_block", t, 0);
        DT_MPI(MPI_Type_free(&t));
    }

    /* struct with a derived member, then resized, dup, subarray and darray of it */
    {
        int bl[] = {1, 2, 1};
        MPI_Aint d[] = {0, 8, 40};
        MPI_Datatype ty[] = {MPI_CHAR, v, MPI_DOUBLE};
        DT_MPI(MPI_Type_create_struct(3, bl, d, ty, &s));
        expect_envelope("struct", s, MPI_COMBINER_STRUCT, 4, 3, 3);
        MPI_Datatype back[3];
        int in[4];
        MPI_Aint ad[3];
        DT_MPI(MPI_Type_get_contents(s, 4, 3, 3, in, ad, back));
        DT_CHECK(back[0] == MPI_CHAR && back[2] == MPI_DOUBLE, "struct: predefined members must come back as is");
        DT_CHECK(in[0] == 3 && in[2] == 2 && ad[2] == 40, "struct contents");
        DT_MPI(MPI_Type_free(&back[1]));
        DT_MPI(MPI_Type_commit(&s));
        same_as_rebuilt("struct", s, 0);

        DT_MPI(MPI_Type_create_resized(s, -8, 400, &t));
        expect_envelope("resized", t, MPI_COMBINER_RESIZED, 0, 2, 1);
        DT_MPI(MPI_Type_commit(&t));
        same_as_rebuilt("resized", t, 0);
        DT_MPI(MPI_Type_dup(t, &st));
        expect_envelope("dup", st, MPI_COMBINER_DUP, 0, 0, 1);
        same_as_rebuilt("dup", st, 0);
        DT_MPI(MPI_Type_free(&st));
        DT_MPI(MPI_Type_free(&t));

        int sz[] = {5, 4, 3}, sub[] = {2, 2, 2}, sta[] = {1, 0, 1};
        DT_MPI(MPI_Type_create_subarray(3, sz, sub, sta, MPI_ORDER_FORTRAN, MPI_INT, &t));
        expect_envelope("subarray", t, MPI_COMBINER_SUBARRAY, 3 * 3 + 2, 0, 1);
        DT_MPI(MPI_Type_commit(&t));
        same_as_rebuilt("subarray", t, 0);
        DT_MPI(MPI_Type_free(&t));

        int gs[] = {9, 7}, di[] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_BLOCK}, da[] = {2, MPI_DISTRIBUTE_DFLT_DARG},
            ps[] = {2, 3};
        DT_MPI(MPI_Type_create_darray(6, 5, 2, gs, di, da, ps, MPI_ORDER_C, MPI_DOUBLE, &t));
        expect_envelope("darray", t, MPI_COMBINER_DARRAY, 4 * 2 + 4, 0, 1);
        {
            int dn[12];
            MPI_Aint da2[1];
            MPI_Datatype dt2[1];
            DT_MPI(MPI_Type_get_contents(t, 12, 0, 1, dn, da2, dt2));
            DT_CHECK(dn[0] == 6 && dn[1] == 5 && dn[2] == 2 && dn[3] == 9 && dn[5] == MPI_DISTRIBUTE_CYCLIC &&
                         dn[8] == MPI_DISTRIBUTE_DFLT_DARG && dn[10] == 3 && dn[11] == MPI_ORDER_C,
                     "darray contents");
        }
        DT_MPI(MPI_Type_commit(&t));
        same_as_rebuilt("darray", t, 0);
        DT_MPI(MPI_Type_free(&t));
    }

    /* large-count constructors report counts as MPI_Count; the int calls refuse them */
    {
        MPI_Count bl[] = {2, 1}, d[] = {0, 48};
        DT_MPI(MPI_Type_create_hindexed_c(2, bl, d, MPI_INT, &t));
        expect_envelope_c("hindexed_c", t, MPI_COMBINER_HINDEXED, 0, 0, 5, 1);
        int a, b, c, k;
        DT_FAILS(MPI_Type_get_envelope(t, &a, &b, &c, &k), MPI_ERR_TYPE);
        MPI_Count co[5];
        DT_MPI(MPI_Type_get_contents_c(t, 0, 0, 5, 1, NULL, NULL, co, &st));
        DT_CHECK(co[0] == 2 && co[1] == 2 && co[2] == 1 && co[3] == 0 && co[4] == 48 && st == MPI_INT,
                 "hindexed_c contents");
        DT_MPI(MPI_Type_commit(&t));
        same_as_rebuilt("hindexed_c", t, 1);
        DT_MPI(MPI_Type_free(&t));

        DT_MPI(MPI_Type_vector_c(4, 1, 3, v, &t));
        expect_envelope_c("vector_c", t, MPI_COMBINER_VECTOR, 0, 0, 3, 1);
        DT_MPI(MPI_Type_create_resized_c(t, 0, 1000, &st));
        expect_envelope_c("resized_c", st, MPI_COMBINER_RESIZED, 0, 0, 2, 1);
        DT_MPI(MPI_Type_commit(&st));
        same_as_rebuilt("resized_c of vector_c", st, 1);
        DT_MPI(MPI_Type_free(&st));
        DT_MPI(MPI_Type_free(&t));

        MPI_Count sz[] = {6, 6}, sub[] = {3, 2}, sta[] = {2, 4};
        DT_MPI(MPI_Type_create_subarray_c(2, sz, sub, sta, MPI_ORDER_C, MPI_FLOAT, &t));
        expect_envelope_c("subarray_c", t, MPI_COMBINER_SUBARRAY, 2, 0, 6, 1);
        DT_MPI(MPI_Type_commit(&t));
        same_as_rebuilt("subarray_c", t, 1);
        DT_MPI(MPI_Type_free(&t));

        MPI_Count gs[] = {10};
        int di[] = {MPI_DISTRIBUTE_CYCLIC}, da[] = {3}, ps[] = {2};
        DT_MPI(MPI_Type_create_darray_c(2, 1, 1, gs, di, da, ps, MPI_ORDER_FORTRAN, MPI_INT, &t));
        expect_envelope_c("darray_c", t, MPI_COMBINER_DARRAY, 4 + 3, 0, 1, 1);
        DT_MPI(MPI_Type_commit(&t));
        same_as_rebuilt("darray_c", t, 1);
        DT_MPI(MPI_Type_free(&t));

        MPI_Count sbl[] = {1, 1}, sd[] = {0, 16};
        MPI_Datatype sty[] = {MPI_DOUBLE, s};
        DT_MPI(MPI_Type_create_struct_c(2, sbl, sd, sty, &t));
        expect_envelope_c("struct_c", t, MPI_COMBINER_STRUCT, 0, 0, 5, 2);
        DT_MPI(MPI_Type_commit(&t));
        same_as_rebuilt("struct_c", t, 1);
        DT_MPI(MPI_Type_free(&t));
    }

    /* Fortran-kind types and value-index pairs */
    {
        int in[2], sz;
        MPI_Aint ad[1];
        MPI_Datatype ty[1];
        DT_MPI(MPI_Type_create_f90_real(10, MPI_UNDEFINED, &t));
        expect_envelope("f90_real", t, MPI_COMBINER_F90_REAL, 2, 0, 0);
        DT_MPI(MPI_Type_get_contents(t, 2, 0, 0, in, ad, ty));
        DT_CHECK(in[0] == 10 && in[1] == MPI_UNDEFINED, "f90_real contents %d %d", in[0], in[1]);
        DT_MPI(MPI_Type_size(t, &sz));
        DT_CHECK(sz == 8, "f90_real(10) size %d, want 8", sz);
        DT_FAILS(MPI_Type_free(&t), MPI_ERR_TYPE);
        DT_MPI(MPI_Type_create_f90_integer(5, &t));
        DT_MPI(MPI_Type_size(t, &sz));
        DT_CHECK(sz == 4, "f90_integer(5) size %d, want 4", sz);
        DT_MPI(MPI_Type_create_f90_complex(MPI_UNDEFINED, 300, &t));
        DT_MPI(MPI_Type_size(t, &sz));
        DT_CHECK(sz == 16, "f90_complex(r=300) size %d, want 16", sz);
        DT_FAILS(MPI_Type_create_f90_real(50, MPI_UNDEFINED, &t), MPI_ERR_ARG);
        DT_MPI(MPI_Type_match_size(MPI_TYPECLASS_REAL, 8, &t));
        DT_MPI(MPI_Type_size(t, &sz));
        DT_CHECK(sz == 8, "match_size(REAL, 8) size %d", sz);
        DT_MPI(MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 2, &t));
        DT_MPI(MPI_Type_size(t, &sz));
        DT_CHECK(sz == 2, "match_size(INTEGER, 2) size %d", sz);
        DT_FAILS(MPI_Type_match_size(MPI_TYPECLASS_REAL, 3, &t), MPI_ERR_ARG);

        DT_MPI(MPI_Type_get_value_index(MPI_DOUBLE, MPI_INT, &t));
        DT_CHECK(t == MPI_DOUBLE_INT, "value_index(double, int) is not MPI_DOUBLE_INT");
        /* No predefined pair type: MPI_DATATYPE_NULL (as MPICH and Open MPI answer, and
         * mpi4py's tests expect). */
        DT_MPI(MPI_Type_get_value_index(MPI_FLOAT, MPI_LONG, &t));
        DT_CHECK(t == MPI_DATATYPE_NULL, "value_index(float, long) is not MPI_DATATYPE_NULL");
    }

    /* names */
    {
        char name[MPI_MAX_OBJECT_NAME];
        int len = -1;
        DT_MPI(MPI_Type_get_name(MPI_DOUBLE, name, &len));
        DT_CHECK(strcmp(name, "MPI_DOUBLE") == 0 && len == 10, "name of MPI_DOUBLE: %s (%d)", name, len);
        DT_MPI(MPI_Type_get_name(MPI_UNSIGNED_LONG_LONG, name, &len));
        DT_CHECK(strcmp(name, "MPI_UNSIGNED_LONG_LONG") == 0, "name of MPI_UNSIGNED_LONG_LONG: %s", name);
        DT_MPI(MPI_Type_get_name(MPI_2INT, name, &len));
        DT_CHECK(strcmp(name, "MPI_2INT") == 0, "name of MPI_2INT: %s", name);
        DT_MPI(MPI_Type_get_name(v, name, &len));
        DT_CHECK(len == 0 && name[0] == 0, "a new derived type has an empty name, got %s", name);
        DT_MPI(MPI_Type_set_name(v, "strided ints"));
        DT_MPI(MPI_Type_get_name(v, name, &len));
        DT_CHECK(strcmp(name, "strided ints") == 0 && len == 12, "renamed derived type: %s", name);
        DT_MPI(MPI_Type_set_name(MPI_INT, "int"));
        DT_MPI(MPI_Type_get_name(MPI_INT, name, &len));
        DT_CHECK(strcmp(name, "int") == 0, "renamed MPI_INT: %s", name);
        DT_MPI(MPI_Type_set_name(MPI_INT, "MPI_INT"));
    }

    DT_MPI(MPI_Type_free(&s));
    DT_MPI(MPI_Type_free(&v));
    return dt_finalize();
}
