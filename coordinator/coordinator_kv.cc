// The generation-scoped key-value store the data plane bootstraps through (see coordinator.h
// for the threading contract). Only members of the current generation use it; what they put is
// bounded per member and in total, and the store is cleared whenever a generation forms.
#include "coordinator/coordinator.h"

namespace retort::coordinator {
namespace {

constexpr size_t kMaxKeyBytes = 256;

Status CheckKey(const std::string& key) {
  if (key.empty() || key.size() > kMaxKeyBytes)
    return InvalidArgumentError("key: must be 1-256 bytes");
  return Status::Ok();
}

}  // namespace

Status Coordinator::CheckInGenerationLocked(const std::string& member_id, const char* what) const {
  if (generation_)
    for (const auto& m : generation_->members())
      if (m.member_id() == member_id) return Status::Ok();
  return FailedPreconditionError(std::string(what) + ": " + member_id.substr(0, 64) +
                                 " is not in generation " +
                                 std::to_string(generation_ ? generation_->number() : 0));
}

Status Coordinator::KvPut(const v1::KvPutRequest& r) {
  RETORT_RETURN_IF_ERROR(CheckKey(r.key()));
  if (r.value().size() > options_.max_kv_value_bytes)
    return InvalidArgumentError("value: " + std::to_string(r.value().size()) +
                                " bytes exceeds the limit of " +
                                std::to_string(options_.max_kv_value_bytes));
  MutexLock lock(mu_);
  RETORT_RETURN_IF_ERROR(CheckMemberLocked(r.member_id()));
  RETORT_RETURN_IF_ERROR(CheckGenerationLocked(r.generation(), "kv put"));
  RETORT_RETURN_IF_ERROR(CheckInGenerationLocked(r.member_id(), "kv put"));
  auto it = kv_.find(r.key());
  if (it == kv_.end() && kv_.size() >= options_.max_kv_keys_per_generation)
    return ResourceExhaustedError("too many keys in generation " + std::to_string(r.generation()));
  // What the put costs: key + value, less what the entry it replaces cost its owner.
  const size_t cost = r.key().size() + r.value().size();
  const size_t old_cost = it == kv_.end() ? 0 : it->first.size() + it->second.value.size();
  MemberRecord& writer = members_.at(r.member_id());
  const size_t writer_after = writer.kv_bytes + cost -
                              (it != kv_.end() && it->second.owner == r.member_id() ? old_cost : 0);
  if (writer_after > options_.max_kv_bytes_per_member)
    return ResourceExhaustedError("kv put: " + r.member_id() + " would hold " +
                                  std::to_string(writer_after) + " bytes in generation " +
                                  std::to_string(r.generation()) + " (limit per member " +
                                  std::to_string(options_.max_kv_bytes_per_member) + ")");
  if (kv_bytes_ + cost - old_cost > options_.max_kv_bytes_total)
    return ResourceExhaustedError("kv put: the store would hold " +
                                  std::to_string(kv_bytes_ + cost - old_cost) + " bytes (limit " +
                                  std::to_string(options_.max_kv_bytes_total) + ")");
  if (it != kv_.end()) {
    auto owner = members_.find(it->second.owner);
    if (owner != members_.end()) owner->second.kv_bytes -= old_cost;
    kv_bytes_ -= old_cost;
    it->second = KvEntry{r.member_id(), r.value()};
  } else {
    kv_.emplace(r.key(), KvEntry{r.member_id(), r.value()});
  }
  writer.kv_bytes += cost;
  kv_bytes_ += cost;
  return Status::Ok();
}

StatusOr<v1::KvGetResponse> Coordinator::KvGet(const v1::KvGetRequest& r) {
  RETORT_RETURN_IF_ERROR(CheckKey(r.key()));
  MutexLock lock(mu_);
  RETORT_RETURN_IF_ERROR(CheckMemberLocked(r.member_id()));
  RETORT_RETURN_IF_ERROR(CheckGenerationLocked(r.generation(), "kv get"));
  RETORT_RETURN_IF_ERROR(CheckInGenerationLocked(r.member_id(), "kv get"));
  v1::KvGetResponse resp;
  auto it = kv_.find(r.key());
  if (it != kv_.end()) {
    resp.set_found(true);
    resp.set_value(it->second.value);
  }
  return resp;
}

}  // namespace retort::coordinator
