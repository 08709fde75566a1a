// CountTopKCorrect (trainer/evaluation.h): top-1 and top-k counts against a model whose logits
// the test chooses, empty batches, and the model's mode left as it was.
#include "trainer/evaluation.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "trainer/data/batch.h"
#include "trainer/models/model.h"

namespace retort::trainer {
namespace {

// Logits are the images' first row read as class scores ([n, 1, 1, C] -> [n, C]).
class ScoresAsLogits : public Model {
 public:
  torch::Tensor Forward(const torch::Tensor& images) override {
    forward_in_training_ = training_;
    return images.flatten(1);
  }
  std::vector<std::pair<std::string, torch::Tensor>> NamedParameters() override { return {}; }
  void SetTraining(bool training) override { training_ = training; }
  bool IsTraining() const override { return training_; }
  void To(torch::Device) override {}
  std::string Describe() const override { return "scores"; }
  bool forward_in_training_ = true;

 private:
  bool training_ = true;
};

Batch Scores(const std::vector<std::vector<float>>& rows, const std::vector<int64_t>& labels) {
  Batch b;
  const auto n = static_cast<int64_t>(rows.size());
  const auto c = static_cast<int64_t>(rows.empty() ? 1 : rows[0].size());
  b.images = torch::empty({n, 1, 1, c});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) b.images[i][0][0][j] = rows[i][j];
  b.labels = torch::tensor(labels, torch::kLong);
  return b;
}

TEST(EvaluationTest, CountsTop1AndTopKAcrossBatches) {
  ScoresAsLogits model;
  // Label ranks: 1st, 2nd, 3rd (of 4 classes); then 4th, and 1st.
  std::vector<Batch> batches = {
      Scores({{9, 1, 2, 3}, {1, 9, 2, 8}, {4, 3, 2, 1}}, {0, 3, 2}),
      Scores({}, {}),
      Scores({{1, 2, 3, 4}, {0, 0, 5, 1}}, {0, 2}),
  };
  TopKCounts two = CountTopKCorrect(model, batches, 2);
  EXPECT_EQ(two.total, 5);
  EXPECT_EQ(two.top1, 2);
  EXPECT_EQ(two.top_k, 3);
  TopKCounts three = CountTopKCorrect(model, batches, 3);
  EXPECT_EQ(three.top_k, 4);
  // k beyond the classes counts every row.
  EXPECT_EQ(CountTopKCorrect(model, batches, 5).top_k, 5);
  // Evaluated in eval mode, then back in training mode.
  EXPECT_FALSE(model.forward_in_training_);
  EXPECT_TRUE(model.IsTraining());
}

}  // namespace
}  // namespace retort::trainer
