// StepWaits: how a training step waits for its collectives, and how often the host waits.
//
// A step has one host read (the global loss and gradient norm, at its end). Everything before
// it should only order device work: Order() makes the trainer's stream wait for a collective
// (CommHandle::StreamWait: device-side where the collective completes on a device stream,
// NCCL) and keeps the handle; Confirm(), after the host read, collects the kept handles'
// statuses (the device finished them before the read returned). Where a collective completes
// on the host (UCX, staged or hierarchical compositions, host staging) Order() is a host wait.
// host_waits() counts the blocking waits before the host read, stream_waits() the device-side
// ones; the step reports both (StepResult), and tests assert them.
// Threading: the trainer thread only.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "trainer/shard_comm.h"

namespace retort::trainer {

class StepWaits {
 public:
  // Forgets the previous step's handles and counts.
  void Reset();
  // Orders the trainer's later device work after `handle` and keeps it for Confirm(). `what`
  // names the collective in errors.
  Status Order(std::unique_ptr<CommHandle> handle, Deadline deadline, std::string what);
  // A host wait the step needs (it reads the result on the host next), counted.
  Status HostWait(CommHandle& handle, Deadline deadline, const std::string& what);
  // After the host read: the first error among the handles Order() kept (each is waited for
  // once; they finished on the device). Forgets them.
  Status Confirm(Deadline deadline);

  int host_waits() const { return host_waits_; }
  int stream_waits() const { return stream_waits_; }

 private:
  std::vector<std::pair<std::unique_ptr<CommHandle>, std::string>> kept_;
  int host_waits_ = 0;
  int stream_waits_ = 0;
};

}  // namespace retort::trainer
