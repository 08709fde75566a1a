// The worker's loader options (worker/job_setup.h MakeLoaderOptions): batches are pinned exactly
// when the worker trains on a CUDA device, so the step's non_blocking host-to-device copy is
// asynchronous there; a CPU worker's loader is made and runs without CUDA.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "worker/job_setup.h"

namespace retort::worker {
namespace {

v1::JobSpec SyntheticJob() {
  v1::JobSpec job;
  job.set_global_batch(8);
  job.set_seed(3);
  job.mutable_dataset()->set_kind("synthetic");
  job.mutable_dataset()->set_image_size(8);
  job.mutable_dataset()->set_num_classes(4);
  job.mutable_dataset()->set_synthetic_samples(32);
  return job;
}

TEST(LoaderOptionsTest, PinnedExactlyOnCudaDevices) {
  const v1::JobSpec job = SyntheticJob();
  EXPECT_FALSE(MakeLoaderOptions(job, true, "cpu", -1).pin_memory);
  EXPECT_TRUE(MakeLoaderOptions(job, true, "cuda:0", -1).pin_memory);
  EXPECT_TRUE(MakeLoaderOptions(job, true, "cuda:1", -1).pin_memory);
  // Decoded on the GPU: the images live there; the labels stay on the host, pinned.
  const auto on_device = MakeLoaderOptions(job, true, "cuda:1", 1);
  EXPECT_TRUE(on_device.pin_memory);
  EXPECT_EQ(on_device.decode_device, 1);
}

TEST(LoaderOptionsTest, DecodeThreadsSelectTheWorkersDevice) {
  const v1::JobSpec job = SyntheticJob();
  EXPECT_EQ(MakeLoaderOptions(job, true, "cpu", -1).cuda_device, -1);
  EXPECT_EQ(MakeLoaderOptions(job, true, "cuda:0", -1).cuda_device, 0);
  // Decoded on the host for a worker on cuda:3: its threads still select cuda:3 (pinned
  // memory and the step's copies would otherwise make a context on device 0).
  EXPECT_EQ(MakeLoaderOptions(job, true, "cuda:3", -1).cuda_device, 3);
  EXPECT_EQ(MakeLoaderOptions(job, true, "cuda:3", 3).cuda_device, 3);
}

StatusOr<trainer::Batch> FirstBatch(const std::string& device) {
  const v1::JobSpec job = SyntheticJob();
  RETORT_ASSIGN_OR_RETURN(auto dataset, OpenDataset(job, /*train=*/true));
  RETORT_ASSIGN_OR_RETURN(auto loader, trainer::data::Loader::Create(
                                           dataset, MakeLoaderOptions(job, true, device, -1)));
  RETORT_RETURN_IF_ERROR(loader->Seek(trainer::data::SamplerState{}, 0, 1));
  return loader->Next(Deadline::AfterMs(10000));
}

TEST(LoaderOptionsTest, CpuWorkerBatchesAreNotPinned) {
  auto batch = FirstBatch("cpu");
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->images.size(0), 8);
  EXPECT_FALSE(batch->images.is_pinned());
}

TEST(LoaderOptionsTest, CudaWorkerBatchesArePinned) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  auto batch = FirstBatch("cuda:0");
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_TRUE(batch->images.is_pinned());
  EXPECT_TRUE(batch->labels.is_pinned());
}

}  // namespace
}  // namespace retort::worker
