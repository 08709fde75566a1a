#include "collectives/bootstrap_store.h"

#include "common/backoff_policies.h"
#include "common/file_util.h"
#include "common/retry.h"

namespace retort::collectives {

Status InMemoryStore::Set(const std::string& key, const std::string& value, Deadline) {
  {
    MutexLock lock(mu_);
    values_[key] = value;
  }
  cv_.NotifyAll();
  return Status::Ok();
}

StatusOr<std::string> InMemoryStore::Get(const std::string& key, Deadline deadline) {
  MutexLock lock(mu_);
  auto present = [&]() RETORT_REQUIRES(mu_) { return values_.count(key) > 0; };
  if (deadline.IsNever()) {
    cv_.Wait(mu_, present);
  } else if (!cv_.WaitUntil(mu_, deadline.when(), present)) {
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
  Backoff backoff = backoff_policies::kFileStorePoll.Make();
  StatusOr<std::string> value =
      RetryUntil(deadline, backoff, IsRetryable, [&]() -> StatusOr<std::string> {
        if (!PathExists(path)) return UnavailableError("not set yet");
        return ReadFileToString(path);
      });
  if (!value.ok() && IsRetryable(value.status().code())) {
    return DeadlineExceededError("file store key '" + key + "' (" + path +
                                 ") not set before the deadline");
  }
  return value;
}

}  // namespace retort::collectives
