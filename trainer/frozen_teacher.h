// The frozen teacher: how KdStep prepares it once and runs it each step, in one place so the
// precision its figures claim is the precision it runs at (and so the CPU tests can drive it).
//
// Precision: with `bf16`, the teacher's floating-point parameters and buffers are cast to bf16
// once and each forward runs in pure bf16 on a bf16 input, the same as PyTorch code that calls
// `teacher.to(torch.bfloat16)` (bench/trainer/kd_reference_gpu.py). It does not run under
// autocast: autocast would cast LayerNorm's and softmax's inputs back to fp32 on every call,
// costing time and giving numbers the reference does not compute. Without `bf16` the teacher
// runs in its own dtype (fp32).
// Threading: as Model::Forward without autograd (disjoint inputs may run concurrently).
#pragma once

#include <torch/types.h>

namespace retort::trainer {

class Model;

// Eval mode, Freeze(), every parameter without requires_grad; with `bf16` the floating-point
// parameters and buffers cast to bf16 in place (set_data). Call after the model is on its
// device. Throws c10::Error where the cast cannot be allocated (the caller maps it).
void PrepareFrozenTeacher(Model& teacher, bool bf16);

// The teacher's logits for `images` under InferenceMode, as an fp32 tensor that is not an
// inference tensor (a loss may save it for backward). With `bf16` the input is cast to bf16
// first; the teacher must have been prepared with the same `bf16`.
torch::Tensor FrozenTeacherForward(Model& teacher, const torch::Tensor& images, bool bf16);

}  // namespace retort::trainer
