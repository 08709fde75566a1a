// Transport: the tagged point-to-point byte mover the CPU algorithms (ring.h) are written
// against, gloo style: algorithms never name UCX. A backend (ucx/) implements it.
//
// Threading: one thread at a time (the owning communicator's executor thread) calls every
// method. Requests belong to the transport; an algorithm posts them, waits for them, and
// the transport forgets them at FinishOperation().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "common/deadline.h"
#include "common/status.h"

namespace retort::collectives {

// Identifies the messages of one operation. The transport adds the generation and the
// sending rank to the wire tag.
struct MessageTag {
  bool point_to_point = false;  // user Send/Recv (seq counts per peer) vs collective
  uint32_t sequence = 0;        // operation number (wraps)
  uint32_t slot = 0;            // message within the operation (step, chunk, or user tag)
};

// What ends a wait besides completion.
struct WaitControl {
  Deadline deadline = Deadline::Never();
  const std::atomic<bool>* abort_requested = nullptr;  // this operation's Work::Abort; may be null
  const std::atomic<bool>* communicator_aborted = nullptr;  // OpExecutor::Abort; may be null
  // Called now and then while waiting (e.g. to notice aborted background transfers); may be
  // null.
  const std::function<void()>* background = nullptr;
  bool Aborted() const {
    return (abort_requested != nullptr && abort_requested->load(std::memory_order_relaxed)) ||
           (communicator_aborted != nullptr &&
            communicator_aborted->load(std::memory_order_relaxed));
  }
};

class Transport {
 public:
  using RequestId = size_t;

  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  virtual StatusOr<RequestId> PostSend(int peer, MessageTag tag, const void* data,
                                       size_t bytes) = 0;
  // The message must be exactly `bytes` long; a different length fails the request.
  virtual StatusOr<RequestId> PostRecv(int peer, MessageTag tag, void* data, size_t bytes) = 0;
  // Optional: asks for `on_landed(bytes)` while the receive's payload lands, called on the
  // thread inside Wait(request) with how many bytes from the start have landed so far. Returns
  // false, and never calls it, where the message lands at once or the transport cannot tell
  // (the caller then treats completion as everything landed). Set before the first Wait on
  // `request`.
  virtual bool SetLandedCallback(RequestId request, std::function<void(size_t)> on_landed) {
    (void)request;
    (void)on_landed;
    return false;
  }
  // Drives progress until `request` completes. Fails with DEADLINE_EXCEEDED, ABORTED, the
  // peer's failure (UNAVAILABLE), or FAILED_PRECONDITION for traffic of another generation.
  virtual Status Wait(RequestId request, const WaitControl& control) = 0;
  // Waits for every request posted since the last FinishOperation, then forgets them. On
  // error (or when `status` is already an error), cancels what is still outstanding so no
  // buffer is touched after it returns, and returns the error.
  virtual Status FinishOperation(Status status, const WaitControl& control) = 0;
};

}  // namespace retort::collectives
