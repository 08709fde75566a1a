// The staging pipeline on one GPU (scripts/gpu-check runs it): two ranks (threads) on device 0
// reduce-scatter device buffers through StagedCommunicator (pinned staging, CUDA copier, UCX
// between them), against its parts measured in the same run and the way the pipeline runs them:
// pinned device-to-host and host-to-device copies in staging chunks on a stream of each rank,
// both ranks at once (they share the GPU's copy engines and the host's memory, as in the
// pipeline), and the UCX reduce-scatter of pinned host buffers alone. Each copy's bandwidth
// with one rank alone is printed beside it ("_alone"), for reading, not for the ratio. The
// pipeline hides the faster stages behind the slowest; target: its throughput >= 80% of the
// slowest stage. Prints one JSON object. Exits 2 when no GPU is visible.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/cuda_data_plane.h"
#include "collectives/staged.h"
#include "collectives/ucx/ucx_communicator.h"
#include "common/args.h"

namespace retort::collectives {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// GB/s per rank of pinned copies of `bytes` in `kind` direction, `ranks` threads at once (each
// its own stream and buffers, started together), each copying in `chunk` pieces on its stream
// as the staging copier does: the slowest rank's time, the best of `iters`. -1 on a CUDA error.
double CopyBandwidth(size_t bytes, cudaMemcpyKind kind, size_t chunk, int ranks, int iters) {
  std::vector<double> best(ranks, 0);
  std::vector<double> seconds(ranks, 0);
  std::barrier start(ranks), done(ranks);
  bool failed = false;
  std::mutex failed_mu;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      void* device = nullptr;
      void* host = nullptr;
      cudaStream_t stream = nullptr;
      bool ok = cudaMalloc(&device, bytes) == cudaSuccess &&
                cudaHostAlloc(&host, bytes, cudaHostAllocPortable) == cudaSuccess &&
                cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess;
      for (int i = 0; i < iters; ++i) {
        start.arrive_and_wait();
        const double t0 = Now();
        for (size_t at = 0; ok && at < bytes; at += chunk) {
          const size_t n = std::min(chunk, bytes - at);
          char* d = static_cast<char*>(device) + at;
          char* h = static_cast<char*>(host) + at;
          ok = (kind == cudaMemcpyDeviceToHost
                    ? cudaMemcpyAsync(h, d, n, kind, stream)
                    : cudaMemcpyAsync(d, h, n, kind, stream)) == cudaSuccess;
        }
        ok = ok && cudaStreamSynchronize(stream) == cudaSuccess;
        seconds[r] = Now() - t0;
        done.arrive_and_wait();
        double slowest = 0;
        for (double s : seconds) slowest = std::max(slowest, s);
        best[r] = std::max(best[r], static_cast<double>(bytes) / slowest / 1e9);
        done.arrive_and_wait();  // every rank read `seconds` before the next round writes it
      }
      if (!ok) {
        std::lock_guard<std::mutex> lock(failed_mu);
        failed = true;
      }
      if (stream != nullptr) cudaStreamDestroy(stream);
      cudaFree(device);
      cudaFreeHost(host);
    });
  }
  for (auto& t : threads) t.join();
  return failed ? -1 : best[0];
}

// Seconds per reduce-scatter of `bytes` (input size) on each of two thread ranks: device
// buffers through staging (`staged`) or pinned host buffers straight over UCX.
double TimeReduceScatter(size_t bytes, bool staged, size_t chunk_bytes, int iters) {
  InMemoryStore store;
  double seconds[2] = {-1, -1};  // -1: that rank failed
  std::thread ranks[2];
  for (int r = 0; r < 2; ++r) {
    ranks[r] = std::thread([&, r] {
      cudaSetDevice(0);
      ucx::UcxCommunicatorOptions o;
      o.default_timeout = std::chrono::milliseconds(120000);
      auto ucx = ucx::CreateUcxCommunicator(&store, r, 2, 1, o);
      auto failed = [r](const char* what, const retort::Status& st) {
        std::fprintf(stderr, "staging_bench: rank %d: %s: %s\n", r, what, st.ToString().c_str());
      };
      if (!ucx.ok()) return failed("creating the UCX communicator", ucx.status());
      std::unique_ptr<Communicator> comm = std::move(*ucx);
      if (staged) {
        auto copier = CreateCudaCopier(0);
        if (!copier.ok()) return failed("creating the CUDA copier", copier.status());
        StagedCommunicatorOptions so;
        so.chunk_bytes = chunk_bytes;
        auto s = StagedCommunicator::Create(std::move(comm), std::move(*copier), so);
        if (!s.ok()) return failed("creating the staged communicator", s.status());
        comm = std::move(*s);
      }
      const size_t count = bytes / sizeof(float);
      void *in = nullptr, *out = nullptr;
      const MemoryKind kind = staged ? MemoryKind::kCudaDevice : MemoryKind::kPinnedHost;
      if (staged) {
        cudaMalloc(&in, bytes);
        cudaMalloc(&out, bytes / 2);
      } else {
        cudaHostAlloc(&in, bytes, cudaHostAllocPortable);
        cudaHostAlloc(&out, bytes / 2, cudaHostAllocPortable);
      }
      auto once = [&] {
        return comm
            ->ReduceScatter({in, count, DataType::kFloat32, kind},
                            {out, count / 2, DataType::kFloat32, kind}, ReduceOp::kSum)
            ->Wait(Deadline::AfterMs(120000));
      };
      retort::Status status = once();
      const double t0 = Now();
      for (int i = 0; i < iters && status.ok(); ++i) status = once();
      seconds[r] = status.ok() ? (Now() - t0) / iters : -1;
      if (!status.ok())
        std::fprintf(stderr, "staging_bench: rank %d: %s\n", r, status.ToString().c_str());
      if (staged) {
        cudaFree(in);
        cudaFree(out);
      } else {
        cudaFreeHost(in);
        cudaFreeHost(out);
      }
    });
  }
  for (auto& t : ranks) t.join();
  if (seconds[0] < 0 || seconds[1] < 0) return -1;
  return std::max(seconds[0], seconds[1]);
}

}  // namespace
}  // namespace retort::collectives

int main(int argc, char** argv) {
  using namespace retort::collectives;
  int64_t chunk_bytes = int64_t{4} << 20;
  int iters = 5;
  retort::ArgParser parser("staging_bench [--chunk-bytes=N] [--iters=N]",
                           "The GPU staging pipeline against its parts (one JSON object).");
  parser.AddInt("chunk-bytes", &chunk_bytes, "staging chunk");
  parser.AddInt("iters", &iters, "timed iterations per size");
  if (auto code = parser.ParseOrExitCode(argc, argv, "staging_bench")) return *code;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "staging_bench: no CUDA device visible\n");
    return 2;
  }
  std::string json =
      "{\"bench\":\"staging\",\"chunk_bytes\":" + std::to_string(chunk_bytes) + ",\"sizes\":[";
  bool first = true;
  for (size_t mib : {16, 64, 256}) {
    const size_t bytes = mib << 20;
    const size_t chunk = static_cast<size_t>(chunk_bytes);
    // The stages as the pipeline runs them (both ranks at once, in chunks; the copy back moves
    // this rank's half), and each copy with one rank alone, whole, for reading.
    const double d2h = CopyBandwidth(bytes, cudaMemcpyDeviceToHost, chunk, 2, iters);
    const double h2d = CopyBandwidth(bytes / 2, cudaMemcpyHostToDevice, chunk, 2, iters);
    const double d2h_alone = CopyBandwidth(bytes, cudaMemcpyDeviceToHost, bytes, 1, iters);
    const double h2d_alone = CopyBandwidth(bytes, cudaMemcpyHostToDevice, bytes, 1, iters);
    if (d2h <= 0 || h2d <= 0 || d2h_alone <= 0 || h2d_alone <= 0) {
      std::fprintf(stderr, "staging_bench: a %zu MiB pinned copy failed\n", mib);
      return 1;
    }
    // A 2-rank reduce-scatter moves half the input over the wire each way.
    const double wire_s = TimeReduceScatter(bytes, false, static_cast<size_t>(chunk_bytes), iters);
    const double staged_s = TimeReduceScatter(bytes, true, static_cast<size_t>(chunk_bytes), iters);
    if (wire_s <= 0 || staged_s <= 0) {
      std::fprintf(stderr, "staging_bench: the %zu MiB reduce-scatter failed\n", mib);
      return 1;
    }
    const double wire = bytes / wire_s / 1e9, pipeline = bytes / staged_s / 1e9;
    // In input bytes per second: the copy back moves half of the input (this rank's share).
    const double slowest = std::min({d2h, 2 * h2d, wire});
    char line[640];
    std::snprintf(line, sizeof(line),
                  "%s{\"MiB\":%zu,\"d2h_GBps\":%.2f,\"h2d_GBps\":%.2f,\"d2h_alone_GBps\":%.2f,"
                  "\"h2d_alone_GBps\":%.2f,\"ucx_rs_GBps\":%.2f,\"staged_rs_GBps\":%.2f,"
                  "\"of_slowest_stage\":%.3f}",
                  first ? "" : ",", mib, d2h, h2d, d2h_alone, h2d_alone, wire, pipeline,
                  pipeline / slowest);
    json += line;
    first = false;
  }
  json += "]}";
  std::printf("%s\n", json.c_str());
  return 0;
}
