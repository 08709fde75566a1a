#include "trainer/data/loader.h"

#include <torch/cuda.h>
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <utility>

#include "common/logging.h"
#include "trainer/data/random.h"
#include "trainer/device.h"

namespace retort::trainer::data {

// One planned step: this rank's slice, its output tensors and decode progress.
struct Loader::Job {
  RankSlice slice;
  std::vector<uint64_t> seeds;        // per slot, as planned
  std::vector<int64_t> used_indices;  // per slot, after replacement (written by one thread each)
  std::vector<uint64_t> used_seeds;
  torch::Tensor images;
  torch::Tensor labels;
  // Device batches: where `images` became usable on the consumer's stream (set before the job
  // is queued, immutable after).
  std::shared_ptr<const AllocationEvent> allocated;
  float* image_data = nullptr;
  int64_t* label_data = nullptr;
  int64_t chunk = 1;
  // Decode progress, under the loader's mutex (&Loader::mu_: the owning Loader's mu_).
  int64_t next RETORT_GUARDED_BY(&Loader::mu_) = 0;   // next unclaimed slot
  int in_flight RETORT_GUARDED_BY(&Loader::mu_) = 0;  // claimed chunks not finished
  Status error RETORT_GUARDED_BY(&Loader::mu_);       // first error
  int64_t replaced RETORT_GUARDED_BY(&Loader::mu_) = 0;

  int64_t size() const { return slice.size(); }
  bool complete() const RETORT_REQUIRES(&Loader::mu_) { return next >= size() && in_flight == 0; }
};

StatusOr<std::unique_ptr<Loader>> Loader::Create(std::shared_ptr<const Dataset> dataset,
                                                 const LoaderOptions& options) {
  if (!dataset) return InvalidArgumentError("loader: dataset is null");
  if (options.num_threads < 1) return InvalidArgumentError("loader: num_threads must be >= 1");
  if (options.prefetch_depth < 1)
    return InvalidArgumentError("loader: prefetch_depth must be >= 1");
  if (options.max_replacements < 1)
    return InvalidArgumentError("loader: max_replacements must be >= 1");
  if (options.pin_memory && !torch::cuda::is_available()) {
    return FailedPreconditionError(
        "loader: pin_memory needs a CUDA-enabled LibTorch and a visible GPU");
  }
  if (options.decode_device >= 0 &&
      (!torch::cuda::is_available() ||
       options.decode_device >= static_cast<int>(torch::cuda::device_count()))) {
    return FailedPreconditionError(
        "loader: batches on cuda:" + std::to_string(options.decode_device) +
        " need a CUDA-enabled LibTorch and that GPU visible");
  }
  if (dataset->shape().numel() <= 0)
    return InvalidArgumentError("loader: dataset has an empty sample shape");
  SamplerConfig config;
  config.dataset_size = dataset->size();
  config.global_batch = options.global_batch;
  config.seed = options.seed;
  config.drop_last = options.drop_last;
  config.split_unit = options.split_unit;
  RETORT_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Create(config));
  return std::unique_ptr<Loader>(new Loader(std::move(dataset), options, std::move(sampler)));
}

Loader::Loader(std::shared_ptr<const Dataset> dataset, const LoaderOptions& options,
               Sampler sampler)
    : dataset_(std::move(dataset)),
      options_(options),
      sampler_(std::move(sampler)),
      sample_numel_(dataset_->shape().numel()) {
  threads_.reserve(static_cast<size_t>(options_.num_threads));
  for (int i = 0; i < options_.num_threads; ++i) threads_.emplace_back([this] { DecodeLoop(); });
}

Loader::~Loader() {
  {
    MutexLock lock(mu_);
    stop_ = true;
    jobs_.clear();
  }
  work_cv_.NotifyAll();
  for (std::thread& t : threads_) t.join();
}

Status Loader::Seek(SamplerState state, int rank, int world_size) {
  if (state.epoch < 0 || state.step < 0 || state.step >= sampler_.steps_per_epoch()) {
    return InvalidArgumentError("loader: position (epoch " + std::to_string(state.epoch) +
                                ", step " + std::to_string(state.step) +
                                ") outside the schedule of " +
                                std::to_string(sampler_.steps_per_epoch()) + " steps per epoch");
  }
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return InvalidArgumentError("loader: rank " + std::to_string(rank) + " of world_size " +
                                std::to_string(world_size) + " is out of range");
  }
  MutexLock lock(mu_);
  // Jobs in flight keep their tensors alive through the decode threads' references; their
  // results are simply dropped.
  jobs_.clear();
  seeked_ = true;
  position_ = state;
  rank_ = rank;
  world_size_ = world_size;
  plan_cursor_ = state;
  shares_.clear();
  pending_shares_.clear();
  pending_from_ = -1;
  RETORT_RETURN_IF_ERROR(RefillLocked());
  work_cv_.NotifyAll();
  return Status::Ok();
}

Status Loader::SetShares(int64_t from_step, std::vector<int64_t> shares) {
  if (!seeked_) return FailedPreconditionError("loader: SetShares before Seek");
  if (!shares.empty()) {
    RETORT_RETURN_IF_ERROR(ValidateBatchShares(shares, sampler_.config().global_batch,
                                               sampler_.config().split_unit, world_size_));
  }
  MutexLock lock(mu_);
  const int64_t planned_until = sampler_.GlobalStep(plan_cursor_);
  if (from_step < planned_until)
    return FailedPreconditionError("loader: shares from step " + std::to_string(from_step) +
                                   ", but steps up to " + std::to_string(planned_until) +
                                   " are planned already");
  pending_shares_ = std::move(shares);
  pending_from_ = from_step;
  return Status::Ok();
}

Status Loader::RefillLocked() {
  const SampleShape shape = dataset_->shape();
  while (static_cast<int>(jobs_.size()) < options_.prefetch_depth) {
    if (pending_from_ >= 0 && sampler_.GlobalStep(plan_cursor_) >= pending_from_) {
      shares_ = std::move(pending_shares_);
      pending_shares_.clear();
      pending_from_ = -1;
    }
    RETORT_ASSIGN_OR_RETURN(RankSlice slice, sampler_.Slice(plan_cursor_.epoch, plan_cursor_.step,
                                                            rank_, world_size_, shares_));
    auto job = std::make_shared<Job>();
    const int64_t n = slice.size();
    job->seeds.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      job->seeds[static_cast<size_t>(i)] =
          options_.augment
              ? AugmentationSeed(options_.seed, slice.epoch, slice.indices[static_cast<size_t>(i)])
              : 0;
    }
    job->used_indices = slice.indices;
    job->used_seeds = job->seeds;
    const auto pinned = torch::TensorOptions().pinned_memory(options_.pin_memory);
    const auto image_options =
        options_.decode_device >= 0
            ? torch::TensorOptions().device(torch::kCUDA, options_.decode_device)
            : pinned;
    job->images = torch::empty({n, shape.channels, shape.height, shape.width},
                               image_options.dtype(torch::kFloat32));
    job->labels = torch::empty({n}, pinned.dtype(torch::kInt64));
    if (options_.allocation_event && DecodesOnDevice()) {
      RETORT_ASSIGN_OR_RETURN(job->allocated, options_.allocation_event());
    } else if (options_.decode_device >= 0) {
      RETORT_ASSIGN_OR_RETURN(job->allocated, RecordAllocationEvent(options_.decode_device));
    }
    job->image_data = job->images.data_ptr<float>();
    job->label_data = job->labels.data_ptr<int64_t>();
    // Chunks small enough to spread one batch over all threads, large enough to amortise the
    // lock for tiny samples (Fashion-MNIST decodes in about a microsecond).
    job->chunk = std::clamp<int64_t>(n / (4 * options_.num_threads), 1, 64);
    job->slice = std::move(slice);
    jobs_.push_back(std::move(job));
    plan_cursor_ = sampler_.Advance(plan_cursor_);
  }
  return Status::Ok();
}

bool Loader::KnownCorrupt(int64_t index) {
  MutexLock lock(corrupt_mu_);
  return corrupt_.count(index) != 0;
}

void Loader::MarkCorrupt(int64_t index) {
  MutexLock lock(corrupt_mu_);
  corrupt_.insert(index);
}

Status Loader::DecodeSlot(Job& job, int64_t slot, DeviceDecoder* decoder,
                          std::vector<float>* scratch, const Status* first_attempt) {
  const auto s = static_cast<size_t>(slot);
  float* out = job.image_data + slot * sample_numel_;
  int64_t* label = job.label_data + slot;
  const int64_t original = job.slice.indices[s];
  const int64_t n = dataset_->size();
  const int tries = options_.skip_corrupt ? options_.max_replacements + 1 : 1;
  Status first_error;
  for (int attempt = 0; attempt < tries && attempt < n; ++attempt) {
    const int64_t index = (original + attempt) % n;
    if (attempt > 0 && KnownCorrupt(index)) continue;
    const uint64_t seed =
        attempt == 0
            ? job.seeds[s]
            : (options_.augment ? AugmentationSeed(options_.seed, job.slice.epoch, index) : 0);
    Status status;
    if (attempt == 0 && first_attempt != nullptr) {
      status = *first_attempt;
    } else {
      try {
        status = decoder != nullptr
                     ? dataset_->GetOnDevice(index, seed, out, label, *decoder, scratch)
                     : dataset_->Get(index, seed, out, label);
      } catch (const std::exception& e) {
        return InternalError(dataset_->SampleName(original) +
                             ": exception while decoding: " + e.what());
      }
    }
    if (status.ok()) {
      job.used_indices[s] = index;
      job.used_seeds[s] = seed;
      if (attempt > 0) {
        MutexLock lock(mu_);
        ++job.replaced;
      }
      return Status::Ok();
    }
    const bool skippable =
        status.code() == StatusCode::kDataLoss || status.code() == StatusCode::kNotFound;
    if (!options_.skip_corrupt || !skippable) {
      return status.WithContext("sample " + std::to_string(index) + " (epoch " +
                                std::to_string(job.slice.epoch) + ", step " +
                                std::to_string(job.slice.step) + ")");
    }
    if (attempt == 0) first_error = status;
    MarkCorrupt(index);
    LOG_WARN("data") << "skipping unreadable sample " << index << ": " << status.message();
  }
  return DataLossError("no readable replacement within " +
                       std::to_string(options_.max_replacements) + " samples after sample " +
                       std::to_string(original) + " (epoch " + std::to_string(job.slice.epoch) +
                       ", step " + std::to_string(job.slice.step) +
                       "); first error: " + first_error.message());
}

Status Loader::DecodeChunkOnDevice(Job& job, int64_t begin, int64_t end, DeviceDecoder& decoder,
                                   std::vector<float>* scratch) {
  std::vector<DeviceSample> samples;
  samples.reserve(static_cast<size_t>(end - begin));
  for (int64_t slot = begin; slot < end; ++slot) {
    const auto s = static_cast<size_t>(slot);
    samples.push_back(DeviceSample{job.slice.indices[s], job.seeds[s],
                                   job.image_data + slot * sample_numel_, job.label_data + slot});
  }
  std::vector<Status> statuses;
  try {
    dataset_->GetChunkOnDevice(samples, decoder, scratch, &statuses);
  } catch (const std::exception&) {
    // Slot by slot instead: the sample that throws reports its exception by name.
    statuses.clear();
  }
  for (int64_t slot = begin; slot < end; ++slot) {
    const auto k = static_cast<size_t>(slot - begin);
    if (k < statuses.size() && statuses[k].ok()) continue;
    RETORT_RETURN_IF_ERROR(
        DecodeSlot(job, slot, &decoder, scratch, k < statuses.size() ? &statuses[k] : nullptr));
  }
  return Status::Ok();
}

void Loader::DecodeLoop() {
  // This thread's device first (trainer/device.h): the decoder, pinned memory and LibTorch's
  // CUDA calls below all use the thread's current device. A failure is every batch's error.
  const int cuda_device = options_.cuda_device >= 0 ? options_.cuda_device : options_.decode_device;
  const Status selected =
      SelectThreadDevice(cuda_device, options_.device_selector, "loader: decode thread");
  // This thread's device decoder (dataset.decode gpu), made on first use; a failure to make one
  // is every batch's error.
  std::unique_ptr<DeviceDecoder> decoder;
  Status decoder_error = selected;
  std::vector<float> scratch;
  auto device_decoder = [&]() -> StatusOr<DeviceDecoder*> {
    if (decoder == nullptr && decoder_error.ok()) {
      auto made = options_.device_decoder_factory ? options_.device_decoder_factory()
                                                  : CreateNvjpegDecoder(options_.decode_device);
      if (made.ok())
        decoder = std::move(*made);
      else
        decoder_error = made.status();
    }
    if (!decoder_error.ok()) return decoder_error;
    return decoder.get();
  };
  MutexLock lock(mu_);
  while (!stop_) {
    std::shared_ptr<Job> job;
    for (const auto& candidate : jobs_) {
      if (candidate->next < candidate->size()) {
        job = candidate;
        break;
      }
    }
    if (!job) {
      work_cv_.WaitFor(mu_, std::chrono::milliseconds(100));
      continue;
    }
    const int64_t begin = job->next;
    const int64_t end = std::min(job->size(), begin + job->chunk);
    job->next = end;
    ++job->in_flight;
    lock.Unlock();
    Status status = selected;
    DeviceDecoder* on_device = nullptr;
    if (status.ok() && DecodesOnDevice()) {
      auto d = device_decoder();
      if (d.ok())
        on_device = *d;
      else
        status = d.status();
    }
    // DecodeSlot turns a throwing dataset into the batch's error; this catches the rest (an
    // allocation failure), so no exception leaves a decode thread.
    try {
      // The batch's memory may still be read on the consumer's stream: this decoder's writes
      // wait there first (on the device).
      if (status.ok() && on_device != nullptr && job->allocated != nullptr)
        status = on_device->OrderAfter(*job->allocated);
      if (status.ok() && on_device != nullptr) {
        status = DecodeChunkOnDevice(*job, begin, end, *on_device, &scratch);
      } else {
        for (int64_t slot = begin; slot < end && status.ok(); ++slot)
          status = DecodeSlot(*job, slot, on_device, &scratch);
      }
    } catch (const std::exception& e) {
      status = InternalError(std::string("loader: exception while decoding: ") + e.what());
    }
    lock.Lock();
    --job->in_flight;
    if (!status.ok() && job->error.ok()) {
      job->error = status;
      job->next = job->size();  // abandon the rest of this batch
    }
    if (job->complete()) done_cv_.NotifyAll();
  }
}

StatusOr<Batch> Loader::Next(Deadline deadline) {
  const auto start = SteadyClock::now();
  if (!seeked_) return FailedPreconditionError("loader: Next() before Seek()");
  std::shared_ptr<Job> job;
  Status error;
  {
    MutexLock lock(mu_);
    RETORT_RETURN_IF_ERROR(RefillLocked());
    job = jobs_.front();
    while (!job->complete()) {
      if (deadline.IsNever()) {
        done_cv_.Wait(mu_);
      } else if (done_cv_.WaitUntil(mu_, deadline.when()) == std::cv_status::timeout &&
                 !job->complete()) {
        const double waited = std::chrono::duration<double>(SteadyClock::now() - start).count();
        consumer_stats_.last_wait_seconds = waited;
        consumer_stats_.total_wait_seconds += waited;
        return DeadlineExceededError(
            "loader: batch of epoch " + std::to_string(job->slice.epoch) + " step " +
            std::to_string(job->slice.step) + " not decoded within the deadline (" +
            std::to_string(job->next) + " of " + std::to_string(job->size()) +
            " samples claimed, " + std::to_string(job->in_flight) + " chunks in progress)");
      }
    }
    jobs_.pop_front();
    replaced_samples_ += job->replaced;
    error = job->error;
    position_ = sampler_.Advance(position_);
    RETORT_RETURN_IF_ERROR(RefillLocked());
  }
  work_cv_.NotifyAll();
  const double waited = std::chrono::duration<double>(SteadyClock::now() - start).count();
  consumer_stats_.last_wait_seconds = waited;
  consumer_stats_.total_wait_seconds += waited;
  if (!error.ok()) return error;

  Batch batch;
  batch.images = std::move(job->images);
  batch.labels = std::move(job->labels);
  batch.sample_indices = std::move(job->used_indices);
  batch.augmentation_seeds = std::move(job->used_seeds);
  batch.epoch = job->slice.epoch;
  batch.step = job->slice.step;
  batch.position_in_step = job->slice.begin - job->slice.step * sampler_.config().global_batch;
  batch.weight = job->slice.weight;
  ++consumer_stats_.batches;
  consumer_stats_.samples += static_cast<int64_t>(batch.sample_indices.size());
  return batch;
}

LoaderStats Loader::stats() const {
  LoaderStats stats = consumer_stats_;
  {
    MutexLock lock(mu_);
    stats.replaced_samples = replaced_samples_;
  }
  MutexLock lock(corrupt_mu_);
  stats.corrupt_samples = static_cast<int64_t>(corrupt_.size());
  return stats;
}

}  // namespace retort::trainer::data
