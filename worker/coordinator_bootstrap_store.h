// collectives::BootstrapStore over the coordinator's generation-scoped key-value exchange
// (KvPut/KvGet). Used to bootstrap communicators (UCX worker addresses, NCCL unique ids) in real
// runs. Get polls with backoff (2..50 ms) until the key appears or the deadline passes; Set and Get
// both retry while the coordinator is away (RetryUntil and IsRetryable, common/retry.h). A
// stale generation is ABORTED (the communicator being built is obsolete). Thread-safe.
#pragma once

#include <string>

#include "collectives/bootstrap_store.h"
#include "worker/coordinator_client.h"

namespace retort::worker {

class CoordinatorBootstrapStore final : public collectives::BootstrapStore {
 public:
  // `client` is borrowed and must outlive this store.
  CoordinatorBootstrapStore(CoordinatorClient* client, std::string member_id, uint64_t generation)
      : client_(client), member_id_(std::move(member_id)), generation_(generation) {}

  Status Set(const std::string& key, const std::string& value, Deadline deadline) override;
  StatusOr<std::string> Get(const std::string& key, Deadline deadline) override;

 private:
  CoordinatorClient* const client_;
  const std::string member_id_;
  const uint64_t generation_;
};

}  // namespace retort::worker
