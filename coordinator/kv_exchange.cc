#include "coordinator/kv_exchange.h"

namespace retort::coordinator {

Status KvExchange::CheckKey(const std::string& key) {
  if (key.empty() || key.size() > kMaxKeyBytes)
    return InvalidArgumentError("key: must be 1-" + std::to_string(kMaxKeyBytes) + " bytes");
  return Status::Ok();
}

Status KvExchange::CheckValue(const std::string& value, size_t max_value_bytes) {
  if (value.size() <= max_value_bytes) return Status::Ok();
  return InvalidArgumentError("value: " + std::to_string(value.size()) +
                              " bytes exceeds the limit of " + std::to_string(max_value_bytes));
}

Status KvExchange::Put(const std::string& member_id, const std::string& key,
                       const std::string& value, uint64_t generation) {
  RETORT_RETURN_IF_ERROR(CheckKey(key));
  RETORT_RETURN_IF_ERROR(CheckValue(value, limits_.max_value_bytes));
  auto it = entries_.find(key);
  if (it == entries_.end() && entries_.size() >= limits_.max_keys)
    return ResourceExhaustedError("too many keys in generation " + std::to_string(generation));
  // What the put costs: key + value, less what the entry it replaces cost its owner.
  const size_t cost = key.size() + value.size();
  const size_t old_cost = it == entries_.end() ? 0 : it->first.size() + it->second.value.size();
  const bool replaces_own = it != entries_.end() && it->second.owner == member_id;
  const size_t writer_after = bytes_of(member_id) + cost - (replaces_own ? old_cost : 0);
  if (writer_after > limits_.max_bytes_per_member)
    return ResourceExhaustedError("kv put: " + member_id + " would hold " +
                                  std::to_string(writer_after) + " bytes in generation " +
                                  std::to_string(generation) + " (limit per member " +
                                  std::to_string(limits_.max_bytes_per_member) + ")");
  if (bytes_ + cost - old_cost > limits_.max_bytes_total)
    return ResourceExhaustedError("kv put: the store would hold " +
                                  std::to_string(bytes_ + cost - old_cost) + " bytes (limit " +
                                  std::to_string(limits_.max_bytes_total) + ")");
  if (it != entries_.end()) {
    bytes_by_member_[it->second.owner] -= old_cost;
    bytes_ -= old_cost;
    it->second = Entry{member_id, value};
  } else {
    entries_.emplace(key, Entry{member_id, value});
  }
  bytes_by_member_[member_id] += cost;
  bytes_ += cost;
  return Status::Ok();
}

std::optional<std::string> KvExchange::Get(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second.value;
}

void KvExchange::Clear() {
  entries_.clear();
  bytes_by_member_.clear();
  bytes_ = 0;
}

size_t KvExchange::bytes_of(const std::string& member_id) const {
  auto it = bytes_by_member_.find(member_id);
  return it == bytes_by_member_.end() ? 0 : it->second;
}

}  // namespace retort::coordinator
