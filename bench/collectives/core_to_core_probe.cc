// Core-to-core probe: what the two CPUs of this host (a VM: vCPUs the hypervisor may place
// on cores that share a last-level cache, or not) cost each other, measured with two threads
// pinned to CPU 0 and CPU 1:
//   c2c_latency_ns: one-way cache-line hand-over latency (ping-pong of an atomic);
//   fifo_GBps: bandwidth of a producer/consumer hand-over of 8 KiB blocks through a 64-slot
//   ring, the shape of UCX's shared-memory FIFO (copy in on CPU 0, copy out on CPU 1).
// Measured in batches; prints the best and the median batch (preemption by other load widens
// the spread, a slow placement moves both). One JSON line, for run_bench.sh.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

bool Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

alignas(64) std::atomic<long> g_flag{0};
alignas(64) std::atomic<size_t> g_head{0};
alignas(64) std::atomic<size_t> g_tail{0};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  if (std::thread::hardware_concurrency() < 2) {
    std::printf("{\"probe\":\"core_to_core\",\"error\":\"fewer than 2 CPUs\"}\n");
    return 0;
  }
  constexpr int kBatches = 50;
  constexpr long kPerBatch = 2000;
  std::vector<double> latency;
  std::thread pong([] {
    Pin(1);
    for (long i = 0; i < kBatches * kPerBatch; ++i) {
      while (g_flag.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      g_flag.store(2 * i + 2, std::memory_order_release);
    }
  });
  Pin(0);
  for (long b = 0; b < kBatches; ++b) {
    const auto start = Clock::now();
    for (long i = b * kPerBatch; i < (b + 1) * kPerBatch; ++i) {
      g_flag.store(2 * i + 1, std::memory_order_release);
      while (g_flag.load(std::memory_order_acquire) != 2 * i + 2) {
      }
    }
    latency.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
                      kPerBatch / 2);
  }
  pong.join();

  constexpr size_t kSlot = 8192, kSlots = 64, kChunk = size_t{8} << 20, kChunks = 24;
  constexpr size_t kPerChunk = kChunk / kSlot, kTotal = kPerChunk * kChunks;
  std::vector<char> ring(kSlot * kSlots), src(kChunk, 1), dst(kChunk);
  std::vector<double> bandwidth;
  std::thread consumer([&] {
    Pin(1);
    for (size_t i = 0; i < kTotal; ++i) {
      while (g_head.load(std::memory_order_acquire) <= i) {
      }
      std::memcpy(&dst[(i % kPerChunk) * kSlot], &ring[(i % kSlots) * kSlot], kSlot);
      g_tail.store(i + 1, std::memory_order_release);
    }
  });
  for (size_t k = 0; k < kChunks; ++k) {
    const auto start = Clock::now();
    for (size_t i = k * kPerChunk; i < (k + 1) * kPerChunk; ++i) {
      while (i - g_tail.load(std::memory_order_acquire) >= kSlots) {
      }
      std::memcpy(&ring[(i % kSlots) * kSlot], &src[(i % kPerChunk) * kSlot], kSlot);
      g_head.store(i + 1, std::memory_order_release);
    }
    bandwidth.push_back(kChunk / std::chrono::duration<double>(Clock::now() - start).count() / 1e9);
  }
  consumer.join();
  std::printf(
      "{\"probe\":\"core_to_core\",\"c2c_latency_ns_best\":%.0f,\"c2c_latency_ns_median\":%.0f,"
      "\"fifo_GBps_best\":%.2f,\"fifo_GBps_median\":%.2f}\n",
      *std::min_element(latency.begin(), latency.end()), Median(latency),
      *std::max_element(bandwidth.begin(), bandwidth.end()), Median(bandwidth));
  return 0;
}
