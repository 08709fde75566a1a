// Communicator: the data-plane interface every backend (UCX, NCCL) and composition
// (hierarchical) implements. Algorithms above it never name a transport.
//
// Semantics shared by every implementation:
//  - Asynchronous: every call returns a Work at once; operations on one communicator execute
//    in call order, and every rank must issue the same collectives in the same order.
//  - Generation: a communicator is created for one generation (uint64, fixed for its life) and
//    every message it sends carries it. Traffic from another generation is refused with
//    FAILED_PRECONDITION, never mixed into a result.
//  - Deadlines: each operation fails with DEADLINE_EXCEEDED at the latest `timeout` after it
//    was issued (CollectiveOptions::timeout, defaulting to default_timeout()). A dead peer is
//    reported as UNAVAILABLE or DEADLINE_EXCEEDED within that deadline.
//  - Failure: after any failed or aborted operation the communicator is broken (peers are
//    out of step): later operations complete at once with ABORTED naming the first error.
//    Build a new communicator (normally for the next generation).
//  - Buffers: raw pointer + count + dtype + memory kind, owned by the caller and left untouched
//    by the caller until the Work completes. A buffer in memory the backend does not take
//    (AcceptsMemory) is refused with INVALID_ARGUMENT naming the kind and the backend. Counts are
//    in elements. Input and output must not overlap, except where an operation documents an
//    in-place form.
//  - Arguments are checked when an operation is issued: a bad one completes its Work at once
//    with INVALID_ARGUMENT naming it, and leaves the communicator usable.
//  - Reductions: fp32, bf16, fp16; 16-bit types reduce with fp32 arithmetic per step. kAverage
//    divides by size() once, in fp32, at the end.
// Thread-safety: the issuing methods may be called from one thread at a time (the training
// loop); Work objects may be waited on from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "collectives/ready_event.h"
#include "collectives/types.h"
#include "collectives/work.h"

namespace retort::collectives {

struct CollectiveOptions {
  // How long the operation may take from the moment it is issued; unset: the communicator's
  // default_timeout().
  std::optional<std::chrono::milliseconds> timeout;
  // Device buffers: the point on the producer's stream after which the operation's buffers are
  // ready (ready_event.h), recorded when the producer issued the operation and owned jointly
  // by everyone who holds the options. A device backend orders the operation after it instead
  // of after its caller's stream as that stream is when the operation runs; compositions pass
  // it to every sub-operation and copy that touches the caller's buffers. Null: the backend
  // orders after its caller's stream at the moment it enqueues (the behaviour without events).
  ReadyEventPtr ready;
};

// The eight operations a backend implements, declared once for the base class
// (`RETORT_COMMUNICATOR_OPERATIONS(virtual, = 0)`) and every backend
// (`RETORT_COMMUNICATOR_OPERATIONS(, override)` in its protected section): the list and the
// signatures cannot drift apart. Each backend defines the eight in its .cc.
#define RETORT_COMMUNICATOR_OPERATIONS(PREFIX, SUFFIX)                                             \
  PREFIX WorkPtr DoReduceScatterV(ConstBuffer input, MutableBuffer output,                         \
                                  const std::vector<size_t>& counts, ReduceOp op,                  \
                                  const CollectiveOptions& options) SUFFIX;                        \
  PREFIX WorkPtr DoAllGatherV(ConstBuffer input, MutableBuffer output,                             \
                              const std::vector<size_t>& counts, const CollectiveOptions& options) \
      SUFFIX;                                                                                      \
  PREFIX WorkPtr DoAllReduce(MutableBuffer data, ReduceOp op, const CollectiveOptions& options)    \
      SUFFIX;                                                                                      \
  PREFIX WorkPtr DoBroadcast(MutableBuffer data, int root, const CollectiveOptions& options)       \
      SUFFIX;                                                                                      \
  PREFIX WorkPtr DoBarrier(const CollectiveOptions& options) SUFFIX;                               \
  PREFIX WorkPtr DoSend(ConstBuffer data, int peer, uint32_t tag,                                  \
                        const CollectiveOptions& options) SUFFIX;                                  \
  PREFIX WorkPtr DoRecv(MutableBuffer data, int peer, uint32_t tag,                                \
                        const CollectiveOptions& options) SUFFIX;                                  \
  PREFIX WorkPtr DoAllToAllV(ConstBuffer input, const std::vector<size_t>& send_counts,            \
                             MutableBuffer output, const std::vector<size_t>& recv_counts,         \
                             const CollectiveOptions& options) SUFFIX

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual uint64_t generation() const = 0;
  virtual std::chrono::milliseconds default_timeout() const = 0;
  // "ucx", "nccl", "hierarchical(...)": for logs.
  virtual std::string name() const = 0;
  // Whether operations take buffers in `kind` of memory. Default: host memory (pageable or
  // pinned) only; device backends and staging adapters say otherwise.
  virtual bool AcceptsMemory(MemoryKind kind) const { return IsHostMemory(kind); }

  // input: sum(counts) elements, segment r = [offset(r), offset(r) + counts[r]); output:
  // counts[rank()] elements receive the reduction of segment rank() over all ranks. counts has
  // size() entries, zeros allowed. In place: output.data may equal the start of this rank's
  // segment of input.
  WorkPtr ReduceScatterV(ConstBuffer input, MutableBuffer output, const std::vector<size_t>& counts,
                         ReduceOp op, const CollectiveOptions& options = {});
  // input: counts[rank()] elements; output: sum(counts) elements, segment r from rank r. In
  // place: input.data may equal the start of this rank's segment of output.
  WorkPtr AllGatherV(ConstBuffer input, MutableBuffer output, const std::vector<size_t>& counts,
                     const CollectiveOptions& options = {});
  // In place on `data` (same count on every rank).
  WorkPtr AllReduce(MutableBuffer data, ReduceOp op, const CollectiveOptions& options = {});
  // `data` of `root` is copied into `data` of every other rank (same count everywhere).
  WorkPtr Broadcast(MutableBuffer data, int root, const CollectiveOptions& options = {});
  WorkPtr Barrier(const CollectiveOptions& options = {});
  // Point to point. A Send matches the Recv on `peer` with the same tag, in issue order per
  // (pair, tag). Counts and dtypes must agree (a longer message is an error, not truncated).
  WorkPtr Send(ConstBuffer data, int peer, uint32_t tag, const CollectiveOptions& options = {});
  WorkPtr Recv(MutableBuffer data, int peer, uint32_t tag, const CollectiveOptions& options = {});
  // Every rank sends send_counts[p] elements (packed in rank order in `input`) to rank p and
  // receives recv_counts[p] elements from p (packed in rank order in `output`). Both vectors
  // have size() entries; send_counts[p] here must equal recv_counts[rank()] on p.
  WorkPtr AllToAllV(ConstBuffer input, const std::vector<size_t>& send_counts, MutableBuffer output,
                    const std::vector<size_t>& recv_counts, const CollectiveOptions& options = {});

  // Equal-count forms: input has size() * output.count elements (reduce-scatter) and output
  // has size() * input.count elements (all-gather).
  WorkPtr ReduceScatter(ConstBuffer input, MutableBuffer output, ReduceOp op,
                        const CollectiveOptions& options = {});
  WorkPtr AllGather(ConstBuffer input, MutableBuffer output, const CollectiveOptions& options = {});

  // Breaks the communicator: running and queued operations complete with ABORTED(reason).
  virtual void Abort(const std::string& reason) = 0;
  // Ranks the data plane has seen fail (connection reset, peer gone), in rank order; empty
  // when none is known (a timeout alone names nobody). Thread-safe: callers use it after an
  // operation failed, to tell the coordinator which peer died.
  virtual std::vector<int> FailedPeers() const { return {}; }

 protected:
  // OK when this communicator takes `kind`; else INVALID_ARGUMENT naming `what`, the kind,
  // and the kinds it takes.
  Status CheckMemory(MemoryKind kind, const char* what) const;
  // A send's or receive's (`op`) peer, buffer and memory kind, checked.
  Status CheckPointToPoint(const char* op, int peer, const void* data, size_t count,
                           MemoryKind memory) const;
  // What a backend implements. The public methods above check their arguments (validate.h)
  // once, here, and complete the Work with INVALID_ARGUMENT at once when a check fails; a
  // Do* method is called only with arguments that passed, and checks only what is particular
  // to its backend (e.g. the UCX tag range).
  RETORT_COMMUNICATOR_OPERATIONS(virtual, = 0);
};

// For compositions (hierarchical, staged): issues a sub-operation with the time `parent` has
// left and the parent's ready event (`ready`, may be null), waits for it, and aborts it once
// `parent` is aborted or `broken` (the composition's executor broke) is set. The
// sub-operation's final status.
Status AwaitSubOperation(Work& parent, const std::atomic<bool>& broken,
                         const std::function<WorkPtr(const CollectiveOptions&)>& issue,
                         const ReadyEventPtr& ready = nullptr);

class OpExecutor;

// For compositions: submits `step` to `executor` with options.timeout (else `default_timeout`),
// and while it runs (on the executor's thread) keeps options.ready in *running_ready, the event
// the step's sub-operations and copies order after. *running_ready belongs to that thread.
WorkPtr SubmitComposedStep(OpExecutor& executor, std::string description,
                           const CollectiveOptions& options,
                           std::chrono::milliseconds default_timeout, ReadyEventPtr* running_ready,
                           std::function<Status(Work&)> step);

}  // namespace retort::collectives
