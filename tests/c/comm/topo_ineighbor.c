/* ranks: 1 2 3 4 6
 * Nonblocking and persistent neighborhood collectives: two Ineighbor operations in flight
 * on the same grid and one on a distributed graph at once, then a persistent
 * Neighbor_alltoallv_init started several times with new data. */
#include "check.h"
/* MPI_UNWEIGHTED is a sentinel address; GCC takes it for a zero-length array. */
#pragma GCC diagnostic ignored "-Wstringop-overread"

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    int dims[2] = {0, 0}, periods[2] = {1, 1};
    MPI_Dims_create(size, 2, dims);
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
    int cr, nb[4];
    MPI_Comm_rank(cart, &cr);
    MPI_Cart_shift(cart, 0, 1, &nb[0], &nb[1]);
    MPI_Cart_shift(cart, 1, 1, &nb[2], &nb[3]);

    /* A ring as a distributed graph: in from rank-1, out to rank+1. */
    int prev = (rank - 1 + size) % size, next = (rank + 1) % size;
    MPI_Comm ring;
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &prev, MPI_UNWEIGHTED, 1, &next, MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                                   &ring);

    int sa[4], ra[4] = {-1, -1, -1, -1}, rr = -1;
    for (int j = 0; j < 4; j++)
        sa[j] = cr * 10 + j;
    double dval = cr + 0.25, gd[4] = {-1, -1, -1, -1};
    MPI_Request req[3];
    MPI_Ineighbor_alltoall(sa, 1, MPI_INT, ra, 1, MPI_INT, cart, &req[0]);
    MPI_Ineighbor_allgather(&dval, 1, MPI_DOUBLE, gd, 1, MPI_DOUBLE, cart, &req[1]);
    MPI_Ineighbor_allgather(&rank, 1, MPI_INT, &rr, 1, MPI_INT, ring, &req[2]);
    MPI_Waitall(3, req, MPI_STATUSES_IGNORE);
    for (int d = 0; d < 2; d++) {
        int lo = nb[2 * d], hi = nb[2 * d + 1];
        CHECK(ra[2 * d] == lo * 10 + 2 * d + 1, "alltoall dim %d from below: %d", d, ra[2 * d]);
        CHECK(ra[2 * d + 1] == hi * 10 + 2 * d, "alltoall dim %d from above: %d", d, ra[2 * d + 1]);
        CHECK(gd[2 * d] == lo + 0.25 && gd[2 * d + 1] == hi + 0.25, "allgather dim %d: %g %g", d, gd[2 * d], gd[2 * d + 1]);
    }
    CHECK(rr == prev, "ring allgather got %d", rr);

    /* A persistent request freed without ever being started. */
    int sbuf[8], rbuf[8], scount = 0, rcount = 0, zero = 0;
    MPI_Request preq;
    MPI_Neighbor_alltoallv_init(sbuf, &scount, &zero, MPI_INT, rbuf, &rcount, &zero, MPI_INT, ring, MPI_INFO_NULL, &preq);
    MPI_Request_free(&preq);
    /* Persistent alltoallv on the ring, started four times with new data each time. */
    scount = rcount = 3;
    MPI_Neighbor_alltoallv_init(sbuf, &scount, &zero, MPI_INT, rbuf, &rcount, &zero, MPI_INT, ring, MPI_INFO_NULL, &preq);
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 3; i++)
            sbuf[i] = rank * 100 + k * 10 + i;
        for (int i = 0; i < 3; i++)
            rbuf[i] = -1;
        MPI_Start(&preq);
        MPI_Wait(&preq, MPI_STATUS_IGNORE);
        for (int i = 0; i < 3; i++)
            CHECK(rbuf[i] == prev * 100 + k * 10 + i, "persistent round %d element %d: %d", k, i, rbuf[i]);
    }
    MPI_Request_free(&preq);

    MPI_Comm_free(&ring);
    MPI_Comm_free(&cart);
    return finish();
}
