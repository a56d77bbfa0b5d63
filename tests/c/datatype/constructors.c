/* ranks: 1
 *
 * Every datatype constructor (and its _c form) against its type map written out by hand:
 * size, lb/extent, true lb/extent, pack and unpack. Zero counts, negative strides,
 * resized bounds that stick through later constructors, struct padding, subarray and
 * darray, dup, and the error classes of bad arguments.
 */
#include "dt.h"

#if !defined(MPICH) && !defined(OPEN_MPI)
/* MPI-1 names removed in MPI-3: not in the MPI 5.0 header, still exported for old codes. */
int MPI_Type_hvector(int, int, MPI_Aint, MPI_Datatype, MPI_Datatype *);
int MPI_Type_hindexed(int, int *, MPI_Aint *, MPI_Datatype, MPI_Datatype *);
int MPI_Type_struct(int, int *, MPI_Aint *, MPI_Datatype *, MPI_Datatype *);
int MPI_Type_extent(MPI_Datatype, MPI_Aint *);
int MPI_Type_lb(MPI_Datatype, MPI_Aint *);
int MPI_Type_ub(MPI_Datatype, MPI_Aint *);
#define HAVE_MPI1_NAMES 1
#endif


static void true_extent(const char *what, MPI_Datatype t, long tlb, long text)
{
    MPI_Aint a = 0, b = 0;
    MPI_Count c = 0, d = 0;
    DT_MPI(MPI_Type_get_true_extent(t, &a, &b));
    DT_CHECK(a == tlb && b == text, "%s: true lb/extent %ld/%ld, want %ld/%ld", what, (long)a, (long)b, tlb, text);
    DT_MPI(MPI_Type_get_true_extent_c(t, &c, &d));
    DT_CHECK(c == tlb && d == text, "%s: true extent _c %lld/%lld", what, (long long)c, (long long)d);
}

static void commit_check_free(const char *what, MPI_Datatype *t, int n, const long *offs, const long *lens, long lb,
                              long extent)
{
    DT_MPI(MPI_Type_commit(t));
    dt_expect_map(what, *t, 1, n, offs, lens, lb, extent);
    dt_expect_map(what, *t, 3, n, offs, lens, lb, extent);
    DT_MPI(MPI_Type_free(t));
    DT_CHECK(*t == MPI_DATATYPE_NULL, "%s: Type_free did not reset the handle", what);
}

int main(int argc, char **argv)
{
    dt_init(&argc, &argv);
    MPI_Datatype t, u, v;

    /* contiguous */
    {
        long o[] = {0}, l[] = {20};
        DT_MPI(MPI_Type_contiguous(5, MPI_INT, &t));
        true_extent("contiguous", t, 0, 20);
        commit_check_free("contiguous", &t, 1, o, l, 0, 20);
        DT_MPI(MPI_Type_contiguous_c(5, MPI_INT, &t));
        commit_check_free("contiguous_c", &t, 1, o, l, 0, 20);
        DT_MPI(MPI_Type_contiguous(0, MPI_INT, &t));
        commit_check_free("contiguous(0)", &t, 0, o, l, 0, 0);
    }
    /* vector: 3 blocks of 2 ints every 4 ints */
    {
        long o[] = {0, 16, 32}, l[] = {8, 8, 8};
        DT_MPI(MPI_Type_vector(3, 2, 4, MPI_INT, &t));
        true_extent("vector", t, 0, 40);
        commit_check_free("vector", &t, 3, o, l, 0, 40);
        DT_MPI(MPI_Type_vector_c(3, 2, 4, MPI_INT, &t));
        commit_check_free("vector_c", &t, 3, o, l, 0, 40);
        /* negative stride: blocks at 0, -16, -32 in that order */
        long on[] = {0, -16, -32};
        DT_MPI(MPI_Type_vector(3, 2, -4, MPI_INT, &t));
        true_extent("vector(-4)", t, -32, 40);
        commit_check_free("vector(-4)", &t, 3, on, l, -32, 40);
    }
    /* hvector with a byte stride that is not a multiple of the element */
    {
        long o[] = {0, 10, 20, 30}, l[] = {2, 2, 2, 2};
        DT_MPI(MPI_Type_create_hvector(4, 1, 10, MPI_SHORT, &t));
        commit_check_free("hvector", &t, 4, o, l, 0, 32);
        DT_MPI(MPI_Type_create_hvector_c(4, 1, 10, MPI_SHORT, &t));
        commit_check_free("hvector_c", &t, 4, o, l, 0, 32);
    }
    /* indexed: blocks out of order (type-map order is argument order) */
    {
        int bl[] = {1, 3, 2}, d[] = {5, 0, 9};
        long o[] = {40, 0, 72}, l[] = {8, 24, 16};
        DT_MPI(MPI_Type_indexed(3, bl, d, MPI_DOUBLE, &t));
        true_extent("indexed", t, 0, 88);
        commit_check_free("indexed", &t, 3, o, l, 0, 88);
        MPI_Count blc[] = {1, 3, 2}, dc[] = {5, 0, 9};
        DT_MPI(MPI_Type_indexed_c(3, blc, dc, MPI_DOUBLE, &t));
        commit_check_free("indexed_c", &t, 3, o, l, 0, 88);
    }
    /* hindexed, with a zero-length block that must not count */
    {
        int bl[] = {2, 0, 1};
        MPI_Aint d[] = {3, 100, -5};
        long o[] = {3, -5}, l[] = {8, 4};
        DT_MPI(MPI_Type_create_hindexed(3, bl, d, MPI_INT, &t));
        commit_check_free("hindexed", &t, 2, o, l, -5, 16);
        MPI_Count blc[] = {2, 0, 1}, dc[] = {3, 100, -5};
        DT_MPI(MPI_Type_create_hindexed_c(3, blc, dc, MPI_INT, &t));
        commit_check_free("hindexed_c", &t, 2, o, l, -5, 16);
    }
    /* indexed_block / hindexed_block */
    {
        int d[] = {4, 0, 8};
        long o[] = {16, 0, 32}, l[] = {8, 8, 8};
        DT_MPI(MPI_Type_create_indexed_block(3, 2, d, MPI_INT, &t));
        commit_check_free("indexed_block", &t, 3, o, l, 0, 40);
        MPI_Count dc[] = {4, 0, 8};
        DT_MPI(MPI_Type_create_indexed_block_c(3, 2, dc, MPI_INT, &t));
        commit_check_free("indexed_block_c", &t, 3, o, l, 0, 40);
        MPI_Aint hd[] = {16, 0, 32};
        DT_MPI(MPI_Type_create_hindexed_block(3, 2, hd, MPI_INT, &t));
        commit_check_free("hindexed_block", &t, 3, o, l, 0, 40);
        MPI_Count hdc[] = {16, 0, 32};
        DT_MPI(MPI_Type_create_hindexed_block_c(3, 2, hdc, MPI_INT, &t));
        commit_check_free("hindexed_block_c", &t, 3, o, l, 0, 40);
    }
    /* struct { char c; double d; int i[2]; } is padded to 24 like the C struct */
    {
        struct s { char c; double d; int i[2]; };
        int bl[] = {1, 1, 2};
        MPI_Aint d[] = {0, 8, 16};
        MPI_Datatype ty[] = {MPI_CHAR, MPI_DOUBLE, MPI_INT};
        long o[] = {0, 8}, l[] = {1, 16};
        DT_MPI(MPI_Type_create_struct(3, bl, d, ty, &t));
        true_extent("struct", t, 0, 24);
        DT_CHECK(sizeof(struct s) == 24, "sizeof struct %zu", sizeof(struct s));
        commit_check_free("struct", &t, 2, o, l, 0, 24);
        MPI_Count blc[] = {1, 1, 2}, dc[] = {0, 8, 16};
        DT_MPI(MPI_Type_create_struct_c(3, blc, dc, ty, &t));
        commit_check_free("struct_c", &t, 2, o, l, 0, 24);
        /* { int; char } has extent 8 */
        int bl2[] = {1, 1};
        MPI_Aint d2[] = {0, 4};
        MPI_Datatype ty2[] = {MPI_INT, MPI_CHAR};
        long o2[] = {0}, l2[] = {5};
        DT_MPI(MPI_Type_create_struct(2, bl2, d2, ty2, &t));
        commit_check_free("struct{int,char}", &t, 1, o2, l2, 0, 8);
    }
    /* resized: bounds set explicitly stick through contiguous and struct */
    {
        long o[] = {0}, l[] = {4};
        DT_MPI(MPI_Type_create_resized(MPI_INT, -4, 12, &u));
        true_extent("resized", u, 0, 4);
        DT_MPI(MPI_Type_commit(&u));
        dt_expect_map("resized", u, 3, 1, o, l, -4, 12);
        long oc[] = {0, 12, 24}, lc[] = {4, 4, 4};
        DT_MPI(MPI_Type_contiguous(3, u, &t));
        commit_check_free("contiguous(resized)", &t, 3, oc, lc, -4, 36);
        /* struct of the resized int and a double far away: bounds stay the resized ones */
        int bl[] = {1, 1};
        MPI_Aint d[] = {0, 64};
        MPI_Datatype ty[] = {u, MPI_DOUBLE};
        long os[] = {0, 64}, ls[] = {4, 8};
        DT_MPI(MPI_Type_create_struct(2, bl, d, ty, &t));
        true_extent("struct(resized)", t, 0, 72);
        commit_check_free("struct(resized)", &t, 2, os, ls, -4, 12);
        DT_MPI(MPI_Type_create_resized_c(MPI_DOUBLE, 0, 24, &t));
        long od[] = {0}, ld[] = {8};
        commit_check_free("resized_c", &t, 1, od, ld, 0, 24);
        DT_MPI(MPI_Type_free(&u));
    }
    /* dup keeps the type map and the committed state */
    {
        long o[] = {0, 16, 32}, l[] = {8, 8, 8};
        DT_MPI(MPI_Type_vector(3, 2, 4, MPI_INT, &u));
        DT_MPI(MPI_Type_commit(&u));
        DT_MPI(MPI_Type_dup(u, &t));
        DT_MPI(MPI_Type_free(&u)); /* the dup must not depend on the handle */
        int rc = MPI_Send(NULL, 0, t, 0, 0, MPI_COMM_SELF); /* committed: usable at once */
        DT_CHECK(rc == MPI_SUCCESS, "send of 0 elements of a dup of a committed type failed");
        commit_check_free("dup", &t, 3, o, l, 0, 40);
    }
    /* subarray: 2x3 block at (1,2) of a 4x6 int array, C and Fortran order */
    {
        int sz[] = {4, 6}, sub[] = {2, 3}, st[] = {1, 2};
        long o[] = {(6 + 2) * 4, (12 + 2) * 4}, l[] = {12, 12};
        DT_MPI(MPI_Type_create_subarray(2, sz, sub, st, MPI_ORDER_C, MPI_INT, &t));
        true_extent("subarray", t, 32, 36);
        commit_check_free("subarray C", &t, 2, o, l, 0, 96);
        /* Fortran: dimension 0 (size 4) is fastest; start (1,2), 2 rows x 3 columns */
        long of[] = {(2 * 4 + 1) * 4, (3 * 4 + 1) * 4, (4 * 4 + 1) * 4}, lf[] = {8, 8, 8};
        DT_MPI(MPI_Type_create_subarray(2, sz, sub, st, MPI_ORDER_FORTRAN, MPI_INT, &t));
        commit_check_free("subarray Fortran", &t, 3, of, lf, 0, 96);
        MPI_Count szc[] = {4, 6}, subc[] = {2, 3}, stc[] = {1, 2};
        DT_MPI(MPI_Type_create_subarray_c(2, szc, subc, stc, MPI_ORDER_C, MPI_INT, &t));
        commit_check_free("subarray_c", &t, 2, o, l, 0, 96);
    }
    /* darray: 8 ints cyclic(2) over 2 processes, as rank 1: elements 2,3,6,7 */
    {
        int gs[] = {8}, di[] = {MPI_DISTRIBUTE_CYCLIC}, da[] = {2}, ps[] = {2};
        long o[] = {8, 24}, l[] = {8, 8};
        DT_MPI(MPI_Type_create_darray(2, 1, 1, gs, di, da, ps, MPI_ORDER_C, MPI_INT, &t));
        commit_check_free("darray cyclic", &t, 2, o, l, 0, 32);
        MPI_Count gsc[] = {8};
        DT_MPI(MPI_Type_create_darray_c(2, 1, 1, gsc, di, da, ps, MPI_ORDER_C, MPI_INT, &t));
        commit_check_free("darray_c", &t, 2, o, l, 0, 32);
        /* block over 3: sizes 3,3,2; rank 2 owns 6,7 */
        int ps3[] = {3}, db[] = {MPI_DISTRIBUTE_BLOCK}, dd[] = {MPI_DISTRIBUTE_DFLT_DARG};
        long ob[] = {24}, lb[] = {8};
        DT_MPI(MPI_Type_create_darray(3, 2, 1, gs, db, dd, ps3, MPI_ORDER_C, MPI_INT, &t));
        commit_check_free("darray block", &t, 1, ob, lb, 0, 32);
    }
    /* a vector far too large to write out still has the right numbers */
    {
        MPI_Count sz = 0, lbx = 0, ext = 0;
        DT_MPI(MPI_Type_vector_c((MPI_Count)1 << 40, 1, 2, MPI_INT, &t));
        DT_MPI(MPI_Type_commit(&t));
        DT_MPI(MPI_Type_size_c(t, &sz));
        DT_MPI(MPI_Type_get_extent_c(t, &lbx, &ext));
        DT_CHECK(sz == ((MPI_Count)4 << 40), "huge vector size %lld", (long long)sz);
        DT_CHECK(ext == (((MPI_Count)1 << 40) * 2 - 1) * 4, "huge vector extent %lld", (long long)ext);
        int isz = 0;
        DT_MPI(MPI_Type_size(t, &isz));
        DT_CHECK(isz == MPI_UNDEFINED, "Type_size of a > INT_MAX type: %d", isz);
        DT_MPI(MPI_Type_free(&t));
    }
#ifdef HAVE_MPI1_NAMES
    {
        long o[] = {4, 24}, l[] = {8, 8};
        int bl[] = {2, 2};
        MPI_Aint d[] = {4, 24}, e = 0, lo = 0, hi = 0;
        DT_MPI(MPI_Type_hindexed(2, bl, d, MPI_INT, &t));
        DT_MPI(MPI_Type_extent(t, &e));
        DT_MPI(MPI_Type_lb(t, &lo));
        DT_MPI(MPI_Type_ub(t, &hi));
        DT_CHECK(e == 28 && lo == 4 && hi == 32, "MPI-1 extent/lb/ub %ld %ld %ld", (long)e, (long)lo, (long)hi);
        commit_check_free("MPI_Type_hindexed", &t, 2, o, l, 4, 28);
        long ov[] = {0, 20}, lv[] = {8, 8};
        DT_MPI(MPI_Type_hvector(2, 1, 20, MPI_DOUBLE, &t));
        commit_check_free("MPI_Type_hvector", &t, 2, ov, lv, 0, 28);
        MPI_Datatype ty[] = {MPI_INT, MPI_CHAR};
        int bs[] = {1, 1};
        MPI_Aint ds[] = {0, 4};
        long os[] = {0}, ls[] = {5};
        DT_MPI(MPI_Type_struct(2, bs, ds, ty, &t));
        commit_check_free("MPI_Type_struct", &t, 1, os, ls, 0, 8);
    }
#endif
    /* error classes */
    {
        int bl[] = {1}, d[] = {0};
        DT_FAILS(MPI_Type_contiguous(-1, MPI_INT, &t), MPI_ERR_COUNT);
        DT_FAILS(MPI_Type_vector(2, -1, 1, MPI_INT, &t), MPI_ERR_ARG);
        DT_FAILS(MPI_Type_contiguous(1, MPI_DATATYPE_NULL, &t), MPI_ERR_TYPE);
        DT_FAILS(MPI_Type_indexed(1, NULL, d, MPI_INT, &t), MPI_ERR_ARG);
        DT_FAILS(MPI_Type_indexed(1, bl, d, MPI_INT, NULL), MPI_ERR_ARG);
        v = MPI_INT;
        DT_FAILS(MPI_Type_free(&v), MPI_ERR_TYPE);
        int sz[] = {4}, sub[] = {3}, st[] = {2};
        DT_FAILS(MPI_Type_create_subarray(1, sz, sub, st, MPI_ORDER_C, MPI_INT, &t), MPI_ERR_ARG);
        DT_FAILS(MPI_Type_create_subarray(1, sz, sub, d, 77, MPI_INT, &t), MPI_ERR_ARG);
        int gs[] = {8}, di[] = {MPI_DISTRIBUTE_BLOCK}, da[] = {2}, ps[] = {2};
        DT_FAILS(MPI_Type_create_darray(2, 0, 1, gs, di, da, ps, MPI_ORDER_C, MPI_INT, &t), MPI_ERR_ARG);
        /* an uncommitted type cannot be communicated or packed */
        int buf[4] = {0}, pos = 0;
        char out[64];
        DT_MPI(MPI_Type_contiguous(2, MPI_INT, &u));
        DT_FAILS(MPI_Send(buf, 1, u, 0, 0, MPI_COMM_SELF), MPI_ERR_TYPE);
        DT_FAILS(MPI_Pack(buf, 1, u, out, 64, &pos, MPI_COMM_WORLD), MPI_ERR_TYPE);
        /* ... but queried, used in constructors, and committed later */
        MPI_Aint lb = -1, ext = -1;
        DT_MPI(MPI_Type_get_extent(u, &lb, &ext));
        DT_CHECK(lb == 0 && ext == 8, "uncommitted extent %ld/%ld", (long)lb, (long)ext);
        DT_MPI(MPI_Type_contiguous(2, u, &t));
        DT_MPI(MPI_Type_commit(&t));
        DT_MPI(MPI_Type_free(&u));
        long o[] = {0}, l[] = {16};
        dt_expect_map("contiguous of a freed uncommitted type", t, 2, 1, o, l, 0, 16);
        DT_MPI(MPI_Type_free(&t));
        /* committing twice and committing a predefined type are fine */
        v = MPI_INT;
        DT_MPI(MPI_Type_commit(&v));
    }
    return dt_finalize();
}
