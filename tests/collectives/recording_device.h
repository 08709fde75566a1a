// A recording fake of the device seams (ready_event.h, device_copier.h) for CPU tests of how
// operations are ordered on streams: every call lands in one shared CallLog, in order, so a
// test asserts which event a copy or a sub-operation was ordered after and how often the host
// waited. Host memory plays the device (copies are memcpy, done when issued).
//  - RecordingEvents (DeviceEvents): "record <serial>", "stream_wait <serial>".
//  - RecordingScratch (DeviceScratch): "scratch after <serial>|caller", "scratch copy",
//    "scratch wait".
//  - RecordingComm (Communicator): completes every operation at once (no data moves) and logs
//    "<name> <op> ready=<serial>|none".
// Threading: the log is locked; each fake is used as its interface says.
#pragma once

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/device_copier.h"
#include "collectives/ready_event.h"

namespace retort::collectives::testing {

class CallLog {
 public:
  void Add(std::string call) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(std::move(call));
  }
  std::vector<std::string> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(calls_, {});
  }

 private:
  std::mutex mu_;
  std::vector<std::string> calls_;
};

inline std::string SerialOf(const ReadyEvent* event) {
  return event == nullptr ? "none" : std::to_string(event->serial());
}

class FakeReadyEvent final : public ReadyEvent {
 public:
  explicit FakeReadyEvent(uint64_t serial) : serial_(serial) {}
  void* native() const override { return nullptr; }
  uint64_t serial() const override { return serial_; }

 private:
  const uint64_t serial_;
};

class RecordingEvents final : public DeviceEvents {
 public:
  explicit RecordingEvents(CallLog* log) : log_(log) {}
  StatusOr<ReadyEventPtr> RecordReady() override {
    const uint64_t serial = ++serial_;
    log_->Add("record " + std::to_string(serial));
    return ReadyEventPtr(std::make_shared<FakeReadyEvent>(serial));
  }
  Status StreamWait(const ReadyEvent& event) override {
    log_->Add("stream_wait " + std::to_string(event.serial()));
    return Status::Ok();
  }
  std::string name() const override { return "recording"; }

 private:
  CallLog* log_;
  uint64_t serial_ = 0;
};

class RecordingScratch final : public DeviceScratch {
 public:
  explicit RecordingScratch(CallLog* log) : log_(log) {}
  MemoryKind kind() const override { return MemoryKind::kCudaDevice; }
  StatusOr<std::shared_ptr<char>> Allocate(size_t bytes) override {
    return std::shared_ptr<char>(new char[bytes], std::default_delete<char[]>());
  }
  Status OrderAfter(const ReadyEvent* ready) override {
    log_->Add("scratch after " + (ready == nullptr ? std::string("caller") : SerialOf(ready)));
    return Status::Ok();
  }
  Status CopyAsync(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    log_->Add("scratch copy");
    return Status::Ok();
  }
  Status Wait(Deadline, const std::function<bool()>&) override {
    log_->Add("scratch wait");
    return Status::Ok();
  }

 private:
  CallLog* log_;
};

class RecordingComm final : public Communicator {
 public:
  RecordingComm(std::string name, int rank, int size, CallLog* log)
      : name_(std::move(name)), rank_(rank), size_(size), log_(log) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  uint64_t generation() const override { return 1; }
  std::chrono::milliseconds default_timeout() const override {
    return std::chrono::milliseconds(5000);
  }
  std::string name() const override { return name_; }
  bool AcceptsMemory(MemoryKind) const override { return true; }
  void Abort(const std::string&) override {}

 protected:
  WorkPtr Done(const char* op, const CollectiveOptions& o) {
    log_->Add(name_ + " " + op + " ready=" + SerialOf(o.ready.get()));
    return CompletedWork(op, Status::Ok());
  }
  WorkPtr DoReduceScatterV(ConstBuffer, MutableBuffer, const std::vector<size_t>&, ReduceOp,
                           const CollectiveOptions& o) override {
    return Done("reduce_scatter", o);
  }
  WorkPtr DoAllGatherV(ConstBuffer, MutableBuffer, const std::vector<size_t>&,
                       const CollectiveOptions& o) override {
    return Done("all_gather", o);
  }
  WorkPtr DoAllReduce(MutableBuffer, ReduceOp, const CollectiveOptions& o) override {
    return Done("all_reduce", o);
  }
  WorkPtr DoBroadcast(MutableBuffer, int, const CollectiveOptions& o) override {
    return Done("broadcast", o);
  }
  WorkPtr DoBarrier(const CollectiveOptions& o) override { return Done("barrier", o); }
  WorkPtr DoSend(ConstBuffer, int, uint32_t, const CollectiveOptions& o) override {
    return Done("send", o);
  }
  WorkPtr DoRecv(MutableBuffer, int, uint32_t, const CollectiveOptions& o) override {
    return Done("recv", o);
  }
  WorkPtr DoAllToAllV(ConstBuffer, const std::vector<size_t>&, MutableBuffer,
                      const std::vector<size_t>&, const CollectiveOptions& o) override {
    return Done("all_to_all_v", o);
  }

 private:
  const std::string name_;
  const int rank_, size_;
  CallLog* log_;
};

}  // namespace retort::collectives::testing
