/* ranks: 1 2 3 4 6 8
 * Cartesian topologies: Dims_create, Cart_create (with ranks left out), Cart_get / rank /
 * coords / shift / sub / map, Cartdim_get, Topo_test, zero-dimensional grids, and
 * neighborhood collectives on grids, including periodic dimensions of size 1 and 2 where
 * one process is both neighbours. */
#include "check.h"

static int prod(const int *d, int n)
{
    int p = 1;
    for (int i = 0; i < n; i++)
        p *= d[i];
    return p;
}

int main(int argc, char **argv)
{
    int rank, size, st, nd;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Dims_create: known answers and the fixed-entry rules. */
    int d2[2] = {0, 0}, d3[3] = {0, 0, 0};
    MPI_Dims_create(12, 2, d2);
    CHECK(d2[0] == 4 && d2[1] == 3, "dims(12,2) = %d x %d", d2[0], d2[1]);
    MPI_Dims_create(24, 3, d3);
    CHECK(d3[0] == 4 && d3[1] == 3 && d3[2] == 2, "dims(24,3) = %d %d %d", d3[0], d3[1], d3[2]);
    int d4[4] = {0, 2, 0, 0};
    MPI_Dims_create(16, 4, d4);
    CHECK(d4[1] == 2 && d4[0] == 2 && d4[2] == 2 && d4[3] == 2, "dims(16,[0,2,0,0])");
    CHECK(MPI_Dims_create(1, 0, NULL) == MPI_SUCCESS, "dims(1,0)");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int bad[2] = {3, 0}, cls, rc = MPI_Dims_create(8, 2, bad);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_DIMS, "dims(8,[3,0]): class %d", cls);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

    /* A 2-D grid over all ranks, periodic in dimension 1. */
    int dims[2] = {0, 0}, periods[2] = {0, 1};
    MPI_Dims_create(size, 2, dims);
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
    MPI_Topo_test(cart, &st);
    CHECK(st == MPI_CART, "Topo_test %d", st);
    MPI_Topo_test(MPI_COMM_WORLD, &st);
    CHECK(st == MPI_UNDEFINED, "Topo_test on world %d", st);
    MPI_Cartdim_get(cart, &nd);
    CHECK(nd == 2, "Cartdim_get %d", nd);
    int gd[2], gp[2], gc[2], cr;
    MPI_Cart_get(cart, 2, gd, gp, gc);
    MPI_Comm_rank(cart, &cr);
    CHECK(gd[0] == dims[0] && gd[1] == dims[1] && gp[0] == 0 && gp[1] == 1, "Cart_get dims/periods");
    CHECK(gc[0] == cr / dims[1] && gc[1] == cr % dims[1], "Cart_get coords %d %d", gc[0], gc[1]);
    int back;
    MPI_Cart_rank(cart, gc, &back);
    CHECK(back == cr, "Cart_rank %d", back);
    int wrap[2] = {gc[0], gc[1] + dims[1]};
    MPI_Cart_rank(cart, wrap, &back);
    CHECK(back == cr, "Cart_rank wraps in the periodic dimension: %d", back);
    for (int r = 0; r < size; r++) {
        int c[2];
        MPI_Cart_coords(cart, r, 2, c);
        CHECK(c[0] * dims[1] + c[1] == r, "Cart_coords of %d", r);
    }
    int src, dst;
    MPI_Cart_shift(cart, 0, 1, &src, &dst);
    CHECK(src == (gc[0] == 0 ? MPI_PROC_NULL : cr - dims[1]), "shift dim 0 source %d", src);
    CHECK(dst == (gc[0] == dims[0] - 1 ? MPI_PROC_NULL : cr + dims[1]), "shift dim 0 dest %d", dst);
    MPI_Cart_shift(cart, 1, 1, &src, &dst);
    CHECK(src == gc[0] * dims[1] + (gc[1] - 1 + dims[1]) % dims[1], "shift dim 1 source %d", src);
    CHECK(dst == gc[0] * dims[1] + (gc[1] + 1) % dims[1], "shift dim 1 dest %d", dst);

    /* Neighbor_alltoall on the grid: block j goes to neighbour j; the received block j
     * must be what neighbour j sent towards me. Order: (-dim0, +dim0, -dim1, +dim1). */
    {
        int sb[4], rb[4] = {-1, -1, -1, -1};
        for (int j = 0; j < 4; j++)
            sb[j] = cr * 10 + j;
        MPI_Neighbor_alltoall(sb, 1, MPI_INT, rb, 1, MPI_INT, cart);
        for (int d = 0; d < 2; d++) {
            int lo, hi;
            MPI_Cart_shift(cart, d, 1, &lo, &hi);
            /* lo sent me its +d block (2d+1); hi sent me its -d block (2d). */
            if (lo != MPI_PROC_NULL)
                CHECK(rb[2 * d] == lo * 10 + 2 * d + 1, "alltoall dim %d from below: %d", d, rb[2 * d]);
            else
                CHECK(rb[2 * d] == -1, "PROC_NULL neighbour wrote %d", rb[2 * d]);
            if (hi != MPI_PROC_NULL)
                CHECK(rb[2 * d + 1] == hi * 10 + 2 * d, "alltoall dim %d from above: %d", d, rb[2 * d + 1]);
        }
        int ag[4] = {-1, -1, -1, -1};
        MPI_Neighbor_allgather(&cr, 1, MPI_INT, ag, 1, MPI_INT, cart);
        for (int d = 0; d < 2; d++) {
            int lo, hi;
            MPI_Cart_shift(cart, d, 1, &lo, &hi);
            CHECK(ag[2 * d] == (lo == MPI_PROC_NULL ? -1 : lo), "allgather slot %d: %d", 2 * d, ag[2 * d]);
            CHECK(ag[2 * d + 1] == (hi == MPI_PROC_NULL ? -1 : hi), "allgather slot %d: %d", 2 * d + 1, ag[2 * d + 1]);
        }
    }

    /* Cart_sub: rows and columns. */
    int keep_row[2] = {0, 1}, keep_none[2] = {0, 0};
    MPI_Comm row, pt;
    MPI_Cart_sub(cart, keep_row, &row);
    int rs, rr;
    MPI_Comm_size(row, &rs);
    MPI_Comm_rank(row, &rr);
    CHECK(rs == dims[1] && rr == gc[1], "row size %d rank %d", rs, rr);
    MPI_Cartdim_get(row, &nd);
    CHECK(nd == 1, "row Cartdim %d", nd);
    int rowsum = 0;
    {
        int *all = malloc(sizeof(int) * 2);
        MPI_Neighbor_allgather(&cr, 1, MPI_INT, all, 1, MPI_INT, row);
        rowsum = all[0] + all[1];
        free(all);
        int l, h;
        MPI_Cart_shift(row, 0, 1, &l, &h);
        /* row ranks map back to cart ranks gc[0]*dims[1] + row rank */
        CHECK(rowsum == 2 * gc[0] * dims[1] + l + h, "row neighbours %d", rowsum);
    }
    /* No dimension left: rank 0 gets a 0-D grid (congruent to MPI_COMM_SELF), the others
     * nothing, as for a 0-D Cart_create. */
    MPI_Cart_sub(cart, keep_none, &pt);
    CHECK((cr == 0) == (pt != MPI_COMM_NULL), "membership of the point sub-grid");
    if (pt != MPI_COMM_NULL) {
        int cmp;
        MPI_Comm_size(pt, &rs);
        MPI_Cartdim_get(pt, &nd);
        MPI_Comm_compare(pt, MPI_COMM_SELF, &cmp);
        CHECK(rs == 1 && nd == 0 && cmp == MPI_CONGRUENT, "point sub-grid: size %d ndims %d compare %d", rs, nd, cmp);
        MPI_Comm_free(&pt);
    }
    MPI_Comm_free(&row);

    /* Cart_map: identity placement. */
    int nr;
    MPI_Cart_map(MPI_COMM_WORLD, 2, dims, periods, &nr);
    CHECK(nr == rank, "Cart_map %d", nr);
    int one[1] = {1};
    MPI_Cart_map(MPI_COMM_WORLD, 1, one, periods, &nr);
    CHECK(nr == (rank == 0 ? 0 : MPI_UNDEFINED), "Cart_map to 1 process: %d", nr);

    /* A grid smaller than the communicator leaves ranks out; a 0-D grid has one process. */
    MPI_Comm small, zero;
    int sd[1] = {size > 1 ? size - 1 : 1};
    MPI_Cart_create(MPI_COMM_WORLD, 1, sd, periods, 1, &small);
    CHECK((rank < prod(sd, 1)) == (small != MPI_COMM_NULL), "membership of the smaller grid");
    if (small != MPI_COMM_NULL)
        MPI_Comm_free(&small);
    MPI_Cart_create(MPI_COMM_WORLD, 0, NULL, NULL, 0, &zero);
    CHECK((rank == 0) == (zero != MPI_COMM_NULL), "membership of the 0-D grid");
    if (zero != MPI_COMM_NULL) {
        MPI_Cartdim_get(zero, &nd);
        CHECK(nd == 0, "0-D Cartdim %d", nd);
        MPI_Comm_free(&zero);
    }

    /* A ring (periodic 1-D) of size 1 or 2 has the same process on both sides: the block
     * sent towards +1 must land in the receiver's -1 slot. */
    if (size <= 2) {
        int rd[1] = {size}, rp[1] = {1};
        MPI_Comm ring;
        MPI_Cart_create(MPI_COMM_WORLD, 1, rd, rp, 0, &ring);
        int sb[2] = {rank * 10 + 0, rank * 10 + 1}, rb[2] = {-1, -1};
        MPI_Neighbor_alltoall(sb, 1, MPI_INT, rb, 1, MPI_INT, ring);
        int other = (rank + 1) % size;
        CHECK(rb[0] == other * 10 + 1 && rb[1] == other * 10 + 0, "small ring: got %d %d", rb[0], rb[1]);
        MPI_Comm_free(&ring);
    }

    /* Topology calls on the wrong kind of communicator fail with MPI_ERR_TOPOLOGY. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rc = MPI_Cartdim_get(MPI_COMM_WORLD, &nd);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TOPOLOGY, "Cartdim_get on world: class %d", cls);
    MPI_Comm_set_errhandler(cart, MPI_ERRORS_RETURN);
    int nn;
    rc = MPI_Graph_neighbors_count(cart, 0, &nn);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TOPOLOGY, "Graph call on a grid: class %d", cls);

    /* Dup keeps the topology. */
    MPI_Comm cd;
    MPI_Comm_dup(cart, &cd);
    MPI_Topo_test(cd, &st);
    CHECK(st == MPI_CART, "dup lost the topology (%d)", st);
    MPI_Comm_free(&cd);
    MPI_Comm_free(&cart);
    return finish();
}
