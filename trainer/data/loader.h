// The data loader: a pool of decode threads filling a bounded queue of upcoming batches, in
// step order, for one rank of one generation. What each step contains is decided by the
// Sampler (trainer/data/sampler.h) from (epoch, step, rank, world_size) only, so the consumer
// can change rank/world size at any step boundary with Seek(position(), new_rank, new_world).
//
// Batches are produced in place: the loader allocates the batch tensors when it plans a step
// and decode threads write each sample straight into its row (no per-sample copies).
//
// Threading: one consumer thread calls Seek/Next/position/stats (not thread-safe among
// themselves); `num_threads` internal decode threads. Every wait is bounded: Next() takes a
// Deadline, idle decode threads re-check for shutdown every 100 ms. The destructor stops and
// joins the decode threads (each finishes at most its current sample).
//
// Errors: a failing sample (missing/corrupt file, ...) surfaces on the Next() that would have
// returned its batch, as a Status naming the sample (file path) and its (epoch, step). That step
// is consumed (position() moves past it); Seek() back to retry it. With skip_corrupt, a sample
// whose Get() fails with DataLoss or NotFound is replaced by the next valid index (index + 1,
// + 2, ... modulo the dataset size, at most max_replacements tries) so batch shapes stay fixed;
// Batch::sample_indices then lists the index actually used, and stats() counts replacements.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "common/deadline.h"
#include "common/mutex.h"
#include "common/status.h"
#include "trainer/data/batch.h"
#include "trainer/data/dataset.h"
#include "trainer/data/sampler.h"

namespace retort::trainer {
class DeviceSelector;
}  // namespace retort::trainer

namespace retort::trainer::data {

struct LoaderOptions {
  int64_t global_batch = 0;  // fixed by the job, independent of world size
  uint64_t seed = 0;         // epoch permutations and augmentation seeds derive from it
  bool drop_last = true;     // see sampler.h
  int64_t split_unit = 1;    // see sampler.h (2 with batch mixing: pairs stay on one rank)
  bool augment = true;       // false: augmentation seed 0 (eval transform) for every sample
  int num_threads = 4;       // decode threads, >= 1
  int prefetch_depth = 2;    // batches planned ahead (including the next one), >= 1
  bool skip_corrupt = false;
  int max_replacements = 64;  // bound on the search for a valid replacement sample
  // Allocate batch tensors in page-locked host memory so that the step's copy to the GPU can be
  // asynchronous (non_blocking). Needs a CUDA-enabled LibTorch with a visible device: Create()
  // returns FailedPrecondition otherwise.
  bool pin_memory = false;
  // >= 0: batches live in the memory of CUDA device `decode_device` and every sample is decoded
  // there (Dataset::GetOnDevice, one DeviceDecoder per decode thread: nvJPEG for image
  // folders, CPU decoding and an upload otherwise). Needs a CUDA-enabled LibTorch and the
  // device: Create() returns FailedPrecondition otherwise. -1: host memory.
  // Streams: a batch is finished (its decoders synchronised their own streams) when Next()
  // returns it, so work on any stream may read it. Its memory comes from PyTorch's caching
  // allocator on the consumer's current stream (in Seek/Next, on the consumer's thread), and
  // an AllocationEvent recorded there right after orders every decoder's writes to it
  // (DeviceDecoder::OrderAfter): a kernel still reading the memory of a dropped batch finishes
  // before a later batch is decoded into it, without the consumer synchronising. No
  // recordStream is needed for the decoders' streams: each decoder waits for its own writes
  // before it lets go of the batch (an abandoned batch too), so when the allocator gets the
  // memory back only the consumer's stream can still use it.
  int decode_device = -1;
  // Records the AllocationEvent of a device batch (decode_device >= 0 or a
  // device_decoder_factory), called on the consumer's thread right after the allocation; an
  // error is Seek's or Next's. Empty: RecordAllocationEvent(decode_device) when decode_device >=
  // 0, none otherwise. Tests pass a recording one.
  std::function<StatusOr<std::shared_ptr<const AllocationEvent>>()> allocation_event;
  // The worker's CUDA device (-1: none; a CPU worker). Every decode thread selects it through
  // `device_selector` (null: the CUDA runtime's, trainer/device.h) before anything else, so
  // that no thread of a worker on cuda:N creates a context on device 0; a failed selection is
  // every batch's error. Defaults to decode_device when that is set and this is not.
  int cuda_device = -1;
  DeviceSelector* device_selector = nullptr;  // borrowed; outlives the loader
  // Makes each decode thread's DeviceDecoder. Empty: nvJPEG on decode_device. Tests pass a
  // host-memory decoder with decode_device -1: the device path with batches in host memory.
  std::function<StatusOr<std::unique_ptr<DeviceDecoder>>()> device_decoder_factory;
};

struct LoaderStats {
  int64_t batches = 0;            // returned by Next() successfully
  int64_t samples = 0;            // samples in those batches
  int64_t replaced_samples = 0;   // sample slots filled by a replacement (skip_corrupt)
  int64_t corrupt_samples = 0;    // distinct dataset indices found unreadable (skip_corrupt)
  double last_wait_seconds = 0;   // time the last Next() blocked waiting for its batch
  double total_wait_seconds = 0;  // sum over all Next() calls
};

class Loader {
 public:
  // InvalidArgument for bad options (via the Sampler as well). Starts the decode threads; no
  // work is planned until Seek().
  static StatusOr<std::unique_ptr<Loader>> Create(std::shared_ptr<const Dataset> dataset,
                                                  const LoaderOptions& options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Discards everything planned and plans from `state` for `rank` of `world_size`. The next
  // Next() returns step `state`. InvalidArgument for a state outside the schedule or a bad rank.
  Status Seek(SamplerState state, int rank, int world_size);

  // From global step `from_step` (Sampler::GlobalStep) on, full batches are split among the
  // ranks by `shares` (ValidateBatchShares; empty: evenly again) instead of evenly, until the
  // next Seek(), which returns to the even split. Every rank of a generation must make the same
  // calls (the slices tile the batch only then). FailedPrecondition when a step from
  // `from_step` on is planned already: leave at least prefetch_depth steps of lead after the
  // step the next Next() returns. A later call replaces one not yet in effect.
  Status SetShares(int64_t from_step, std::vector<int64_t> shares);

  // This rank's slice of the step at position(), then advances position(). DeadlineExceeded
  // (the step stays next) when it is not decoded in time; FailedPrecondition before Seek().
  StatusOr<Batch> Next(Deadline deadline);

  // The step the next Next() returns.
  SamplerState position() const { return position_; }
  const Sampler& sampler() const { return sampler_; }
  int prefetch_depth() const { return options_.prefetch_depth; }
  LoaderStats stats() const;

 private:
  struct Job;
  Loader(std::shared_ptr<const Dataset> dataset, const LoaderOptions& options, Sampler sampler);

  void DecodeLoop() RETORT_EXCLUDES(mu_);
  // Plans jobs from plan_cursor_ until prefetch_depth are queued.
  Status RefillLocked() RETORT_REQUIRES(mu_);
  // Decodes one sample slot of `job` (with replacement when skip_corrupt).
  // `decoder` (may be null: Dataset::Get into host memory) and `scratch` are the calling
  // decode thread's. `first_attempt`, when not null, is the result of decoding the slot's own
  // sample already (the device chunk path): it stands for the first attempt instead of decoding
  // the sample again. An exception from the dataset becomes the returned error, naming the
  // slot's sample (a throwing dataset must not take the process down from a decode thread).
  Status DecodeSlot(Job& job, int64_t slot, DeviceDecoder* decoder, std::vector<float>* scratch,
                    const Status* first_attempt = nullptr);
  // Decodes slots [begin, end) of `job` on the device: the dataset's GetChunkOnDevice for all of
  // them (one batch for the device decoder), then DecodeSlot for each slot that failed, so
  // replacements and errors are exactly those of decoding slot by slot. Stops at the first
  // error, which it returns.
  Status DecodeChunkOnDevice(Job& job, int64_t begin, int64_t end, DeviceDecoder& decoder,
                             std::vector<float>* scratch);
  bool DecodesOnDevice() const {
    return options_.decode_device >= 0 || static_cast<bool>(options_.device_decoder_factory);
  }
  bool KnownCorrupt(int64_t index) RETORT_EXCLUDES(corrupt_mu_);
  void MarkCorrupt(int64_t index) RETORT_EXCLUDES(corrupt_mu_);

  const std::shared_ptr<const Dataset> dataset_;
  const LoaderOptions options_;
  const Sampler sampler_;
  const int64_t sample_numel_;

  // Consumer-side state (consumer thread only).
  bool seeked_ = false;
  SamplerState position_;
  int rank_ = 0;
  int world_size_ = 1;

  mutable Mutex mu_;
  CondVar work_cv_;  // decode threads: work queued or stop
  CondVar done_cv_;  // consumer: a job finished
  bool stop_ RETORT_GUARDED_BY(mu_) = false;
  std::deque<std::shared_ptr<Job>> jobs_ RETORT_GUARDED_BY(mu_);  // in step order
  SamplerState plan_cursor_ RETORT_GUARDED_BY(mu_);               // next step to plan
  // The shares jobs are planned with (empty: even), and the next ones from pending_from_ on.
  std::vector<int64_t> shares_ RETORT_GUARDED_BY(mu_);
  std::vector<int64_t> pending_shares_ RETORT_GUARDED_BY(mu_);
  int64_t pending_from_ RETORT_GUARDED_BY(mu_) = -1;  // -1: none pending
  int64_t replaced_samples_ RETORT_GUARDED_BY(mu_) = 0;
  LoaderStats consumer_stats_;  // consumer thread only

  mutable Mutex corrupt_mu_;
  std::set<int64_t> corrupt_ RETORT_GUARDED_BY(corrupt_mu_);

  std::vector<std::thread> threads_;
};

}  // namespace retort::trainer::data
