// Top-1 and top-k counts of a model over evaluation batches (the test split during training and
// at the end). Counts rather than rates, so that ranks evaluating slices of the split can sum
// them with one all-reduce.
#pragma once

#include <cstdint>
#include <vector>

namespace retort::trainer {

class Model;
struct Batch;

struct TopKCounts {
  int64_t top1 = 0;   // rows whose arg-max is the label
  int64_t top_k = 0;  // rows whose label is among the k largest logits
  int64_t total = 0;  // rows evaluated
};

// Evaluates `model` without autograd in eval mode over `batches` (moved to the model's device
// and dtype), leaving the model in the mode it was in. k is clamped to the number of classes.
TopKCounts CountTopKCorrect(Model& model, const std::vector<Batch>& batches, int64_t k = 5);

}  // namespace retort::trainer
