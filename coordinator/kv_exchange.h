// The generation-scoped key-value store the data plane bootstraps through (NCCL unique ids, UCX
// worker addresses). What members put is bounded: per value, in keys, per member and in total
// (keys + values, in bytes); the Coordinator clears it whenever a generation forms and checks
// that a caller is a member of the current generation before it calls Put or Get.
//
// Thread-compatible: the Coordinator calls it under its own lock.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "common/status.h"

namespace retort::coordinator {

struct KvLimits {
  size_t max_value_bytes = 1 << 20;
  size_t max_keys = 65536;
  size_t max_bytes_per_member = 4 << 20;
  size_t max_bytes_total = 64 << 20;
};

class KvExchange {
 public:
  static constexpr size_t kMaxKeyBytes = 256;

  explicit KvExchange(KvLimits limits) : limits_(limits) {}

  // INVALID_ARGUMENT for an empty or over-long key or an over-long value: checks that need no
  // state, so callers run them before taking their lock.
  static Status CheckKey(const std::string& key);
  static Status CheckValue(const std::string& value, size_t max_value_bytes);

  // Puts `value` under `key` for `member_id`, replacing what was there (whose bytes then stop
  // counting against its owner). RESOURCE_EXHAUSTED, changing nothing, when the put would
  // exceed the key count, the member's bytes or the total; `generation` only names it there.
  Status Put(const std::string& member_id, const std::string& key, const std::string& value,
             uint64_t generation);
  std::optional<std::string> Get(const std::string& key) const;
  // Forgets every entry and every member's byte count (a generation formed).
  void Clear();

  size_t keys() const { return entries_.size(); }
  size_t bytes() const { return bytes_; }
  size_t bytes_of(const std::string& member_id) const;

 private:
  struct Entry {
    std::string owner;  // member id that put it
    std::string value;
  };

  const KvLimits limits_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, size_t> bytes_by_member_;
  size_t bytes_ = 0;
};

}  // namespace retort::coordinator
