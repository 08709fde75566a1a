#include "collectives/host_memory_device.h"

#include <algorithm>
#include <cstring>

namespace retort::collectives {
namespace {

std::shared_ptr<char> HostBytes(size_t bytes) {
  return std::shared_ptr<char>(new char[std::max<size_t>(bytes, 1)], std::default_delete<char[]>());
}

}  // namespace

StatusOr<std::shared_ptr<char>> HostMemoryCopier::AllocateStaging(size_t bytes) {
  return HostBytes(bytes);
}

Status HostMemoryCopier::CopyToHost(void* host, const void* device, size_t bytes) {
  std::memcpy(host, device, bytes);
  return Status::Ok();
}

Status HostMemoryCopier::CopyToDevice(void* device, const void* host, size_t bytes) {
  std::memcpy(device, host, bytes);
  return Status::Ok();
}

StatusOr<std::shared_ptr<char>> HostMemoryScratch::Allocate(size_t bytes) {
  return HostBytes(bytes);
}

Status HostMemoryScratch::CopyAsync(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  return Status::Ok();
}

}  // namespace retort::collectives
