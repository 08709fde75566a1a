// Host memory standing in for a device: a DeviceCopier and a DeviceScratch whose "device" is
// host memory labelled kCudaDevice. With them the worker builds its GPU data plane on a CPU
// machine (retort-worker --emulate-device-data-plane), so the compositions GPU workers use
// (staging, the device hierarchy, routing by memory kind) run in the multi-process and
// fault-injection tests without a GPU. Copies are memcpy, done when issued.
// Threading: as the interfaces (one thread issues and waits).
#pragma once

#include <memory>

#include "collectives/device_copier.h"

namespace retort::collectives {

class HostMemoryCopier final : public DeviceCopier {
 public:
  MemoryKind device_kind() const override { return MemoryKind::kCudaDevice; }
  MemoryKind staging_kind() const override { return MemoryKind::kHost; }
  StatusOr<std::shared_ptr<char>> AllocateStaging(size_t bytes) override;
  Status OrderAfter(const ReadyEvent*) override { return Status::Ok(); }
  Status CopyToHost(void* host, const void* device, size_t bytes) override;
  Status CopyToDevice(void* device, const void* host, size_t bytes) override;
  StatusOr<Mark> MarkIssued() override { return ++issued_; }
  Status Wait(Mark, Deadline, const std::function<bool()>&) override { return Status::Ok(); }

 private:
  Mark issued_ = 0;
};

class HostMemoryScratch final : public DeviceScratch {
 public:
  MemoryKind kind() const override { return MemoryKind::kCudaDevice; }
  StatusOr<std::shared_ptr<char>> Allocate(size_t bytes) override;
  Status OrderAfter(const ReadyEvent*) override { return Status::Ok(); }
  Status CopyAsync(void* dst, const void* src, size_t bytes) override;  // done when it returns
  Status Wait(Deadline, const std::function<bool()>&) override { return Status::Ok(); }
};

}  // namespace retort::collectives
