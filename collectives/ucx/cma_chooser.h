// CmaChooser: picks, per operation, how this rank sends its large messages to peers on the
// same host: the single-copy rendezvous (the receiver reads this process's memory with
// process_vm_readv, cma.h) or UCX's shared-memory FIFO (two copies, no handshake). Which is
// faster is not a property of the code: it changes with the host. On the 2-vCPU test machine
// the FIFO's hand-over rate moves between ~2-3.5 and ~11-13 GB/s with the vCPUs' placement,
// within minutes, while process_vm_readv pins every 4 KiB page it reads (7-15 GB/s there,
// near memcpy speed on huge pages); measured either way by 1.3-2.3x (bench/collectives/
// RESULTS.md). So the sender measures: it times whole operations (BeginOperation to
// FinishOperation), keeps per protocol and operation-size class the best bytes-per-second
// of its last kWindow operations (an operation's time also holds waits for late peers and
// descheduled vCPUs, which only ever add time, so the best recent one is the protocol's
// cost), uses the faster and tries the other every kExploreEvery operations, so a change of
// the host's state is noticed. The receiver accepts either (the protocol travels in the wire
// tag), so the ranks never have to agree.
//
// Threading: one per transport, used on its executor thread only.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace retort::collectives::ucx {

enum class CmaPolicy {
  kAdaptive,  // measure and choose (default)
  kAlways,    // every message at or above the threshold through CMA
  kNever,     // never through CMA (the receiver still accepts CMA from peers that send it)
};

// "adaptive" | "always" | "never" (the flags' spelling: collectives_bench and retort-worker
// --cma-policy); INVALID_ARGUMENT naming the choices otherwise.
StatusOr<CmaPolicy> ParseCmaPolicy(const std::string& text);

// What an operation is, for the chooser: operations of one kind and size class are measured
// together (an all-reduce moves more per byte of payload than an all-gather of the same size,
// so mixing their rates would favour whichever protocol ran the cheaper kind).
enum class OperationKind : uint8_t {
  kReduceScatter,
  kAllGather,
  kAllReduce,
  kBroadcast,
  kAllToAll,
  kBarrier,
};

// "reduce_scatter", "all_gather", ... (for logs).
const char* OperationKindName(OperationKind kind);

class CmaChooser {
 public:
  static constexpr int kExploreEvery = 32;  // operations per kind and size class between tries
  static constexpr int kWarmup = 2;         // operations per protocol before choosing
  static constexpr int kWindow = 4;         // recent operations per protocol in its rate

  explicit CmaChooser(CmaPolicy policy = CmaPolicy::kAdaptive) : policy_(policy) {}

  // Whether the same-host sends of the operation about to start (`kind`, `operation_bytes` of
  // payload) should use CMA.
  bool UseCmaFor(OperationKind kind, size_t operation_bytes);
  // For a message outside any measured operation (a detached send: replicas, recovery state):
  // CMA unless the policy is kNever. Such sends are not timed, so they cannot be chosen by
  // measurement.
  bool UseCmaUnmeasured() const { return policy_ != CmaPolicy::kNever; }
  // Records a finished operation that sent `same_host_bytes` through `cma` (or the FIFO) in
  // `elapsed`.
  void Record(OperationKind kind, size_t operation_bytes, bool cma, size_t same_host_bytes,
              std::chrono::nanoseconds elapsed);

  // The protocol measured faster for operations like this one (true: CMA); empty during the
  // warm-up or under a fixed policy.
  std::optional<bool> PrefersCma(OperationKind kind, size_t operation_bytes) const;

  // The measured rate (bytes/s, best of the recent window) for operations like this one; 0
  // before any.
  double RateFor(OperationKind kind, size_t operation_bytes, bool cma) const;

 private:
  struct Protocol {
    std::array<double, kWindow> recent{};  // bytes per second of the last kWindow operations
    int64_t samples = 0;
    double Rate() const;  // the best of `recent`; 0 before any
  };
  struct SizeClass {
    Protocol fifo;
    Protocol cma;
    uint64_t decisions = 0;
  };
  static constexpr int kKinds = static_cast<int>(OperationKind::kBarrier) + 1;
  static constexpr int kClasses = 40;  // log2 of the operation's payload
  static int ClassOf(size_t bytes);
  SizeClass& ClassFor(OperationKind kind, size_t operation_bytes);
  const SizeClass& ClassFor(OperationKind kind, size_t operation_bytes) const;

  CmaPolicy policy_;
  std::array<std::array<SizeClass, kClasses>, kKinds> classes_{};
};

}  // namespace retort::collectives::ucx
