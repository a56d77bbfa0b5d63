// An unmodified C++ MPI program for the coordinated-checkpoint tests: the ring of ring.c
// written the C++ way (std::vector buffers, a class holding the state, iostreams for the
// output and an std::ofstream that must survive a rollback), so that the C++ runtime's own
// state (iostream buffers, exception tables, static constructors) is in the images too.
// Arguments: rounds, microseconds of computation per round, doubles exchanged per round,
// and a file rank 0 writes its lines to.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

void spin_us(long us) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    while (std::chrono::steady_clock::now() < until) {
    }
}

class Ring {
  public:
    Ring(int rank, int size, std::size_t big) : rank_(rank), size_(size), out_(big), in_(big) {}

    // One round: the token goes round (ANY_SOURCE receives), then a neighbour exchange.
    std::string round(int r) {
        std::uint64_t tok = 0;
        if (rank_ == 0) {
            tok = static_cast<std::uint64_t>(r) * 1000003u;
            MPI_Send(&tok, 1, MPI_UINT64_T, 1 % size_, r, MPI_COMM_WORLD);
            MPI_Recv(&tok, 1, MPI_UINT64_T, MPI_ANY_SOURCE, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&tok, 1, MPI_UINT64_T, MPI_ANY_SOURCE, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            tok = tok * 31 + static_cast<std::uint64_t>(rank_);
            MPI_Send(&tok, 1, MPI_UINT64_T, (rank_ + 1) % size_, r, MPI_COMM_WORLD);
        }
        fold(tok);
        for (std::size_t i = 0; i < out_.size(); i++) out_[i] = static_cast<double>((sum_ + i) % 1000) + rank_;
        const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
        MPI_Sendrecv(out_.data(), static_cast<int>(out_.size()), MPI_DOUBLE, right, 1000 + r, in_.data(),
                     static_cast<int>(in_.size()), MPI_DOUBLE, left, 1000 + r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (double v : in_) fold(static_cast<std::uint64_t>(v));
        std::uint64_t all = 0;
        MPI_Allreduce(&sum_, &all, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
        std::ostringstream line;
        line << "round " << r << " token " << tok << " all " << all;
        return line.str();
    }

    std::uint64_t sum() const { return sum_; }

  private:
    void fold(std::uint64_t v) { sum_ = (sum_ ^ v) * 1099511628211ULL; }

    int rank_, size_;
    std::uint64_t sum_ = 1469598103934665603ULL;
    std::vector<double> out_, in_;
};

}  // namespace

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 200;
    const long work_us = argc > 2 ? std::atol(argv[2]) : 10000;
    const std::size_t big = argc > 3 ? static_cast<std::size_t>(std::atol(argv[3])) : 100000;
    auto ring = std::make_unique<Ring>(rank, size, big);
    std::ofstream log;
    if (rank == 0 && argc > 4) log.open(argv[4]);
    for (int r = 0; r < rounds; r++) {
        spin_us(work_us);
        const std::string line = ring->round(r);
        if (rank == 0) {
            std::cout << line << std::endl;
            if (log) log << line << std::endl;
        }
    }
    std::uint64_t s = ring->sum(), total = 0;
    MPI_Reduce(&s, &total, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
    if (rank == 0) std::cout << "done " << rounds << " rounds, checksum " << total << std::endl;
    MPI_Finalize();
    return 0;
}
