#include "trainer/frozen_teacher.h"

#include <torch/torch.h>

#include "trainer/models/model.h"

namespace retort::trainer {

void PrepareFrozenTeacher(Model& teacher, bool bf16) {
  teacher.SetTraining(false);
  teacher.Freeze();
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : teacher.NamedParameters()) {
    p.requires_grad_(false);
    if (bf16 && p.is_floating_point()) p.set_data(p.to(torch::kBFloat16));
  }
  for (auto& [name, b] : teacher.NamedBuffers())
    if (bf16 && b.is_floating_point()) b.set_data(b.to(torch::kBFloat16));
}

torch::Tensor FrozenTeacherForward(Model& teacher, const torch::Tensor& images, bool bf16) {
  torch::Tensor logits;
  {
    torch::InferenceMode inference;
    logits = teacher.Forward(bf16 ? images.to(torch::kBFloat16) : images);
  }
  // Leave inference mode with a normal tensor so the loss may save it for backward.
  return logits.to(torch::kFloat).clone();
}

}  // namespace retort::trainer
