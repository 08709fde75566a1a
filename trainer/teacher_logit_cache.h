// TeacherLogitCache: the teacher's top-k distribution per (sample index, augmentation seed),
// so that a step whose samples are all cached skips the teacher forward.
//
// What is stored: for each sample, the k largest entries of log softmax(t / T) (T = the KD
// temperature, fixed per cache) and their class indices. What a lookup returns: dense logits
// t' = T * log p' with p' the teacher's exact probabilities on the cached top-k classes and the
// remaining mass 1 - sum(top-k) spread evenly over the other C - k classes. So
// softmax(t' / T) equals the teacher's distribution on the top-k classes (exact up to float
// rounding) and preserves the total non-top-k mass; with k = C the KD loss is the uncached one.
// The CE term does not use the teacher. A cache built at one temperature must not be used with
// another (Lookup checks).
//
// Capacity: at most max_entries samples; inserts beyond it are dropped (no eviction), counted
// in counts().dropped. Thread-safe (internally locked), so loader threads may prefetch lookups.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace retort::trainer {

struct Batch;

class TeacherLogitCache {
 public:
  static StatusOr<std::unique_ptr<TeacherLogitCache>> Create(int64_t num_classes, int64_t top_k,
                                                             double temperature,
                                                             int64_t max_entries);

  // Dense float32 CPU logits [n, num_classes] for the batch, or nullopt when any sample misses
  // (or the batch lacks sample indices / seeds for every sample).
  std::optional<torch::Tensor> Lookup(const Batch& batch, double temperature);
  // Stores every sample of the batch; teacher_logits [n, num_classes] (any float dtype/device).
  Status Insert(const Batch& batch, const torch::Tensor& teacher_logits);

  int64_t size() const;
  struct Counts {
    int64_t hits = 0;     // batches served
    int64_t misses = 0;   // batches not fully cached
    int64_t dropped = 0;  // samples not stored (the cache was full)
  };
  Counts counts() const;  // one consistent snapshot
  int64_t top_k() const { return top_k_; }

 private:
  TeacherLogitCache(int64_t num_classes, int64_t top_k, double temperature, int64_t max_entries)
      : num_classes_(num_classes),
        top_k_(top_k),
        temperature_(temperature),
        max_entries_(max_entries) {}
  struct Key {
    int64_t index;
    uint64_t seed;
    bool operator==(const Key& o) const { return index == o.index && seed == o.seed; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<int64_t>()(k.index) ^
             (std::hash<uint64_t>()(k.seed) * 0x9e3779b97f4a7c15ULL);
    }
  };
  struct Entry {
    std::vector<float> log_probs;  // [k], descending
    std::vector<int32_t> classes;  // [k]
  };
  const int64_t num_classes_, top_k_;
  const double temperature_;
  const int64_t max_entries_;
  mutable Mutex mu_;
  std::unordered_map<Key, Entry, KeyHash> entries_ RETORT_GUARDED_BY(mu_);
  Counts counts_ RETORT_GUARDED_BY(mu_);
};

}  // namespace retort::trainer
