// The staging pipeline on one GPU (scripts/gpu-check runs it): two ranks (threads) on device 0
// reduce-scatter device buffers through StagedCommunicator (pinned staging, CUDA copier, UCX
// between them), against its parts measured in the same run: pinned device-to-host and
// host-to-device copy bandwidth, and the UCX reduce-scatter of pinned host buffers alone. The
// pipeline hides the faster stages behind the slowest; target: its throughput >= 80% of the
// slowest stage. Prints one JSON object. Exits 2 when no GPU is visible.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
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

// GB/s of one pinned copy of `bytes` in `kind` direction, the best of `iters`.
double CopyBandwidth(size_t bytes, cudaMemcpyKind kind, int iters) {
  void* device = nullptr;
  void* host = nullptr;
  cudaMalloc(&device, bytes);
  cudaHostAlloc(&host, bytes, cudaHostAllocPortable);
  double best = 0;
  for (int i = 0; i < iters; ++i) {
    const double t0 = Now();
    if (kind == cudaMemcpyDeviceToHost)
      cudaMemcpy(host, device, bytes, kind);
    else
      cudaMemcpy(device, host, bytes, kind);
    best = std::max(best, static_cast<double>(bytes) / (Now() - t0) / 1e9);
  }
  cudaFree(device);
  cudaFreeHost(host);
  return best;
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
    const double d2h = CopyBandwidth(bytes, cudaMemcpyDeviceToHost, iters);
    const double h2d = CopyBandwidth(bytes, cudaMemcpyHostToDevice, iters);
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
    char line[512];
    std::snprintf(line, sizeof(line),
                  "%s{\"MiB\":%zu,\"d2h_GBps\":%.2f,\"h2d_GBps\":%.2f,\"ucx_rs_GBps\":%.2f,"
                  "\"staged_rs_GBps\":%.2f,\"of_slowest_stage\":%.3f}",
                  first ? "" : ",", mib, d2h, h2d, wire, pipeline, pipeline / slowest);
    json += line;
    first = false;
  }
  json += "]}";
  std::printf("%s\n", json.c_str());
  return 0;
}
