// OpenMPI reference for collectives_bench: MPI_Allreduce, MPI_Allgather and
// MPI_Reduce_scatter_block over the same sizes, printing the same JSON lines.
// Usage: mpirun -np 2 mpi_reference [min_bytes] [max_bytes]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

int ItersFor(size_t bytes) {
  if (bytes <= (size_t{64} << 10)) return 2000;
  if (bytes <= (size_t{1} << 20)) return 200;
  if (bytes <= (size_t{16} << 20)) return 30;
  return 8;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const size_t min_bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  const size_t max_bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (size_t{256} << 20);
  std::vector<float> a(max_bytes / sizeof(float) + 1, 1.0f);
  std::vector<float> b(max_bytes / sizeof(float) + 1, 0.0f);
  for (const std::string op : {"all_reduce", "all_gather", "reduce_scatter"}) {
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
      const size_t unit = op == "all_reduce" ? sizeof(float) : n * sizeof(float);
      const size_t s = bytes / unit * unit;
      const int count = static_cast<int>(s / sizeof(float));
      auto run = [&] {
        if (op == "all_reduce") {
          MPI_Allreduce(MPI_IN_PLACE, a.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        } else if (op == "all_gather") {
          MPI_Allgather(a.data(), count / n, MPI_FLOAT, b.data(), count / n, MPI_FLOAT,
                        MPI_COMM_WORLD);
        } else {
          MPI_Reduce_scatter_block(a.data(), b.data(), count / n, MPI_FLOAT, MPI_SUM,
                                   MPI_COMM_WORLD);
        }
      };
      run();
      run();
      MPI_Barrier(MPI_COMM_WORLD);
      const int iters = ItersFor(s);
      const double start = MPI_Wtime();
      for (int i = 0; i < iters; ++i) run();
      double t = (MPI_Wtime() - start) / iters;
      double sum = 0;
      MPI_Allreduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      t = sum / n;
      if (rank == 0) {
        const double algbw = static_cast<double>(s) / t / 1e9;
        const double factor = op == "all_reduce" ? 2.0 * (n - 1) / n : double(n - 1) / n;
        std::printf(
            "{\"impl\":\"openmpi\",\"op\":\"%s\",\"ranks\":%d,\"bytes\":%zu,\"time_us\":%.1f,"
            "\"algbw_GBps\":%.3f,\"busbw_GBps\":%.3f}\n",
            op.c_str(), n, s, t * 1e6, algbw, algbw * factor);
        std::fflush(stdout);
      }
    }
  }
  MPI_Finalize();
  return 0;
}
