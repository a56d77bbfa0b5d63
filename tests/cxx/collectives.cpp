// C++ through mpicxx and the C API: containers as buffers, a user-defined reduction from a
// lambda, a communicator split, nonblocking exchange, and MPI_Comm_c2f/f2c round trips.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0, errs = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    std::vector<double> mine(1000, rank + 1.0), sum(1000);
    MPI_Allreduce(mine.data(), sum.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
    const double expect = size * (size + 1) / 2.0;
    for (double v : sum)
        errs += v != expect;

    MPI_Op maxabs;
    MPI_Op_create(
        [](void *in, void *inout, int *len, MPI_Datatype *) {
            auto *a = static_cast<int *>(in);
            auto *b = static_cast<int *>(inout);
            for (int i = 0; i < *len; i++)
                b[i] = std::max(std::abs(a[i]), std::abs(b[i]));
        },
        1, &maxabs);
    int v = rank % 2 ? -rank : rank, r = 0;
    MPI_Allreduce(&v, &r, 1, MPI_INT, maxabs, MPI_COMM_WORLD);
    errs += r != size - 1;
    MPI_Op_free(&maxabs);

    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Fint f = MPI_Comm_c2f(half);
    errs += MPI_Comm_f2c(f) != half;
    errs += MPI_Comm_c2f(MPI_COMM_WORLD) != MPI_Comm_c2f(MPI_Comm_f2c(MPI_Comm_c2f(MPI_COMM_WORLD)));
    int hsize = 0;
    MPI_Comm_size(half, &hsize);
    errs += hsize != (size + 1 - rank % 2) / 2;
    MPI_Comm_free(&half);

    std::string msg = "from " + std::to_string(rank);
    std::vector<char> in(64, '\0');
    MPI_Request reqs[2];
    MPI_Irecv(in.data(), static_cast<int>(in.size()), MPI_CHAR, (rank + size - 1) % size, 0,
              MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(msg.c_str(), static_cast<int>(msg.size()) + 1, MPI_CHAR, (rank + 1) % size, 0,
              MPI_COMM_WORLD, &reqs[1]);
    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    errs += std::string(in.data()) != "from " + std::to_string((rank + size - 1) % size);

    MPI_Allreduce(MPI_IN_PLACE, &errs, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf(errs ? " Found %d errors\n" : " No Errors\n", errs);
    MPI_Finalize();
    return errs != 0;
}
