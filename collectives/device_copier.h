// DeviceCopier: the copies between device memory and host staging memory that the staging
// adapter (staged.h) schedules; DeviceScratch (below): device memory for compositions. An
// interface, so that the staging schedule is device-agnostic and covered by CPU tests
// (tests/collectives/staged_test.cc copies between host buffers on a thread of its own);
// cuda/cuda_copier.h is the CUDA implementation (one copy stream).
//
// Contract: copies are asynchronous and finish in the order they were issued (one in-order
// queue, like one CUDA stream). Mark() names the point after every copy issued so far;
// Wait(mark) returns once those copies finished. Issuing and waiting happen on one thread
// (the adapter's executor); the implementation may run copies on others.
// Ordering with the caller: OrderAfter(ready) makes the copies issued from then on wait
// (device-side) for the caller's ready event (ready_event.h), recorded when the caller issued
// the operation; without one, for the caller's stream as it is at that moment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "collectives/ready_event.h"
#include "collectives/types.h"
#include "common/deadline.h"
#include "common/status.h"

namespace retort::collectives {

class DeviceCopier {
 public:
  using Mark = uint64_t;
  virtual ~DeviceCopier() = default;

  // The device memory it copies from and to, and the host memory it stages through.
  virtual MemoryKind device_kind() const = 0;
  virtual MemoryKind staging_kind() const = 0;
  // `bytes` of staging memory (pinned for CUDA), released when the last owner drops it.
  virtual StatusOr<std::shared_ptr<char>> AllocateStaging(size_t bytes) = 0;
  // Orders the copies issued from now on after `ready` (the operation's
  // CollectiveOptions::ready; not owned, used before this returns), or, when it is null, after
  // the device work the caller enqueued so far (CUDA: an event recorded on the caller's stream
  // now). Once per operation, before its first copy. Never waits on the host.
  virtual Status OrderAfter(const ReadyEvent* ready) = 0;
  // Enqueue a copy; `host` is staging memory from AllocateStaging.
  virtual Status CopyToHost(void* host, const void* device, size_t bytes) = 0;
  virtual Status CopyToDevice(void* device, const void* host, size_t bytes) = 0;
  virtual StatusOr<Mark> MarkIssued() = 0;
  // OK once every copy issued before `mark` finished. Polls, so that it ends with
  // DEADLINE_EXCEEDED at `deadline` or ABORTED once `cancelled` (may be empty) returns true; a
  // failed copy is an error naming it.
  virtual Status Wait(Mark mark, Deadline deadline, const std::function<bool()>& cancelled) = 0;
};

// Device memory for compositions that keep intermediate results on the device (the
// hierarchical communicator's buffer between its levels and its packing), and copies within
// it. Used from one thread at a time (the composition's executor).
// Copies are stream-ordered: a batch of copies (the segments of one packing) is
// OrderAfter(ready), CopyAsync() x n, then one Wait() (CUDA: one stream of the scratch's own,
// never the legacy default stream, whose synchronisation would also wait for the caller's later
// kernels; the wait polls one event, so deadlines and aborts end it).
class DeviceScratch {
 public:
  virtual ~DeviceScratch() = default;
  virtual MemoryKind kind() const = 0;
  // `bytes` of device memory, released when the last owner drops it.
  virtual StatusOr<std::shared_ptr<char>> Allocate(size_t bytes) = 0;
  // Orders the copies issued from now on after `ready` (not owned), or, when null, after the
  // device work the caller enqueued so far. Never waits on the host.
  virtual Status OrderAfter(const ReadyEvent* ready) = 0;
  // Enqueues a copy of `bytes` within device memory, after the copies issued before.
  virtual Status CopyAsync(void* dst, const void* src, size_t bytes) = 0;
  // OK once every copy issued so far finished; DEADLINE_EXCEEDED at `deadline`, ABORTED once
  // `cancelled` (may be empty) returns true, an error naming a failed copy.
  virtual Status Wait(Deadline deadline, const std::function<bool()>& cancelled) = 0;
};

}  // namespace retort::collectives
