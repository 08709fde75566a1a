#include "trainer/grad_reducer.h"

#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <chrono>
#include <deque>
#include <optional>

#include "common/mutex.h"
#include "trainer/flat_parameters.h"
#include "trainer/host_staging.h"
#include "trainer/step_waits.h"

namespace retort::trainer {

struct GradReducer::State {
  struct Bucket {
    int64_t begin = 0, end = 0;
    std::vector<int64_t> counts;  // per rank
    int64_t out_offset = 0;       // into reduced, for this rank's part
    int num_params = 0;
    int pending = 0;
  };
  FlatParameters* flat = nullptr;
  ShardComm* comm = nullptr;
  ShardPlan plan;
  ShardRange mine;
  torch::Tensor reduced;
  // Host copies of the gradient buffer and of `reduced` when staging (else undefined).
  torch::Tensor host_grads, host_reduced;
  bool single_rank = false;
  std::vector<Bucket> buckets;
  std::vector<int> bucket_of_param;
  std::vector<int> fires;  // AccumulateGrad calls per parameter in this step
  int passes = 1;          // backward passes per step (parts of the slice)
  // The AccumulateGrad nodes our hooks hang on, kept alive (shared_ptr or intrusive_ptr, by
  // LibTorch version).
  std::vector<decltype(torch::autograd::impl::grad_accumulator(
      std::declval<const torch::Tensor&>()))>
      grad_accumulators;
  // Host staging of device gradients: buckets whose copy to the host was issued (without a
  // host wait) and whose collective is not, in bucket order, each with an event after its copy
  // (none for host gradients, whose copy is done when issued).
  struct Copying {
    int bucket;
    std::optional<c10::Event> copied;
  };
  std::deque<Copying> copying;
  std::vector<std::unique_ptr<CommHandle>> handles;  // in launch (= bucket) order
  int next_to_launch = 0;
  int launched_in_backward = 0;
  bool in_backward = false;
  Mutex mu;  // hooks may run on an autograd device thread

  void Launch(int b) {
    if (single_rank) return;  // nothing to exchange: `reduced` is the gradient buffer
    if (!host_grads.defined()) return Issue(b);
    // Staged: the copy to the (pinned) host buffer is queued on the gradients' stream and the
    // hook goes on; the collective is issued once the copy is done (IssueCopied), in bucket
    // order. A blocking copy here waited for every kernel queued so far on each bucket.
    const Bucket& bucket = buckets[b];
    const torch::Tensor& device_grads = flat->grads();
    {
      torch::NoGradGuard no_grad;
      const int64_t n = bucket.end - bucket.begin;
      host_grads.narrow(0, bucket.begin, n)
          .copy_(device_grads.narrow(0, bucket.begin, n), /*non_blocking=*/device_grads.is_cuda());
    }
    Copying c{b, std::nullopt};
    if (device_grads.is_cuda()) {
      const c10::Device device = device_grads.device();
      c.copied.emplace(device.type());
      c.copied->record(c10::impl::getDeviceGuardImpl(device.type())->getStream(device));
    }
    copying.push_back(std::move(c));
    IssueCopied(/*wait=*/false);
  }
  // Issues the collectives of the staged buckets whose copy is done, in order; with `wait`,
  // waits for each copy (Finish: every bucket must be issued).
  void IssueCopied(bool wait) {
    while (!copying.empty()) {
      Copying& front = copying.front();
      if (front.copied.has_value()) {
        if (wait)
          front.copied->synchronize();
        else if (!front.copied->query())
          return;
      }
      const int b = front.bucket;
      copying.pop_front();
      Issue(b);
    }
  }
  void Issue(int b) {
    Bucket& bucket = buckets[b];
    const torch::Tensor& grads = host_grads.defined() ? host_grads : flat->grads();
    const torch::Tensor& out_buffer = host_reduced.defined() ? host_reduced : reduced;
    const float* in = grads.data_ptr<float>() + bucket.begin;
    float* out =
        out_buffer.numel() > 0 ? out_buffer.data_ptr<float>() + bucket.out_offset : nullptr;
    handles.push_back(comm->ReduceScatterV(in, out, bucket.counts));
  }
  void OnParamReady(int p) {
    MutexLock lock(mu);
    if (!in_backward || fires[p] >= passes) return;
    if (++fires[p] < passes) return;
    --buckets[bucket_of_param[p]].pending;
    while (next_to_launch < static_cast<int>(buckets.size()) &&
           buckets[next_to_launch].pending == 0) {
      Launch(next_to_launch++);
      ++launched_in_backward;
    }
    IssueCopied(/*wait=*/false);  // staged buckets whose copy finished meanwhile
  }
};

namespace {
class ReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(std::weak_ptr<GradReducer::State> state, int param)
      : state_(std::move(state)), param_(param) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    if (auto state = state_.lock()) state->OnParamReady(param_);
    return outputs;
  }

 private:
  std::weak_ptr<GradReducer::State> state_;
  int param_;
};
}  // namespace

GradReducer::GradReducer(std::shared_ptr<State> state) : state_(std::move(state)) {}
GradReducer::~GradReducer() = default;

StatusOr<std::unique_ptr<GradReducer>> GradReducer::Create(FlatParameters* flat, ShardComm* comm,
                                                           ShardPlan plan, int64_t bucket_elements,
                                                           bool stage_through_host) {
  RETORT_RETURN_IF_ERROR(ValidateShardPlan(plan, flat->numel(), comm->world_size()));
  if (bucket_elements <= 0)
    return InvalidArgumentError("bucket_elements must be > 0, got " +
                                std::to_string(bucket_elements));
  auto state = std::make_shared<State>();
  state->flat = flat;
  state->comm = comm;
  state->mine = plan.ranges[comm->rank()];
  state->plan = std::move(plan);
  state->single_rank = comm->world_size() == 1;
  if (state->single_rank) {
    state->reduced = flat->grads();
  } else {
    state->reduced = torch::zeros({state->mine.count}, flat->params().options());
    if (NeedsHostStaging(flat->grads(), *comm, stage_through_host)) {
      state->host_grads = HostStagingBuffer(flat->numel(), flat->grads());
      state->host_reduced = HostStagingBuffer(state->mine.count, flat->grads());
    }
  }
  const auto& slots = flat->slots();
  const int n = static_cast<int>(slots.size());
  state->bucket_of_param.assign(n, -1);
  state->fires.assign(n, 0);
  for (int i = n - 1; i >= 0;) {
    State::Bucket bucket;
    bucket.end = slots[i].offset + slots[i].numel;
    while (i >= 0 && (bucket.end - slots[i].offset < bucket_elements || bucket.num_params == 0)) {
      state->bucket_of_param[i] = static_cast<int>(state->buckets.size());
      ++bucket.num_params;
      --i;
    }
    bucket.begin = slots[i + 1].offset;
    bucket.counts = SplitSpanByPlan(state->plan, bucket.begin, bucket.end);
    bucket.out_offset = std::max<int64_t>(0, bucket.begin - state->mine.offset);
    state->buckets.push_back(std::move(bucket));
  }
  std::weak_ptr<State> weak = state;
  for (int i = 0; i < n; ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(flat->tensors()[i]);
    if (!acc) return InternalError("parameter '" + slots[i].name + "' has no grad accumulator");
    acc->add_post_hook(std::make_unique<ReadyHook>(weak, i));
    state->grad_accumulators.push_back(std::move(acc));
  }
  return std::unique_ptr<GradReducer>(new GradReducer(std::move(state)));
}

void GradReducer::BeginBackward(int passes) {
  MutexLock lock(state_->mu);
  state_->passes = std::max(1, passes);
  state_->handles.clear();
  state_->copying.clear();
  state_->next_to_launch = 0;
  state_->launched_in_backward = 0;
  std::fill(state_->fires.begin(), state_->fires.end(), 0);
  for (auto& b : state_->buckets) b.pending = b.num_params;
  state_->in_backward = true;
}

Status GradReducer::Finish(Deadline deadline, double* exposed_seconds, StepWaits* waits) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<CommHandle>> handles;
  {
    MutexLock lock(state_->mu);
    state_->in_backward = false;
    while (state_->next_to_launch < static_cast<int>(state_->buckets.size()))
      state_->Launch(state_->next_to_launch++);
    state_->IssueCopied(/*wait=*/true);
    handles.swap(state_->handles);
  }
  Status status;
  for (size_t i = 0; i < handles.size() && status.ok(); ++i) {
    const std::string what = "gradient bucket " + std::to_string(i);
    // Host staging reads the result on the host next: a host wait either way.
    status = state_->host_reduced.defined() ? waits->HostWait(*handles[i], deadline, what)
                                            : waits->Order(std::move(handles[i]), deadline, what);
  }
  if (status.ok() && state_->host_reduced.defined()) {
    torch::NoGradGuard no_grad;
    state_->reduced.copy_(state_->host_reduced);
  }
  if (exposed_seconds)
    *exposed_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return status;
}

const torch::Tensor& GradReducer::reduced() const { return state_->reduced; }
int GradReducer::num_buckets() const { return static_cast<int>(state_->buckets.size()); }
int GradReducer::launched_during_backward() const { return state_->launched_in_backward; }
bool GradReducer::stages_through_host() const { return state_->host_grads.defined(); }

}  // namespace retort::trainer
