#include "worker/coordinator_store.h"

#include <algorithm>
#include <thread>

namespace retort::worker {

Status CoordinatorStore::Set(const std::string& key, const std::string& value, Deadline deadline) {
  v1::KvPutRequest r;
  r.set_member_id(member_id_);
  r.set_generation(generation_);
  r.set_key(key);
  r.set_value(value);
  auto delay = std::chrono::milliseconds(2);
  while (true) {
    Status s = client_->KvPut(r);
    if (s.ok() ||
        (s.code() != StatusCode::kUnavailable && s.code() != StatusCode::kDeadlineExceeded))
      return s;
    if (deadline.Remaining() < delay)
      return DeadlineExceededError("store set '" + key + "': " + s.message());
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::milliseconds(50));
  }
}

StatusOr<std::string> CoordinatorStore::Get(const std::string& key, Deadline deadline) {
  v1::KvGetRequest r;
  r.set_member_id(member_id_);
  r.set_generation(generation_);
  r.set_key(key);
  auto delay = std::chrono::milliseconds(2);
  while (true) {
    auto resp = client_->KvGet(r);
    if (resp.ok() && resp->found()) return resp->value();
    if (!resp.ok() && resp.status().code() != StatusCode::kUnavailable &&
        resp.status().code() != StatusCode::kDeadlineExceeded)
      return resp.status();
    if (deadline.Remaining() < delay)
      return DeadlineExceededError("store key '" + key + "' of generation " +
                                   std::to_string(generation_) +
                                   " did not appear before the deadline");
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace retort::worker
