// The device seams of the trainer on the CPU.
// C3: every thread of the trainer that touches CUDA selects the worker's device
// first, through the DeviceSelector seam (trainer/device.h), so that on a node where each
// worker sees every GPU no thread makes a context on device 0. A recording selector stands for
// the CUDA runtime's and notes which thread selected which device: the loader's decode threads
// each select the worker's device once, before their first decode (also when batches decode on
// the host), a failed selection is every batch's error, the KD step selects its device where
// it is created (on the creating thread), and the CUDA runtime's selector refuses a device that
// is not there.
// M4: a device batch's memory comes from the caching allocator on the consumer's stream and is
// written on the decoders' streams: each decoder orders its writes after the batch's allocation
// event (recorded on the consumer's thread right after the allocation) before it writes a row.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "tests/trainer/trainer_test_util.h"
#include "trainer/data/dataset.h"
#include "trainer/data/device_decoder.h"
#include "trainer/data/loader.h"
#include "trainer/device.h"
#include "trainer/flat_parameters.h"
#include "trainer/kd_step.h"
#include "trainer/models/vit.h"
#include "trainer/testing/thread_shard_comm.h"

namespace retort::trainer {
namespace {

// Which thread selected which devices, in order; fails every selection with `failure` if set.
class RecordingSelector final : public DeviceSelector {
 public:
  explicit RecordingSelector(Status failure = Status::Ok()) : failure_(std::move(failure)) {}
  Status Select(int index) override {
    std::lock_guard<std::mutex> lock(mu_);
    selected_[std::this_thread::get_id()].push_back(index);
    return failure_;
  }
  // The devices `thread` selected, in order.
  std::vector<int> Of(std::thread::id thread) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = selected_.find(thread);
    return it == selected_.end() ? std::vector<int>{} : it->second;
  }
  std::map<std::thread::id, std::vector<int>> All() {
    std::lock_guard<std::mutex> lock(mu_);
    return selected_;
  }

 private:
  const Status failure_;
  std::mutex mu_;
  std::map<std::thread::id, std::vector<int>> selected_;
};

// One float per sample; notes, for every decode, whether its thread had selected `device`.
class ThreadCheckingDataset final : public data::Dataset {
 public:
  ThreadCheckingDataset(RecordingSelector* selector, int device)
      : selector_(selector), device_(device) {}
  int64_t size() const override { return 64; }
  data::SampleShape shape() const override { return {1, 1, 1}; }
  int num_classes() const override { return 2; }
  Status Get(int64_t index, uint64_t, float* out, int64_t* label) const override {
    const std::vector<int> selected = selector_->Of(std::this_thread::get_id());
    std::lock_guard<std::mutex> lock(mu_);
    decoding_threads_.insert(std::this_thread::get_id());
    if (selected != std::vector<int>{device_}) ++decodes_without_device_;
    *out = static_cast<float>(index);
    *label = index % 2;
    return Status::Ok();
  }
  std::string SampleName(int64_t index) const override { return "s" + std::to_string(index); }
  int decodes_without_device() const {
    std::lock_guard<std::mutex> lock(mu_);
    return decodes_without_device_;
  }
  std::set<std::thread::id> decoding_threads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return decoding_threads_;
  }

 private:
  RecordingSelector* const selector_;
  const int device_;
  mutable std::mutex mu_;
  mutable int decodes_without_device_ = 0;
  mutable std::set<std::thread::id> decoding_threads_;
};

TEST(DeviceSelectTest, EveryDecodeThreadSelectsTheWorkersDeviceOnceBeforeItDecodes) {
  RecordingSelector selector;
  auto dataset = std::make_shared<ThreadCheckingDataset>(&selector, 3);
  data::LoaderOptions o;
  o.global_batch = 16;
  o.num_threads = 4;
  o.cuda_device = 3;  // a worker on cuda:3 whose batches decode on the host
  o.device_selector = &selector;
  {
    auto loader = data::Loader::Create(dataset, o);
    ASSERT_TRUE(loader.ok()) << loader.status();
    ASSERT_TRUE((*loader)->Seek(data::SamplerState{}, 0, 1).ok());
    for (int i = 0; i < 3; ++i) {
      auto batch = (*loader)->Next(Deadline::AfterMs(10000));
      ASSERT_TRUE(batch.ok()) << batch.status();
    }
  }  // joins the decode threads: every one has selected by now
  EXPECT_EQ(dataset->decodes_without_device(), 0);
  EXPECT_FALSE(dataset->decoding_threads().empty());
  const auto all = selector.All();
  EXPECT_EQ(all.size(), 4u);  // each decode thread, and no other (not the consumer: its own)
  EXPECT_EQ(all.count(std::this_thread::get_id()), 0u);
  for (const auto& [thread, devices] : all) EXPECT_EQ(devices, std::vector<int>{3});
}

TEST(DeviceSelectTest, AFailedSelectionIsEveryBatchsErrorAndNothingDecodes) {
  RecordingSelector selector(FailedPreconditionError("cuda:5 is gone"));
  auto dataset = std::make_shared<ThreadCheckingDataset>(&selector, 5);
  data::LoaderOptions o;
  o.global_batch = 8;
  o.num_threads = 2;
  o.cuda_device = 5;
  o.device_selector = &selector;
  auto loader = data::Loader::Create(dataset, o);
  ASSERT_TRUE(loader.ok()) << loader.status();
  ASSERT_TRUE((*loader)->Seek(data::SamplerState{}, 0, 1).ok());
  for (int i = 0; i < 2; ++i) {
    auto batch = (*loader)->Next(Deadline::AfterMs(10000));
    ASSERT_FALSE(batch.ok());
    EXPECT_EQ(batch.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(batch.status().message().find("cuda:5 is gone"), std::string::npos) << batch.status();
    EXPECT_NE(batch.status().message().find("decode thread"), std::string::npos) << batch.status();
  }
  EXPECT_TRUE(dataset->decoding_threads().empty());
}

TEST(DeviceSelectTest, ACpuLoaderSelectsNothing) {
  RecordingSelector selector;
  auto dataset = std::make_shared<ThreadCheckingDataset>(&selector, -1);
  data::LoaderOptions o;
  o.global_batch = 8;
  o.num_threads = 2;
  o.device_selector = &selector;
  auto loader = data::Loader::Create(dataset, o);
  ASSERT_TRUE(loader.ok()) << loader.status();
  ASSERT_TRUE((*loader)->Seek(data::SamplerState{}, 0, 1).ok());
  ASSERT_TRUE((*loader)->Next(Deadline::AfterMs(10000)).ok());
  EXPECT_TRUE(selector.All().empty());
}

TEST(DeviceSelectTest, TheKdStepSelectsItsDeviceWhereItIsCreated) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a GPU is visible; the step would train there";
  RecordingSelector selector;
  auto group = std::make_shared<testing::ThreadShardGroup>(1);
  testing::ThreadShardComm comm(group, 0);
  auto student = test::MustMake(MakeVit(test::TinyVit(16, 1), 7));
  const ShardPlan plan = MakeEvenShardPlan(FlatParameterCount(*student), 1);
  KdStepOptions options;
  options.loss.alpha = 0;
  options.device = torch::Device(torch::kCUDA, 2);
  options.device_selector = &selector;
  std::thread creator([&] {
    auto step = KdStep::Create(nullptr, std::move(student), &comm, plan, options);
    // Selected first; then, with no GPU here, the precise error.
    EXPECT_FALSE(step.ok());
    EXPECT_EQ(step.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(selector.Of(std::this_thread::get_id()), std::vector<int>{2});
  });
  creator.join();
  EXPECT_EQ(selector.All().size(), 1u);  // the creating thread only
  EXPECT_TRUE(selector.Of(std::this_thread::get_id()).empty());
  // A CPU step selects nothing.
  options.device = torch::kCPU;
  auto cpu_student = test::MustMake(MakeVit(test::TinyVit(16, 1), 7));
  auto cpu = KdStep::Create(nullptr, std::move(cpu_student), &comm, plan, options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(selector.All().size(), 1u);
}

TEST(DeviceSelectTest, AFailedSelectionStopsTheKdStepBeforeTheDeviceIsTouched) {
  RecordingSelector selector(FailedPreconditionError("no such device"));
  auto group = std::make_shared<testing::ThreadShardGroup>(1);
  testing::ThreadShardComm comm(group, 0);
  auto student = test::MustMake(MakeVit(test::TinyVit(16, 1), 7));
  const ShardPlan plan = MakeEvenShardPlan(FlatParameterCount(*student), 1);
  KdStepOptions options;
  options.loss.alpha = 0;
  options.device = torch::Device(torch::kCUDA, 7);
  options.device_selector = &selector;
  auto step = KdStep::Create(nullptr, std::move(student), &comm, plan, options);
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.status().message().find("no such device"), std::string::npos) << step.status();
  EXPECT_NE(step.status().message().find("cuda:7"), std::string::npos) << step.status();
}

TEST(DeviceSelectTest, TheCudaRuntimesSelectorRefusesADeviceThatIsNotThere) {
  const int visible = VisibleCudaDevices();
  Status s = CudaRuntimeSelector().Select(visible);  // one past the last
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("cuda:" + std::to_string(visible)), std::string::npos) << s;
  EXPECT_TRUE(SelectThreadDevice(-1, nullptr, "cpu").ok());  // the CPU: nothing to select
  Status named = SelectThreadDevice(visible, nullptr, "training thread");
  EXPECT_NE(named.message().find("training thread"), std::string::npos) << named;
  if (visible > 0) EXPECT_TRUE(CudaRuntimeSelector().Select(visible - 1).ok());
}

// M4: the batches' allocation events and the decode threads' calls, per thread in order.
struct StreamLog {
  struct Call {
    uint64_t after = 0;            // > 0: OrderAfter(event `after`)
    const float* wrote = nullptr;  // else: an Upload to this row
  };
  std::mutex mu;
  uint64_t events = 0;
  std::set<std::thread::id> recording_threads;
  std::map<std::thread::id, std::vector<Call>> calls;
};

class SerialEvent final : public data::AllocationEvent {
 public:
  explicit SerialEvent(uint64_t serial) : serial_(serial) {}
  void* native() const override { return nullptr; }
  uint64_t serial() const override { return serial_; }

 private:
  const uint64_t serial_;
};

// Host memory plays the device; every call lands in the log.
class OrderRecordingDecoder final : public data::DeviceDecoder {
 public:
  OrderRecordingDecoder(StreamLog* log, Status order_failure)
      : log_(log), order_failure_(std::move(order_failure)) {}
  Status OrderAfter(const data::AllocationEvent& allocated) override {
    std::lock_guard<std::mutex> lock(log_->mu);
    log_->calls[std::this_thread::get_id()].push_back({allocated.serial(), nullptr});
    return order_failure_;
  }
  Status DecodeJpeg(const uint8_t*, size_t, const data::SampleGeometry&, int,
                    const data::Normalization&, float*) override {
    return UnimplementedError("not a JPEG dataset");
  }
  Status Upload(const float* host, size_t floats, float* out) override {
    std::memcpy(out, host, floats * sizeof(float));
    std::lock_guard<std::mutex> lock(log_->mu);
    log_->calls[std::this_thread::get_id()].push_back({0, out});
    return Status::Ok();
  }

 private:
  StreamLog* const log_;
  const Status order_failure_;
};

data::LoaderOptions RecordingDeviceLoader(StreamLog* log, Status order_failure = Status::Ok(),
                                          Status event_failure = Status::Ok()) {
  data::LoaderOptions o;
  o.global_batch = 16;
  o.num_threads = 3;
  o.prefetch_depth = 2;
  o.device_decoder_factory = [log,
                              order_failure]() -> StatusOr<std::unique_ptr<data::DeviceDecoder>> {
    return std::unique_ptr<data::DeviceDecoder>(
        std::make_unique<OrderRecordingDecoder>(log, order_failure));
  };
  o.allocation_event = [log,
                        event_failure]() -> StatusOr<std::shared_ptr<const data::AllocationEvent>> {
    if (!event_failure.ok()) return event_failure;
    std::lock_guard<std::mutex> lock(log->mu);
    log->recording_threads.insert(std::this_thread::get_id());
    return std::shared_ptr<const data::AllocationEvent>(
        std::make_shared<SerialEvent>(++log->events));
  };
  return o;
}

TEST(DeviceBatchOrderTest, EveryRowIsWrittenAfterItsBatchsAllocationEvent) {
  StreamLog log;
  RecordingSelector selector;
  auto dataset = std::make_shared<ThreadCheckingDataset>(&selector, -1);
  std::vector<Batch> batches;  // kept, so that no two batches share memory
  {
    auto loader = data::Loader::Create(dataset, RecordingDeviceLoader(&log));
    ASSERT_TRUE(loader.ok()) << loader.status();
    ASSERT_TRUE((*loader)->Seek(data::SamplerState{}, 0, 1).ok());
    for (int i = 0; i < 4; ++i) {
      auto batch = (*loader)->Next(Deadline::AfterMs(10000));
      ASSERT_TRUE(batch.ok()) << batch.status();
      batches.push_back(std::move(*batch));
    }
  }
  // Recorded on the consumer's thread (where the batches were allocated), one per planned
  // batch, in step order: step k's event is k + 1.
  EXPECT_EQ(log.recording_threads, std::set<std::thread::id>{std::this_thread::get_id()});
  EXPECT_GE(log.events, 4u);
  auto serial_of = [&](const float* row) -> uint64_t {
    for (size_t k = 0; k < batches.size(); ++k) {
      const float* begin = batches[k].images.data_ptr<float>();
      if (row >= begin && row < begin + batches[k].images.numel()) return k + 1;
    }
    return 0;  // a batch planned ahead and dropped with the loader
  };
  int checked = 0;
  for (const auto& [thread, calls] : log.calls) {
    uint64_t last_after = 0;
    for (const StreamLog::Call& c : calls) {
      if (c.wrote == nullptr) {
        last_after = c.after;
        continue;
      }
      const uint64_t expected = serial_of(c.wrote);
      if (expected == 0) continue;
      EXPECT_EQ(last_after, expected)
          << "a row of step " << expected - 1 << " written without waiting for its allocation";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * 16);
  for (const Batch& b : batches)  // and the rows are the samples
    for (int64_t i = 0; i < b.images.size(0); ++i)
      EXPECT_EQ(b.images[i].item<float>(), static_cast<float>(b.sample_indices[i]));
}

TEST(DeviceBatchOrderTest, AFailedOrderingIsTheBatchsErrorAndNothingIsWritten) {
  StreamLog log;
  RecordingSelector selector;
  auto dataset = std::make_shared<ThreadCheckingDataset>(&selector, -1);
  auto loader = data::Loader::Create(
      dataset, RecordingDeviceLoader(&log, InternalError("stream wait failed")));
  ASSERT_TRUE(loader.ok()) << loader.status();
  ASSERT_TRUE((*loader)->Seek(data::SamplerState{}, 0, 1).ok());
  auto batch = (*loader)->Next(Deadline::AfterMs(10000));
  ASSERT_FALSE(batch.ok());
  EXPECT_NE(batch.status().message().find("stream wait failed"), std::string::npos)
      << batch.status();
  loader->reset();
  for (const auto& [thread, calls] : log.calls)
    for (const StreamLog::Call& c : calls) EXPECT_EQ(c.wrote, nullptr);
}

TEST(DeviceBatchOrderTest, AnEventThatCannotBeRecordedFailsTheSeek) {
  StreamLog log;
  RecordingSelector selector;
  auto dataset = std::make_shared<ThreadCheckingDataset>(&selector, -1);
  auto loader = data::Loader::Create(
      dataset, RecordingDeviceLoader(&log, Status::Ok(), InternalError("no events left")));
  ASSERT_TRUE(loader.ok()) << loader.status();
  Status s = (*loader)->Seek(data::SamplerState{}, 0, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no events left"), std::string::npos) << s;
}

TEST(DeviceBatchOrderTest, HostBatchesRecordNoEvent) {
  StreamLog log;
  RecordingSelector selector;
  auto dataset = std::make_shared<ThreadCheckingDataset>(&selector, -1);
  data::LoaderOptions o = RecordingDeviceLoader(&log);
  o.device_decoder_factory = nullptr;  // decoded into host memory: nothing to order
  auto loader = data::Loader::Create(dataset, o);
  ASSERT_TRUE(loader.ok()) << loader.status();
  ASSERT_TRUE((*loader)->Seek(data::SamplerState{}, 0, 1).ok());
  ASSERT_TRUE((*loader)->Next(Deadline::AfterMs(10000)).ok());
  EXPECT_EQ(log.events, 0u);
}

}  // namespace
}  // namespace retort::trainer
