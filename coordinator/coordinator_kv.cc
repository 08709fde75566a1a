// The coordinator's side of the key-value exchange (kv_exchange.h): only members of the
// current generation may put and get, and the store is cleared whenever a generation forms.
#include "coordinator/coordinator.h"

namespace retort::coordinator {

Status Coordinator::CheckInGenerationLocked(const std::string& member_id, const char* what) const {
  if (generation_)
    for (const auto& m : generation_->members())
      if (m.member_id() == member_id) return Status::Ok();
  return FailedPreconditionError(std::string(what) + ": " + member_id.substr(0, 64) +
                                 " is not in generation " +
                                 std::to_string(generation_ ? generation_->number() : 0));
}

Status Coordinator::KvPut(const v1::KvPutRequest& r) {
  // Malformed requests are refused before the lock, whoever sends them.
  RETORT_RETURN_IF_ERROR(KvExchange::CheckKey(r.key()));
  RETORT_RETURN_IF_ERROR(KvExchange::CheckValue(r.value(), options_.max_kv_value_bytes));
  MutexLock lock(mu_);
  RETORT_RETURN_IF_ERROR(CheckKvCallerLocked(r.member_id(), r.generation(), "kv put"));
  return kv_.Put(r.member_id(), r.key(), r.value(), r.generation());
}

StatusOr<v1::KvGetResponse> Coordinator::KvGet(const v1::KvGetRequest& r) {
  RETORT_RETURN_IF_ERROR(KvExchange::CheckKey(r.key()));
  MutexLock lock(mu_);
  RETORT_RETURN_IF_ERROR(CheckKvCallerLocked(r.member_id(), r.generation(), "kv get"));
  v1::KvGetResponse resp;
  if (std::optional<std::string> value = kv_.Get(r.key())) {
    resp.set_found(true);
    resp.set_value(*std::move(value));
  }
  return resp;
}

Status Coordinator::CheckKvCallerLocked(const std::string& member_id, uint64_t generation,
                                        const char* what) const {
  RETORT_RETURN_IF_ERROR(CheckMemberLocked(member_id));
  RETORT_RETURN_IF_ERROR(CheckGenerationLocked(generation, what));
  return CheckInGenerationLocked(member_id, what);
}

}  // namespace retort::coordinator
