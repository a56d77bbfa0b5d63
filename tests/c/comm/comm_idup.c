/* ranks: 2 3 4 8
 * MPI_Comm_idup does not block: members reach it at different times (one waits in a
 * receive that the others satisfy only after their idup), duplications of overlapping
 * communicators cross, several are in flight on one communicator together with a
 * nonblocking collective, and intercommunicators are duplicated the same way. */
#include "check.h"

static void ring(MPI_Comm c, int base)
{
    int r, s, got = -1;
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &s);
    MPI_Sendrecv(&(int){base + r}, 1, MPI_INT, (r + 1) % s, 3, &got, 1, MPI_INT, (r - 1 + s) % s, 3, c,
                 MPI_STATUS_IGNORE);
    CHECK(got == base + (r - 1 + s) % s, "ring got %d", got);
}

int main(int argc, char **argv)
{
    int rank, size, cmp, buf[2];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* 1. Rank 0 calls idup only after everybody else's synchronous send arrived. */
    MPI_Comm nc;
    MPI_Request req;
    if (rank == 0) {
        for (int i = 1; i < size; i++)
            MPI_Recv(buf, 2, MPI_INT, i, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Comm_idup(MPI_COMM_WORLD, &nc, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        MPI_Comm_idup(MPI_COMM_WORLD, &nc, &req);
        buf[0] = rank;
        MPI_Ssend(buf, 2, MPI_INT, 0, 0, MPI_COMM_WORLD);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    MPI_Comm_compare(nc, MPI_COMM_WORLD, &cmp);
    CHECK(cmp == MPI_CONGRUENT, "idup compare %d", cmp);
    ring(nc, 10);
    MPI_Comm_free(&nc);

    /* 2. Crossing duplications: every rank is in {r, r+1} ("primary") and {r-1, r}
     * ("secondary") and duplicates its primary first. With blocking duplication this
     * deadlocks around the ring. */
    if (size >= 2) {
        MPI_Comm prim = MPI_COMM_NULL, sec = MPI_COMM_NULL, tmp;
        for (int i = 0; i < size; i++) {
            if (rank == i)
                MPI_Comm_split(MPI_COMM_WORLD, 0, 0, &prim);
            else if (rank == (i + 1) % size)
                MPI_Comm_split(MPI_COMM_WORLD, 0, 0, &sec);
            else {
                MPI_Comm_split(MPI_COMM_WORLD, 1, 0, &tmp);
                MPI_Comm_free(&tmp);
            }
        }
        MPI_Comm pd, sd;
        MPI_Request r2[2];
        MPI_Comm_idup(prim, &pd, &r2[0]);
        MPI_Comm_idup(sec, &sd, &r2[1]);
        MPI_Waitall(2, r2, MPI_STATUSES_IGNORE);
        /* Both duplicates at once (a rank's primary is its neighbour's secondary). */
        int got[2] = {-1, -1}, pr, sr;
        MPI_Comm_rank(pd, &pr);
        MPI_Comm_rank(sd, &sr);
        MPI_Request q[4];
        MPI_Irecv(&got[0], 1, MPI_INT, 1 - pr, 4, pd, &q[0]);
        MPI_Irecv(&got[1], 1, MPI_INT, 1 - sr, 4, sd, &q[1]);
        MPI_Isend(&rank, 1, MPI_INT, 1 - pr, 4, pd, &q[2]);
        MPI_Isend(&rank, 1, MPI_INT, 1 - sr, 4, sd, &q[3]);
        MPI_Waitall(4, q, MPI_STATUSES_IGNORE);
        CHECK(got[0] == (rank + 1) % size, "primary duplicate: got %d", got[0]);
        CHECK(got[1] == (rank - 1 + size) % size, "secondary duplicate: got %d", got[1]);
        MPI_Comm_free(&pd);
        MPI_Comm_free(&sd);
        MPI_Comm_free(&prim);
        MPI_Comm_free(&sec);
    }

    /* 3. Several at once on one communicator, with a nonblocking collective between. */
    {
        MPI_Comm d[3];
        MPI_Request r4[4];
        int one = 1, sum = 0;
        MPI_Comm_idup(MPI_COMM_WORLD, &d[0], &r4[0]);
        MPI_Iallreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r4[1]);
        MPI_Comm_idup(MPI_COMM_WORLD, &d[1], &r4[2]);
        MPI_Comm_idup(d[0] == MPI_COMM_NULL ? MPI_COMM_WORLD : MPI_COMM_SELF, &d[2], &r4[3]);
        MPI_Waitall(4, r4, MPI_STATUSES_IGNORE);
        CHECK(sum == size, "iallreduce between idups: %d", sum);
        ring(d[0], 40);
        ring(d[1], 50);
        ring(d[2], 60);
        for (int i = 0; i < 3; i++)
            MPI_Comm_free(&d[i]);
    }

    /* 4. An intercommunicator between even and odd ranks, duplicated with the staggered
     * pattern on both sides. */
    MPI_Comm local, ic, icd;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, rank == 0 ? 1 : 0, 77, &ic);
    int lr, rs;
    MPI_Comm_rank(ic, &lr);
    MPI_Comm_remote_size(ic, &rs);
    if (lr == 0) {
        for (int i = 1; i < rs; i++)
            MPI_Recv(buf, 2, MPI_INT, i, 0, ic, MPI_STATUS_IGNORE);
        MPI_Comm_idup(ic, &icd, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        MPI_Comm_idup(ic, &icd, &req);
        /* The remote leader waits for every non-leader of this group. */
        MPI_Ssend(buf, 2, MPI_INT, 0, 0, ic);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    MPI_Comm_compare(ic, icd, &cmp);
    CHECK(cmp == MPI_CONGRUENT, "inter idup compare %d", cmp);
    if (lr < rs) {
        int v = -1;
        MPI_Sendrecv(&rank, 1, MPI_INT, lr, 5, &v, 1, MPI_INT, lr, 5, icd, MPI_STATUS_IGNORE);
        CHECK(v % 2 != rank % 2, "inter idup peer %d", v);
    }
    MPI_Comm_free(&icd);
    MPI_Comm_free(&ic);
    MPI_Comm_free(&local);
    return finish();
}
