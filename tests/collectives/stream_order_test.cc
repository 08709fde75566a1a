// How the compositions order device work on streams (ready_event.h), on the CPU through the
// recording fakes (recording_device.h): the ready event recorded when the caller issued an
// operation reaches every sub-operation and copy the composition runs later on its executor;
// the hierarchical device packing is stream-ordered copies with one wait; a staged operation's
// copies wait for the caller's event; Work::StreamWait is device-side only where the Work has
// a done event.
#include <gtest/gtest.h>

#include <vector>

#include "collectives/hierarchical.h"
#include "collectives/staged.h"
#include "tests/collectives/fake_device.h"
#include "tests/collectives/recording_device.h"

namespace retort::collectives::testing {
namespace {

using Calls = std::vector<std::string>;

// Rank 0 of two nodes of two ranks, node-major ({0, 0, 1, 1}: the device path packs), every
// level a recording fake.
std::unique_ptr<HierarchicalCommunicator> RecordingHierarchy(CallLog* log) {
  auto h = HierarchicalCommunicator::Create(
      NodeLayout{{0, 0, 1, 1}}, 0, 1, std::make_unique<RecordingComm>("intra", 0, 2, log),
      std::make_unique<RecordingComm>("inter", 0, 2, log),
      std::make_unique<RecordingComm>("global", 0, 4, log), std::chrono::milliseconds(5000),
      ProgressMode::kBackgroundThread, std::make_unique<RecordingScratch>(log));
  EXPECT_TRUE(h.ok()) << h.status();
  return std::move(h).value();
}

TEST(StreamOrderTest, HierarchicalSubOperationsWaitForTheEventRecordedAtIssue) {
  CallLog log;
  RecordingEvents trainer_stream(&log);
  auto h = RecordingHierarchy(&log);
  std::vector<float> grads(8, 1.f), out(2, 0.f);
  const std::vector<size_t> counts{2, 2, 2, 2};
  // Two buckets issued from "hooks", each with the event recorded at its hook; the host runs
  // ahead and records more (later backward kernels) before the executor gets to the first.
  std::vector<WorkPtr> works;
  for (int bucket = 0; bucket < 2; ++bucket) {
    CollectiveOptions o;
    o.ready = trainer_stream.RecordReady().value();
    works.push_back(h->ReduceScatterV(
        {grads.data(), 8, DataType::kFloat32, MemoryKind::kCudaDevice},
        {out.data(), 2, DataType::kFloat32, MemoryKind::kCudaDevice}, counts, ReduceOp::kSum, o));
    ASSERT_TRUE(trainer_stream.RecordReady().ok());  // later kernels of the backward
  }
  for (auto& w : works) ASSERT_TRUE(w->Wait(Deadline::AfterMs(5000)).ok());
  Calls calls = log.Take();
  // The recordings happen on this thread and may interleave with the executor's calls; the
  // executor's calls, in order, must name the events recorded at issue: 1 and 3.
  Calls executor;
  for (const std::string& c : calls)
    if (c.rfind("record", 0) != 0) executor.push_back(c);
  const Calls expected = {
      // bucket 0: packing (ranks 1 and 2 swap places): stream-ordered, one wait
      "scratch after 1", "scratch copy", "scratch copy", "scratch copy", "scratch copy",
      "scratch wait", "intra reduce_scatter ready=1", "inter reduce_scatter ready=1",
      // bucket 1
      "scratch after 3", "scratch copy", "scratch copy", "scratch copy", "scratch copy",
      "scratch wait", "intra reduce_scatter ready=3", "inter reduce_scatter ready=3"};
  EXPECT_EQ(executor, expected);
}

TEST(StreamOrderTest, HierarchicalUnpackIsOrderedCopiesWithOneWait) {
  CallLog log;
  auto h = RecordingHierarchy(&log);
  std::vector<float> params(8, 1.f);
  CollectiveOptions o;
  o.ready = std::make_shared<FakeReadyEvent>(42);
  ASSERT_TRUE(h->AllGatherV({params.data(), 2, DataType::kFloat32, MemoryKind::kCudaDevice},
                            {params.data(), 8, DataType::kFloat32, MemoryKind::kCudaDevice},
                            {2, 2, 2, 2}, o)
                  ->Wait(Deadline::AfterMs(5000))
                  .ok());
  const Calls expected = {"inter all_gather ready=42",
                          "intra all_gather ready=42",
                          "scratch after 42",
                          "scratch copy",
                          "scratch copy",
                          "scratch copy",
                          "scratch copy",
                          "scratch wait"};
  EXPECT_EQ(log.Take(), expected);
}

TEST(StreamOrderTest, WithoutAReadyEventTheCompositionOrdersAfterTheCallerWhenItRuns) {
  CallLog log;
  auto h = RecordingHierarchy(&log);
  std::vector<float> grads(8, 1.f), out(2, 0.f);
  ASSERT_TRUE(h->ReduceScatterV({grads.data(), 8, DataType::kFloat32, MemoryKind::kCudaDevice},
                                {out.data(), 2, DataType::kFloat32, MemoryKind::kCudaDevice},
                                {2, 2, 2, 2}, ReduceOp::kSum)
                  ->Wait(Deadline::AfterMs(5000))
                  .ok());
  Calls calls = log.Take();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.front(), "scratch after caller");
  EXPECT_EQ(calls.back(), "inter reduce_scatter ready=none");
}

TEST(StreamOrderTest, StagedCopiesAndInnerOperationsWaitForTheReadyEvent) {
  CallLog log;
  auto owned = std::make_unique<ThreadCopier>(ThreadCopier::Options{});
  ThreadCopier* copier = owned.get();
  auto staged = StagedCommunicator::Create(std::make_unique<RecordingComm>("ucx", 0, 1, &log),
                                           std::move(owned));
  ASSERT_TRUE(staged.ok()) << staged.status();
  std::vector<float> data(16, 1.f);
  CollectiveOptions o;
  o.ready = std::make_shared<FakeReadyEvent>(7);
  ASSERT_TRUE((*staged)
                  ->AllReduce({data.data(), 16, DataType::kFloat32, MemoryKind::kCudaDevice},
                              ReduceOp::kSum, o)
                  ->Wait(Deadline::AfterMs(5000))
                  .ok());
  EXPECT_EQ(copier->issue_log(), "A7HD");
  EXPECT_EQ(log.Take(), Calls{"ucx all_reduce ready=7"});
  // Without one: after the caller's stream when the executor starts the operation.
  ASSERT_TRUE((*staged)
                  ->AllReduce({data.data(), 16, DataType::kFloat32, MemoryKind::kCudaDevice},
                              ReduceOp::kSum)
                  ->Wait(Deadline::AfterMs(5000))
                  .ok());
  EXPECT_EQ(copier->issue_log(), "A7HDCHD");
}

TEST(StreamOrderTest, StreamWaitIsDeviceSideOnlyWithADoneEvent) {
  CallLog log;
  RecordingEvents consumer(&log);
  bool host_waited = false;
  // A Work completed on the host (no done event): the host waits and gets its status.
  WorkPtr host = CompletedWork("host op", UnavailableError("peer gone"));
  EXPECT_EQ(host->StreamWait(consumer, Deadline::AfterMs(100), &host_waited).code(),
            StatusCode::kUnavailable);
  EXPECT_TRUE(host_waited);
  EXPECT_TRUE(log.Take().empty());
  // A Work with a done event, still running: the consumer's stream waits for the event; the
  // host does not.
  auto device = std::make_shared<Work>("device op", Deadline::AfterMs(5000));
  device->SetDoneEvent(std::make_shared<FakeReadyEvent>(9));
  EXPECT_TRUE(device->StreamWait(consumer, Deadline::AfterMs(100), &host_waited).ok());
  EXPECT_FALSE(host_waited);
  EXPECT_EQ(log.Take(), Calls{"stream_wait 9"});
  EXPECT_FALSE(device->IsCompleted());
  device->Complete(Status::Ok());
}

}  // namespace
}  // namespace retort::collectives::testing
