// KdStep: one data-parallel knowledge-distillation training step on this rank.
//
//   teacher forward (frozen: InferenceMode, eval mode; on CUDA in bf16) or the teacher-logit
//   cache -> student forward (bf16 autocast on CUDA, fp32 master weights in the flat buffer) ->
//   KD loss x Batch::weight -> backward, which reduce-scatters gradient buckets as they become
//   ready (GradReducer) -> global squared gradient norm and loss via one 2-float AllReduce ->
//   clipping divisor and skip flag computed where the scalars live (a non-finite norm skips the
//   update on every rank: all ranks see the same sum) -> AdamW on this rank's range
//   (ShardedAdamW) -> in-place AllGatherV of the parameters -> one host read of the two
//   scalars for the result. On CUDA nothing between the forward and that read waits for the
//   device: the collectives are ordered on the device stream (StepWaits, step_waits.h) where
//   the ShardComm completes them on a device stream (NCCL), and their statuses are collected
//   after the read; compositions that complete on the host (staged, hierarchical) still cost a
//   host wait each (counted in StepResult::host_waits). A single rank runs no collective. A student
//   with buffers (BatchNorm statistics) gets rank 0's buffers after backward (model_buffers.h:
//   DDP's broadcast_buffers semantics), so all ranks hold the same buffers at every step boundary.
//
// Device: Create() moves teacher and student to KdStepOptions::device; the flat buffers, the
// optimizer state and every step tensor live there. Batches may come from host memory.
// Ownership: owns the teacher and student; borrows `comm` and the optional cache, which must
// outlive it. Threading: one trainer thread calls Step(); see grad_reducer.h for the hooks.
// On CUDA, ShardComm operations are issued after the producing kernels were enqueued on the
// current stream; a ShardComm that takes device memory must order its work after that stream,
// one that does not gets host copies (the copy waits for the stream).
// Phase times on CUDA are host-side (enqueue) times except where a copy to the host waits.
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
#include "trainer/step_waits.h"

namespace retort::trainer {

class DeviceSelector;
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
  // Where teacher, student, flat buffers and optimizer state live ("cpu", "cuda:0", ...).
  torch::Device device = torch::kCPU;
  // Create() makes `device` the calling thread's current CUDA device through this (null: the
  // CUDA runtime's; trainer/device.h) before anything touches it; Step() and the rest must run
  // on a thread that selected it too (the creating thread does). Borrowed.
  DeviceSelector* device_selector = nullptr;
  bool teacher_bf16_on_cuda = true;  // CUDA: the frozen teacher's weights and forward in bf16
  bool student_bf16_on_cuda = true;  // CUDA: bf16 autocast for the student forward and loss
  AdamWKernel optimizer_kernel = AdamWKernel::kAuto;
  // Run collectives on host copies even when the ShardComm takes device memory (tests of the
  // staging path on the CPU). Staging is automatic for device buffers and a host-only comm.
  bool stage_collectives_through_host = false;
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
  // Waits for collectives before the step's one host read (StepWaits): blocking host waits
  // and device-side stream waits. On a ShardComm whose collectives complete on a device stream
  // (NCCL) host_waits is 0; see step_waits.h.
  int host_waits = 0;
  int stream_waits = 0;
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
  // The models, the flat parameter buffer and the student's buffers are kept as they are.
  Status Reconfigure(ShardComm* comm, ShardPlan plan);

  // Lets go of the communicator (disarming the gradient hooks) so that it can be destroyed
  // before the next generation's one exists. Until Reconfigure() only the models, flat() and
  // optimizer() may be used: Step() and AllGatherParameters() need a communicator.
  void DetachComm();
  bool attached() const { return comm_ != nullptr; }

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
  // True when collectives run on host copies of device buffers.
  bool StagesThroughHost() const;
  std::unique_ptr<ShardedAdamW> MakeOptimizer(ShardRange range) const;
  Status AllReduceScalars(Deadline deadline);
  // The in-place parameter all-gather; the trainer's stream is ordered after it via waits_.
  Status GatherParameters(Deadline deadline);
  torch::Tensor TeacherForward(const torch::Tensor& images);
  // Teacher forward, student forward, weighted loss and backward for rows [begin, end).
  struct PartResult {
    double teacher = 0, student = 0, backward = 0;
    torch::Tensor loss;  // detached scalar on the device
    torch::Tensor teacher_logits;
  };
  // The slice's CE targets on the device: labels, and for mixed images the partners' labels
  // and the own label's weights (undefined otherwise; kd_loss.h).
  struct SliceTargets {
    torch::Tensor labels, partner_labels, own_weight;
  };
  PartResult RunPart(const torch::Tensor& images, const SliceTargets& targets,
                     const torch::Tensor& cached_logits, int64_t begin, int64_t end,
                     double slice_weight);

  std::unique_ptr<Model> teacher_, student_;
  ShardComm* comm_ = nullptr;
  ShardPlan plan_;
  KdStepOptions options_;
  std::unique_ptr<FlatParameters> flat_;
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<ShardedAdamW> optimizer_;
  torch::Tensor scalars_;      // [2]: squared gradient norm, weighted loss (AllReduce buffer)
  torch::Tensor host_params_;  // staging buffer of AllGatherParameters (see StagesThroughHost)
  StepWaits waits_;            // of the running step
  int64_t skipped_steps_ = 0;
  int64_t calls_ = 0;
  bool student_has_buffers_ = false;
};

// Number of elements the student's flat buffer will have (sum of parameter sizes).
int64_t FlatParameterCount(Model& model);

}  // namespace retort::trainer
