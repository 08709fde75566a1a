// ReadyEvent and DeviceEvents: how device work is ordered across streams without the host
// waiting for it.
//
// A ReadyEvent is a point in one device stream's work (CUDA: a cudaEvent_t recorded on a
// stream). Two uses:
//  - "input ready": recorded by the producer of an operation's buffers on the producing stream
//    at the moment it issues the operation (the backward hook that finished a gradient bucket,
//    the optimizer before the parameter all-gather), and carried with the operation
//    (CollectiveOptions::ready). Whoever runs the operation later, on whatever thread
//    (a composition's executor), orders its device work after that event, never after the
//    producing stream as it is when the operation happens to run: the host runs ahead of the
//    device, and an event recorded later also waits for work queued after the operation.
//  - "done": recorded by a backend that completes an operation on a device stream (NCCL) after
//    its last kernel and attached to the Work (Work::done_event()), so the consumer can make its
//    own stream wait for the result device-side (Work::StreamWait) instead of blocking the host.
//
// Ownership: events are shared (ReadyEventPtr); the event lives until the last holder lets go
// (the operation, its Work, a sub-operation). A ReadyEvent is immutable once recorded: it is
// never re-recorded while shared. Thread-safe to share and to wait on from any thread.
// Implementations: nccl/cuda_events.h (CUDA), tests/collectives/recording_device.h (a CPU
// fake that records the calls in order).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace retort::collectives {

class ReadyEvent {
 public:
  virtual ~ReadyEvent() = default;
  // The device's own handle (CUDA: cudaEvent_t); for the backend of the same device only.
  virtual void* native() const = 0;
  // Distinguishes events in logs and tests (unique per DeviceEvents instance, increasing).
  virtual uint64_t serial() const = 0;
};
using ReadyEventPtr = std::shared_ptr<const ReadyEvent>;

// The stream of one producer/consumer of device buffers (the trainer's stream; CUDA: a
// cudaStream_t fixed at creation). Used by the thread that issues operations (a backward hook,
// the training loop) one at a time.
class DeviceEvents {
 public:
  virtual ~DeviceEvents() = default;
  // Records an event after the work enqueued on this stream so far.
  virtual StatusOr<ReadyEventPtr> RecordReady() = 0;
  // Makes the work enqueued on this stream from now on wait, on the device, for `event` (CUDA:
  // cudaStreamWaitEvent). Returns at once; the host never waits.
  virtual Status StreamWait(const ReadyEvent& event) = 0;
  // For logs: "cuda:0 legacy stream", "fake".
  virtual std::string name() const = 0;
};

}  // namespace retort::collectives
