// CMA read probe: what a single-copy read costs on this host against a plain copy. One
// process reads its own memory with process_vm_readv (the kernel path is the one a receiver
// takes to read a peer: pin the source pages, copy) in 1 MiB calls, as the UCX transport's
// CMA rendezvous does (collectives/ucx/cma.h), and copies the same bytes with memcpy, for
// 1-64 MiB buffers on ordinary pages and on transparent huge pages (madvise MADV_HUGEPAGE,
// 2 MiB aligned). Best of 20 per figure; one JSON line per size and page kind.
// Usage: cma_read_probe [max_mib]   (default 64)
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kReadCall = size_t{1} << 20;

// Best-of-20 GB/s of `copy` over `bytes`.
template <typename Copy>
double BestGBps(size_t bytes, Copy copy) {
  double best = 1e30;
  for (int i = 0; i < 20; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (!copy()) return 0;
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return static_cast<double>(bytes) / best / 1e9;
}

char* Allocate(size_t bytes, bool huge) {
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  auto* p = static_cast<char*>(std::aligned_alloc(kHugePage, rounded));
  if (p == nullptr) return nullptr;
  if (huge) madvise(p, rounded, MADV_HUGEPAGE);
  std::memset(p, 1, rounded);  // fault every page in before timing
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  const long max_mib = argc > 1 ? std::atol(argv[1]) : 64;
  if (max_mib < 1) {
    std::fprintf(stderr, "usage: cma_read_probe [max_mib >= 1]\n");
    return 2;
  }
  for (size_t mib = 1; mib <= static_cast<size_t>(max_mib); mib *= 4) {
    const size_t bytes = mib << 20;
    for (bool huge : {false, true}) {
      char* src = Allocate(bytes, huge);
      char* dst = Allocate(bytes, huge);
      if (src == nullptr || dst == nullptr) {
        std::fprintf(stderr, "cma_read_probe: cannot allocate %zu MiB\n", mib);
        return 1;
      }
      const double memcpy_gbps = BestGBps(bytes, [&] {
        std::memcpy(dst, src, bytes);
        asm volatile("" : : "r"(dst) : "memory");
        return true;
      });
      const double cma_gbps = BestGBps(bytes, [&] {
        for (size_t at = 0; at < bytes; at += kReadCall) {
          const size_t n = std::min(kReadCall, bytes - at);
          iovec local{dst + at, n};
          iovec remote{src + at, n};
          if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != static_cast<ssize_t>(n))
            return false;
        }
        return true;
      });
      if (cma_gbps == 0) {
        std::perror("cma_read_probe: process_vm_readv");
        return 1;
      }
      std::printf(
          "{\"probe\":\"cma_read\",\"bytes\":%zu,\"huge_pages\":%s,\"memcpy_GBps\":%.2f,"
          "\"cma_GBps\":%.2f}\n",
          bytes, huge ? "true" : "false", memcpy_gbps, cma_gbps);
      std::free(src);
      std::free(dst);
    }
  }
  return 0;
}
