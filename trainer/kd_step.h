// KdStep: one data-parallel knowledge-distillation training step on this rank.
//
//   teacher forward (frozen: InferenceMode, eval mode, bf16 autocast on CUDA) or the
//   teacher-logit cache -> student forward -> KD loss x Batch::weight -> backward, which
//   reduce-scatters gradient buckets as they become ready (GradReducer) -> global gradient norm
//   and loss via one 2-float AllReduce -> skip on non-finite norm (every rank sees the same
//   sum, so all ranks skip together) or clip + AdamW on this rank's range (ShardedAdamW) ->
//   in-place AllGatherV of the parameters. A student with buffers (BatchNorm statistics) gets
//   rank 0's buffers after backward (model_buffers.h: DDP's broadcast_buffers semantics), so
//   all ranks hold the same buffers at every step boundary.
//
// Ownership: owns the teacher and student; borrows `comm` and the optional cache, which must
// outlive it. Threading: one trainer thread calls Step(); see grad_reducer.h for the hooks.
// On CUDA, ShardComm operations are issued after the producing kernels were enqueued on the
// current stream; the adapter must order its work after that stream.
#pragma once

#include <torch/types.h>

#include <memory>

#include "common/deadline.h"
#include "common/status.h"
#include "trainer/kd_loss.h"
#include "trainer/shard_comm.h"
#include "trainer/shard_plan.h"
#include "trainer/sharded_adamw.h"
#include "trainer/step_profiler.h"

namespace retort::trainer {

class FlatParameters;
class GradReducer;
class Model;
class TeacherLogitCache;
struct Batch;

struct KdStepOptions {
  KdLossOptions loss;
  AdamWOptions optimizer;
  int64_t bucket_elements = 1 << 18;  // gradient bucket size (float32 elements)
  int64_t comm_timeout_ms = 120000;   // deadline of each step's collectives
  bool teacher_bf16_on_cuda = true;   // bf16 autocast for the teacher forward on CUDA
  // CPU only: split the slice into this many parts that run teacher forward, student forward
  // and backward concurrently, one per intra-op thread (each part single-threaded inside:
  // inter-op instead of intra-op parallelism, which suits small GEMMs and elementwise ops).
  // Gradients of the parts accumulate into the same flat buffer. 1: one pass over the slice
  // using all intra-op threads. Phase times then are those of part 0.
  int local_parallelism = 1;
  TeacherLogitCache* cache = nullptr;  // optional, not owned
};

struct StepResult {
  int64_t step = 0;      // optimizer updates applied so far (unchanged when skipped)
  double loss = 0;       // global-batch KD loss (sum over ranks of weight x slice loss)
  double grad_norm = 0;  // global L2 norm before clipping (inf/nan when skipped)
  double lr = 0;         // learning rate used (0 when skipped)
  bool skipped = false;  // non-finite gradients: no update on any rank
  StepTiming timing;
};

class KdStep {
 public:
  // `teacher` may be null for plain supervised training (then options.loss.alpha must be 0).
  // The student's parameters move into a flat buffer (see flat_parameters.h); `plan` must
  // tile that buffer (use FlatParameterCount(*student) to build one before calling).
  static StatusOr<std::unique_ptr<KdStep>> Create(std::unique_ptr<Model> teacher,
                                                  std::unique_ptr<Model> student, ShardComm* comm,
                                                  ShardPlan plan, KdStepOptions options);
  ~KdStep();

  // Runs one step on this rank's slice. `data_wait_seconds` is how long the caller waited for
  // the batch (it goes into the timing). Errors: INVALID_ARGUMENT for a malformed batch (before
  // any collective), collective errors (DEADLINE_EXCEEDED, ...) from ShardComm. After a
  // collective error the step's parameters are unspecified (some ranks may have updated): the
  // worker rebuilds the group and restores from the optimizer shards (Export/Import).
  StatusOr<StepResult> Step(const Batch& batch, double data_wait_seconds = 0.0);

  // All-gathers every rank's parameter range (after importing optimizer state on a new plan).
  Status AllGatherParameters(Deadline deadline);

  // Switches to a new generation: a new communicator (borrowed, must outlive this) and plan
  // over the same flat buffer. The optimizer is rebuilt for the new range with empty state:
  // before calling, Export() the pieces other ranks need from optimizer(); after calling,
  // Import() the pieces covering the new range, then AllGatherParameters() on every rank.
  Status Reconfigure(ShardComm* comm, ShardPlan plan);

  bool has_teacher() const { return teacher_ != nullptr; }
  // Precondition: has_teacher().
  Model& teacher() { return *teacher_; }
  Model& student() { return *student_; }
  FlatParameters& flat() { return *flat_; }
  ShardedAdamW& optimizer() { return *optimizer_; }
  GradReducer& reducer() { return *reducer_; }
  const ShardPlan& plan() const { return plan_; }
  int64_t skipped_steps() const { return skipped_steps_; }

 private:
  KdStep() = default;
  Status ValidateBatch(const Batch& batch) const;
  torch::Tensor TeacherForward(const torch::Tensor& images);
  // Teacher forward, student forward, weighted loss and backward for rows [begin, end).
  struct PartResult {
    double loss = 0, teacher = 0, student = 0, backward = 0;
    torch::Tensor teacher_logits;
  };
  PartResult RunPart(const torch::Tensor& images, const torch::Tensor& labels,
                     const torch::Tensor& cached_logits, int64_t begin, int64_t end,
                     double slice_weight);

  std::unique_ptr<Model> teacher_, student_;
  ShardComm* comm_ = nullptr;
  ShardPlan plan_;
  KdStepOptions options_;
  std::unique_ptr<FlatParameters> flat_;
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<ShardedAdamW> optimizer_;
  torch::Tensor scalars_;  // [2]: squared gradient norm, weighted loss (AllReduce buffer)
  int64_t skipped_steps_ = 0;
  int64_t calls_ = 0;
  bool student_has_buffers_ = false;
};

// Number of elements the student's flat buffer will have (sum of parameter sizes).
int64_t FlatParameterCount(Model& model);

}  // namespace retort::trainer
