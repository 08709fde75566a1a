// ShardComm: the small collectives adapter the trainer talks to. The worker implements it over
// the real Communicator (UCX/NCCL); tests use testing/thread_shard_comm.h. Std types only, so
// that any backend can implement it without pulling torch into its headers.
//
// Contract (all ranks):
// - Every rank issues the same collectives in the same order with the same counts.
// - Buffers are host float32, or device float32 for an implementation whose
//   TakesDeviceMemory() is true. Device buffers are ready at the moment the operation is
//   issued: the implementation orders the operation after the work enqueued on the trainer's
//   stream so far (CUDA: an event recorded at issue, on the issuing thread, e.g. the backward
//   hook, and carried with the operation), never after that stream as it is when the
//   operation happens to run. Buffers must stay alive until the handle's Wait() returned, and
//   untouched until then by the host; device work may use them once it was ordered after the
//   operation (CommHandle::StreamWait).
//   The trainer stages device buffers through host memory for an implementation that takes
//   host memory only.
// - ReduceScatterV(in, out, counts): `in` holds sum(counts) elements laid out as segment 0,
//   segment 1, ...; rank r receives the element-wise sum over ranks of segment r in `out`
//   (counts[r] elements). counts[r] may be 0 (then `out` may be null). in and out never alias.
// - AllGatherV(in, out, counts): the mirror image: rank r contributes counts[r] elements from
//   `in`, every rank receives all segments, concatenated, in `out`. May be called in place,
//   i.e. with in == out + sum(counts[0..rank)); implementations must support that.
// - AllReduce(data, count): in-place element-wise sum.
// Threading: one trainer thread issues operations and waits on handles (StreamWait at most
// once, then Wait once), from that thread. Implementations may progress in background threads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace retort::trainer {

// An outstanding collective. Wait() blocks until completion or until the deadline passes;
// a dead or slow peer is DEADLINE_EXCEEDED/UNAVAILABLE, never a hang.
class CommHandle {
 public:
  virtual ~CommHandle() = default;
  virtual Status Wait(Deadline deadline) = 0;
  // Orders the device work the trainer enqueues from now on (its current stream) after this
  // operation. Where the operation completes on a device stream, the wait is device-side:
  // the host does not wait, `*host_waited` is false, and the operation's status comes from
  // Wait() later (after the step's host read, by when the device finished it). Otherwise the
  // host waits: Wait(deadline), `*host_waited` true. Default: the host wait.
  virtual Status StreamWait(Deadline deadline, bool* host_waited) {
    *host_waited = true;
    return Wait(deadline);
  }
};

class ShardComm {
 public:
  virtual ~ShardComm() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // True when the buffers may be CUDA device memory. Default: host memory only.
  virtual bool TakesDeviceMemory() const { return false; }

  virtual std::unique_ptr<CommHandle> ReduceScatterV(const float* in, float* out,
                                                     std::vector<int64_t> counts) = 0;
  virtual std::unique_ptr<CommHandle> AllGatherV(const float* in, float* out,
                                                 std::vector<int64_t> counts) = 0;
  virtual std::unique_ptr<CommHandle> AllReduce(float* data, int64_t count) = 0;
};

// A handle that is already complete with `status` (for synchronous implementations).
class CompletedHandle final : public CommHandle {
 public:
  explicit CompletedHandle(Status status = Status::Ok()) : status_(std::move(status)) {}
  Status Wait(Deadline) override { return status_; }

 private:
  Status status_;
};

}  // namespace retort::trainer
