#include "worker/coordinator_bootstrap_store.h"

#include "common/backoff_policies.h"
#include "common/retry.h"

namespace retort::worker {
namespace {

Backoff StoreBackoff() { return backoff_policies::kCoordinatorStorePoll.Make(); }

}  // namespace

Status CoordinatorBootstrapStore::Set(const std::string& key, const std::string& value,
                                      Deadline deadline) {
  v1::KvPutRequest r;
  r.set_member_id(member_id_);
  r.set_generation(generation_);
  r.set_key(key);
  r.set_value(value);
  Backoff backoff = StoreBackoff();
  Status s = RetryUntil(deadline, backoff, IsRetryable, [&] { return client_->KvPut(r); });
  if (!s.ok() && IsRetryable(s.code()))
    return DeadlineExceededError("store set '" + key + "': " + s.message());
  return s;
}

StatusOr<std::string> CoordinatorBootstrapStore::Get(const std::string& key, Deadline deadline) {
  v1::KvGetRequest r;
  r.set_member_id(member_id_);
  r.set_generation(generation_);
  r.set_key(key);
  Backoff backoff = StoreBackoff();
  StatusOr<std::string> value =
      RetryUntil(deadline, backoff, IsRetryable, [&]() -> StatusOr<std::string> {
        auto resp = client_->KvGet(r);
        if (!resp.ok()) return resp.status();
        if (!resp->found()) return UnavailableError("not set yet");  // retried like the rest
        return resp->value();
      });
  if (!value.ok() && IsRetryable(value.status().code()))
    return DeadlineExceededError("store key '" + key + "' of generation " +
                                 std::to_string(generation_) +
                                 " did not appear before the deadline");
  return value;
}

}  // namespace retort::worker
