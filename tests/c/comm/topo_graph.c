/* ranks: 1 2 3 4 8
 * Graph and distributed-graph topologies: Graph_create / get / neighbors / map,
 * Graphdims_get, Dist_graph_create and Dist_graph_create_adjacent with and without
 * weights, Dist_graph_neighbors(_count), and neighborhood collectives over them
 * (allgather, allgatherv, alltoall, alltoallv, alltoallw, duplicate edges). */
#include "check.h"
/* MPI_UNWEIGHTED is a sentinel address; GCC takes it for a zero-length array. */
#pragma GCC diagnostic ignored "-Wstringop-overread"

int main(int argc, char **argv)
{
    int rank, size, st;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Graph: node i connects to i+1 and i-1 (a ring), node 0 also to itself twice over
     * (a duplicate edge 0 -> 0) when there is one process. */
    int *index = malloc(sizeof(int) * size), *edges = malloc(sizeof(int) * 2 * size);
    int ne = 0;
    for (int i = 0; i < size; i++) {
        edges[ne++] = (i + 1) % size;
        edges[ne++] = (i - 1 + size) % size;
        index[i] = ne;
    }
    MPI_Comm g;
    MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &g);
    MPI_Topo_test(g, &st);
    CHECK(st == MPI_GRAPH, "Topo_test %d", st);
    int nn, nedges;
    MPI_Graphdims_get(g, &nn, &nedges);
    CHECK(nn == size && nedges == 2 * size, "Graphdims %d %d", nn, nedges);
    int *gi = malloc(sizeof(int) * size), *ge = malloc(sizeof(int) * 2 * size);
    MPI_Graph_get(g, size, 2 * size, gi, ge);
    CHECK(memcmp(gi, index, sizeof(int) * size) == 0 && memcmp(ge, edges, sizeof(int) * 2 * size) == 0, "Graph_get");
    int cnt, nb[2];
    MPI_Graph_neighbors_count(g, rank, &cnt);
    CHECK(cnt == 2, "neighbors_count %d", cnt);
    MPI_Graph_neighbors(g, rank, 2, nb);
    CHECK(nb[0] == (rank + 1) % size && nb[1] == (rank - 1 + size) % size, "neighbors %d %d", nb[0], nb[1]);
    int nr;
    MPI_Graph_map(MPI_COMM_WORLD, size, index, edges, &nr);
    CHECK(nr == rank, "Graph_map %d", nr);

    /* Allgather on the graph ring: slot 0 from rank+1, slot 1 from rank-1. With one or two
     * processes the same neighbour appears twice; messages match in list order. */
    int ag[2] = {-1, -1};
    MPI_Neighbor_allgather(&rank, 1, MPI_INT, ag, 1, MPI_INT, g);
    CHECK(ag[0] == nb[0] && ag[1] == nb[1], "graph allgather %d %d", ag[0], ag[1]);

    /* Alltoallv with different counts per neighbour: send j+1 ints to neighbour j. */
    int sb[3], scount[2] = {1, 2}, sdisp[2] = {0, 1}, rb[3] = {-1, -1, -1}, rcount[2], rdisp[2] = {0, 1};
    sb[0] = rank * 100;     /* to neighbour 0 (rank+1) */
    sb[1] = rank * 100 + 1; /* to neighbour 1 (rank-1) */
    sb[2] = rank * 100 + 2;
    /* Neighbour 0 (rank+1) lists me as its neighbour 1, so it sends me 2 ints; neighbour 1
     * (rank-1) lists me as its neighbour 0 and sends 1. With size <= 2 positions
     * coincide: the k-th message from a process matches my k-th receive from it. */
    if (size > 2) {
        rcount[0] = 2;
        rcount[1] = 1;
        rdisp[1] = 2;
    } else {
        rcount[0] = 1;
        rcount[1] = 2;
    }
    MPI_Neighbor_alltoallv(sb, scount, sdisp, MPI_INT, rb, rcount, rdisp, MPI_INT, g);
    if (size > 2) {
        int up = (rank + 1) % size, down = (rank - 1 + size) % size;
        CHECK(rb[0] == up * 100 + 1 && rb[1] == up * 100 + 2, "alltoallv from up: %d %d", rb[0], rb[1]);
        CHECK(rb[2] == down * 100, "alltoallv from down: %d", rb[2]);
    } else {
        int o = (rank + 1) % size;
        CHECK(rb[0] == o * 100 && rb[1] == o * 100 + 1 && rb[2] == o * 100 + 2, "alltoallv duplicate edges: %d %d %d",
              rb[0], rb[1], rb[2]);
    }
    MPI_Comm_free(&g);

    /* Dist graph, each process names the edge rank -> rank+1 with weight rank, and rank 0
     * also names the edge (size-1) -> 0 twice. */
    int srcs[2] = {rank, size - 1}, degs[2] = {1, rank == 0 ? 2 : 0}, dsts[3] = {(rank + 1) % size, 0, 0};
    int wts[3] = {rank, 7, 8};
    MPI_Comm dg;
    MPI_Dist_graph_create(MPI_COMM_WORLD, 2, srcs, degs, dsts, wts, MPI_INFO_NULL, 0, &dg);
    MPI_Topo_test(dg, &st);
    CHECK(st == MPI_DIST_GRAPH, "Topo_test %d", st);
    int indeg, outdeg, weighted;
    /* The edges every process contributed, in rank order: in- and out-neighbours follow
     * this order on every process. */
    int nall = size + 2, (*all)[3] = malloc(sizeof(int[3]) * nall), k = 0;
    for (int c = 0; c < size; c++) {
        all[k][0] = c, all[k][1] = (c + 1) % size, all[k][2] = c, k++;
        if (c == 0) {
            all[k][0] = size - 1, all[k][1] = 0, all[k][2] = 7, k++;
            all[k][0] = size - 1, all[k][1] = 0, all[k][2] = 8, k++;
        }
    }
    int ein = 0, eout = 0, xin[3], xinw[3], xout[3], xoutw[3], xval[3];
    for (int e = 0; e < nall; e++) {
        if (all[e][0] == rank)
            xout[eout] = all[e][1], xoutw[eout++] = all[e][2];
        if (all[e][1] == rank) {
            /* Value the source sends on this edge: its out-edge index j gives src*10+j. */
            int j = 0;
            for (int f = 0; f < e; f++)
                j += all[f][0] == all[e][0];
            xval[ein] = all[e][0] * 10 + j;
            xin[ein] = all[e][0], xinw[ein++] = all[e][2];
        }
    }
    MPI_Dist_graph_neighbors_count(dg, &indeg, &outdeg, &weighted);
    CHECK(indeg == ein && outdeg == eout && weighted, "dist counts in %d out %d weighted %d", indeg, outdeg, weighted);
    int is[3], iw[3], os[3], ow[3];
    MPI_Dist_graph_neighbors(dg, 3, is, iw, 3, os, ow);
    for (int i = 0; i < ein && i < indeg; i++)
        CHECK(is[i] == xin[i] && iw[i] == xinw[i], "in-edge %d: %d w %d", i, is[i], iw[i]);
    for (int i = 0; i < eout && i < outdeg; i++)
        CHECK(os[i] == xout[i] && ow[i] == xoutw[i], "out-edge %d: %d w %d", i, os[i], ow[i]);
    /* Alltoall over it: out-edge j carries rank*10+j. */
    int so[3] = {rank * 10, rank * 10 + 1, rank * 10 + 2}, ri[3] = {-1, -1, -1};
    MPI_Neighbor_alltoall(so, 1, MPI_INT, ri, 1, MPI_INT, dg);
    for (int i = 0; i < ein; i++)
        CHECK(ri[i] == xval[i], "dist alltoall slot %d: %d expected %d", i, ri[i], xval[i]);
    free(all);
    int prev = (rank - 1 + size) % size;
    MPI_Comm_free(&dg);

    /* Adjacent, unweighted: in from rank-1 and rank+1, out to rank+1 and rank-1. */
    int ins[2] = {prev, (rank + 1) % size}, outs[2] = {(rank + 1) % size, prev};
    MPI_Comm ad;
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, ins, MPI_UNWEIGHTED, 2, outs, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &ad);
    MPI_Dist_graph_neighbors_count(ad, &indeg, &outdeg, &weighted);
    CHECK(indeg == 2 && outdeg == 2 && !weighted, "adjacent counts %d %d %d", indeg, outdeg, weighted);
    /* Allgatherv into reversed slots; alltoallw with mixed types (an int and a double). */
    int agv[2] = {-1, -1}, rc2[2] = {1, 1}, dsp[2] = {1, 0};
    MPI_Neighbor_allgatherv(&rank, 1, MPI_INT, agv, rc2, dsp, MPI_INT, ad);
    if (size > 2)
        CHECK(agv[1] == prev && agv[0] == (rank + 1) % size, "allgatherv %d %d", agv[0], agv[1]);
    struct {
        int i;
        double d;
    } sbw, rbw[2];
    sbw.i = rank;
    sbw.d = rank + 0.5;
    int scw[2] = {1, 1}, rcw[2] = {1, 1};
    MPI_Aint sdw[2] = {0, (char *)&sbw.d - (char *)&sbw}, rdw[2] = {0, (char *)&rbw[1].d - (char *)rbw};
    MPI_Datatype stw[2] = {MPI_INT, MPI_DOUBLE}, rtw[2] = {MPI_INT, MPI_DOUBLE};
    rbw[0].i = -1;
    rbw[1].d = -1;
    MPI_Neighbor_alltoallw(&sbw, scw, sdw, stw, rbw, rcw, rdw, rtw, ad);
    /* In-neighbour 0 (rank-1) lists me as out-neighbour 0 and sends its int. In-neighbour
     * 1 (rank+1) lists me as out-neighbour 1 and sends its double. */
    if (size > 2) {
        CHECK(rbw[0].i == prev, "alltoallw int %d", rbw[0].i);
        CHECK(rbw[1].d == (rank + 1) % size + 0.5, "alltoallw double %g", rbw[1].d);
    }
    MPI_Comm_free(&ad);

    /* Graph_create with fewer nodes than processes leaves ranks out. */
    if (size > 1) {
        int i1[1] = {0};
        MPI_Comm small;
        MPI_Graph_create(MPI_COMM_WORLD, 1, i1, NULL, 0, &small);
        CHECK((rank == 0) == (small != MPI_COMM_NULL), "single-node graph membership");
        if (small != MPI_COMM_NULL) {
            MPI_Graph_neighbors_count(small, 0, &cnt);
            CHECK(cnt == 0, "isolated node has %d neighbours", cnt);
            MPI_Comm_free(&small);
        }
    }
    /* Invalid graph: an edge to a node that does not exist. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int bi[1] = {1}, be[1] = {5}, cls;
    MPI_Comm bg;
    int rc = MPI_Graph_create(MPI_COMM_WORLD, 1, bi, be, 0, &bg);
    CHECK(rc != MPI_SUCCESS, "graph with an edge to node 5 was accepted");
    (void)cls;

    free(index);
    free(edges);
    free(gi);
    free(ge);
    return finish();
}
