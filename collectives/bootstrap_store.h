// BootstrapStore: the key-value exchange communicators bootstrap through (UCX worker addresses,
// NCCL unique ids). Keys are written once per generation by their owner and read by peers.
//
// Implementations: InMemoryStore (thread-per-rank tests), FileStore (processes on one host:
// tests, benchmarks), PrefixStore (namespacing), and in real runs the coordinator's gRPC
// key-value exchange behind an adapter in worker/. All are thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/deadline.h"
#include "common/mutex.h"
#include "common/status.h"

namespace retort::collectives {

class BootstrapStore {
 public:
  virtual ~BootstrapStore() = default;
  // Publishes `value` under `key` (overwrites).
  virtual Status Set(const std::string& key, const std::string& value, Deadline deadline) = 0;
  // Blocks until `key` is present and returns its value, or DEADLINE_EXCEEDED naming the key.
  virtual StatusOr<std::string> Get(const std::string& key, Deadline deadline) = 0;
};

class InMemoryStore final : public BootstrapStore {
 public:
  Status Set(const std::string& key, const std::string& value, Deadline deadline) override;
  StatusOr<std::string> Get(const std::string& key, Deadline deadline) override;

 private:
  Mutex mu_;
  CondVar cv_;
  std::map<std::string, std::string> values_ RETORT_GUARDED_BY(mu_);
};

// One file per key in `directory` (created if missing), written with an atomic rename so a
// reader sees all of a value or nothing. Get polls with backoff (1..50 ms).
class FileStore final : public BootstrapStore {
 public:
  explicit FileStore(std::string directory);
  Status Set(const std::string& key, const std::string& value, Deadline deadline) override;
  StatusOr<std::string> Get(const std::string& key, Deadline deadline) override;

 private:
  std::string PathFor(const std::string& key) const;
  const std::string directory_;
};

// Prepends `prefix` + "/" to every key of `base` (not owned; must outlive this).
class PrefixStore final : public BootstrapStore {
 public:
  PrefixStore(BootstrapStore* base, std::string prefix) : base_(base), prefix_(std::move(prefix)) {}
  Status Set(const std::string& key, const std::string& value, Deadline deadline) override {
    return base_->Set(prefix_ + "/" + key, value, deadline);
  }
  StatusOr<std::string> Get(const std::string& key, Deadline deadline) override {
    return base_->Get(prefix_ + "/" + key, deadline);
  }

 private:
  BootstrapStore* base_;
  const std::string prefix_;
};

}  // namespace retort::collectives
