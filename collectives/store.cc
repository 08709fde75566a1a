#include "collectives/store.h"

#include <algorithm>
#include <thread>

#include "common/file_util.h"

namespace retort::collectives {

Status InMemoryStore::Set(const std::string& key, const std::string& value, Deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    values_[key] = value;
  }
  cv_.notify_all();
  return Status::Ok();
}

StatusOr<std::string> InMemoryStore::Get(const std::string& key, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto present = [&] { return values_.count(key) > 0; };
  if (deadline.IsNever()) {
    cv_.wait(lock, present);
  } else if (!cv_.wait_until(lock, deadline.when(), present)) {
    return DeadlineExceededError("store key '" + key + "' not set before the deadline");
  }
  return values_[key];
}

FileStore::FileStore(std::string directory) : directory_(std::move(directory)) {}

std::string FileStore::PathFor(const std::string& key) const {
  // Keys may hold '/', which becomes '%2F' so every key is one file in the directory.
  std::string name;
  for (char c : key) {
    if (c == '/' || c == '%') {
      name += c == '/' ? "%2F" : "%25";
    } else {
      name += c;
    }
  }
  return directory_ + "/" + name;
}

Status FileStore::Set(const std::string& key, const std::string& value, Deadline) {
  RETORT_RETURN_IF_ERROR(MakeDirectories(directory_));
  return WriteFileAtomically(PathFor(key), value).WithContext("file store set '" + key + "'");
}

StatusOr<std::string> FileStore::Get(const std::string& key, Deadline deadline) {
  const std::string path = PathFor(key);
  auto sleep = std::chrono::milliseconds(1);
  for (;;) {
    if (PathExists(path)) return ReadFileToString(path);
    if (deadline.Expired()) {
      return DeadlineExceededError("file store key '" + key + "' (" + path +
                                   ") not set before the deadline");
    }
    auto nap = std::min<std::chrono::nanoseconds>(sleep, deadline.Remaining());
    std::this_thread::sleep_for(nap);
    sleep = std::min(sleep * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace retort::collectives
