// Device memory played by host memory, for CPU tests of the device data plane: ThreadCopier
// (a DeviceCopier that copies on a thread of its own, with injectable delays, failures and
// stalls) and AsDeviceMemory (labels every buffer of the shared checks CUDA device memory
// before passing it on). collectives/host_memory_device.h has the synchronous ones.
#pragma once

#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/device_copier.h"

namespace retort::collectives::testing {

// Copies host memory in issue order on its own thread. Optionally each copy sleeps
// `delay`, copy number `fail_at` (1-based) fails, or copies stall from `stall_at` on.
class ThreadCopier final : public DeviceCopier {
 public:
  struct Options {
    std::chrono::microseconds delay{0};
    uint64_t fail_at = 0;
    uint64_t stall_at = 0;
  };
  explicit ThreadCopier(Options options) : options_(options), thread_([this] { Run(); }) {}
  ~ThreadCopier() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  MemoryKind device_kind() const override { return MemoryKind::kCudaDevice; }
  MemoryKind staging_kind() const override { return MemoryKind::kHost; }
  StatusOr<std::shared_ptr<char>> AllocateStaging(size_t bytes) override {
    return std::shared_ptr<char>(new char[bytes], std::default_delete<char[]>());
  }
  // Records "A<serial>" (after a ready event) or "C" (after the caller's stream) in the log.
  Status OrderAfter(const ReadyEvent* ready) override {
    std::lock_guard<std::mutex> lock(mu_);
    log_ += ready != nullptr ? "A" + std::to_string(ready->serial()) : std::string("C");
    return Status::Ok();
  }
  Status CopyToHost(void* host, const void* device, size_t bytes) override {
    return Enqueue('H', host, device, bytes);
  }
  Status CopyToDevice(void* device, const void* host, size_t bytes) override {
    return Enqueue('D', device, host, bytes);
  }
  StatusOr<Mark> MarkIssued() override {
    std::lock_guard<std::mutex> lock(mu_);
    return issued_;
  }
  Status Wait(Mark mark, Deadline deadline, const std::function<bool()>& cancelled) override {
    for (;;) {
      {
        // As a device stream's synchronisation: once the copies up to `mark` are done, with the
        // first failure among them. (Returning a failure before the later copies ran let an
        // operation end while a copy still wrote the caller's buffer: ASan, use after free.)
        std::lock_guard<std::mutex> lock(mu_);
        if (done_ >= mark) return failure_;
      }
      if (cancelled && cancelled()) return AbortedError("test copier: aborted");
      if (deadline.Expired()) return DeadlineExceededError("test copier: copies did not finish");
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  // 'H' (to host), 'D' (to device) and the OrderAfter calls ("A<serial>", "C"), in issue order.
  std::string issue_log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  void Unstall() {
    std::lock_guard<std::mutex> lock(mu_);
    options_.stall_at = 0;
    cv_.notify_all();
  }

 private:
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  Status Enqueue(char direction, void* dst, const void* src, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({dst, src, bytes});
    ++issued_;
    log_ += direction;
    cv_.notify_all();
    return Status::Ok();
  }
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] {
        return stopping_ ||
               (!queue_.empty() && (options_.stall_at == 0 || done_ + 1 < options_.stall_at));
      });
      if (stopping_) return;
      Copy c = queue_.front();
      queue_.pop_front();
      const uint64_t number = done_ + 1;
      lock.unlock();
      if (options_.delay.count() > 0) std::this_thread::sleep_for(options_.delay);
      if (number != options_.fail_at) std::memcpy(c.dst, c.src, c.bytes);
      lock.lock();
      if (number == options_.fail_at && failure_.ok())
        failure_ = InternalError("test copier: copy " + std::to_string(number) + " failed");
      done_ = number;
    }
  }
  Options options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Copy> queue_;
  uint64_t issued_ = 0, done_ = 0;
  Status failure_;
  std::string log_;
  bool stopping_ = false;
  std::thread thread_;
};

// Forwards every operation to `inner` with each buffer labelled CUDA device memory, so the
// shared checks (which allocate host buffers) exercise the staged path.
class AsDeviceMemory final : public Communicator {
 public:
  explicit AsDeviceMemory(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  uint64_t generation() const override { return inner_->generation(); }
  std::chrono::milliseconds default_timeout() const override { return inner_->default_timeout(); }
  std::string name() const override { return inner_->name(); }
  void Abort(const std::string& reason) override { inner_->Abort(reason); }
  Communicator& inner() { return *inner_; }

 protected:
  static ConstBuffer Dev(ConstBuffer b) {
    b.memory = MemoryKind::kCudaDevice;
    return b;
  }
  static MutableBuffer Dev(MutableBuffer b) {
    b.memory = MemoryKind::kCudaDevice;
    return b;
  }
  WorkPtr DoReduceScatterV(ConstBuffer in, MutableBuffer out, const std::vector<size_t>& counts,
                           ReduceOp op, const CollectiveOptions& o) override {
    return inner_->ReduceScatterV(Dev(in), Dev(out), counts, op, o);
  }
  WorkPtr DoAllGatherV(ConstBuffer in, MutableBuffer out, const std::vector<size_t>& counts,
                       const CollectiveOptions& o) override {
    return inner_->AllGatherV(Dev(in), Dev(out), counts, o);
  }
  WorkPtr DoAllReduce(MutableBuffer data, ReduceOp op, const CollectiveOptions& o) override {
    return inner_->AllReduce(Dev(data), op, o);
  }
  WorkPtr DoBroadcast(MutableBuffer data, int root, const CollectiveOptions& o) override {
    return inner_->Broadcast(Dev(data), root, o);
  }
  WorkPtr DoBarrier(const CollectiveOptions& o) override { return inner_->Barrier(o); }
  WorkPtr DoSend(ConstBuffer data, int peer, uint32_t tag, const CollectiveOptions& o) override {
    return inner_->Send(Dev(data), peer, tag, o);
  }
  WorkPtr DoRecv(MutableBuffer data, int peer, uint32_t tag, const CollectiveOptions& o) override {
    return inner_->Recv(Dev(data), peer, tag, o);
  }
  WorkPtr DoAllToAllV(ConstBuffer in, const std::vector<size_t>& send_counts, MutableBuffer out,
                      const std::vector<size_t>& recv_counts, const CollectiveOptions& o) override {
    return inner_->AllToAllV(Dev(in), send_counts, Dev(out), recv_counts, o);
  }

 private:
  std::unique_ptr<Communicator> inner_;
};

}  // namespace retort::collectives::testing
