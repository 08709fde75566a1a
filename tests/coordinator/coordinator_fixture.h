// The Coordinator test fixture: a coordinator on a temporary state dir with a fake clock, and
// helpers that play members (join, heartbeat, write and ack checkpoints).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "coordinator/coordinator.h"
#include "coordinator/job_spec.h"
#include "testing/subprocess.h"

namespace retort::coordinator {

class RecordingListener : public GenerationListener {
 public:
  void OnGeneration(std::shared_ptr<const v1::Generation> g) override { seen.push_back(g); }
  std::vector<std::shared_ptr<const v1::Generation>> seen;
};

inline v1::JobSpec TestJob(int min_workers = 1, int max_workers = 8) {
  v1::JobSpec job;
  job.set_name("test-job");
  job.mutable_teacher()->set_preset("fm-teacher");
  job.mutable_student()->set_preset("fm-student");
  job.set_steps(100);
  job.mutable_elastic()->set_min_workers(min_workers);
  job.mutable_elastic()->set_max_workers(max_workers);
  job.mutable_checkpoint()->set_keep(2);
  ApplyJobSpecDefaults(&job);  // a spec as the coordinator receives it (and validates on restore)
  return job;
}

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("retort_coord");
    opts_.state_dir = dir_ + "/state";
    opts_.settle_ms = 100;
    opts_.eviction_timeout_ms = 2000;
    opts_.heartbeat_interval_ms = 500;
    Restart(TestJob());
  }
  void Restart(std::optional<v1::JobSpec> job) {
    if (c_) c_->UnsubscribeGenerations(&listener_);
    c_.reset();
    auto c = Coordinator::Create(opts_, job, &clock_);
    ASSERT_TRUE(c.ok()) << c.status();
    c_ = std::move(c).value();
    listener_.seen.clear();
    c_->SubscribeGenerations(&listener_);
  }
  void TearDown() override {
    if (c_) c_->UnsubscribeGenerations(&listener_);
  }
  v1::JoinRequest Identity(const std::string& node, int local_rank, const std::string& inc = "i1") {
    v1::JoinRequest r;
    r.mutable_identity()->set_node(node);
    r.mutable_identity()->set_local_rank(local_rank);
    r.mutable_identity()->set_incarnation(inc);
    r.mutable_identity()->set_data_address("127.0.0.1:1");
    r.set_parameter_count(10000);
    return r;
  }
  std::string JoinOk(const std::string& node, int local_rank, const std::string& inc = "i1") {
    auto r = c_->Join(Identity(node, local_rank, inc));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->member_id() : "";
  }
  void Settle() {
    clock_.Advance(std::chrono::milliseconds(opts_.settle_ms + 1));
    c_->Tick();
  }
  void HeartbeatAll(const std::vector<std::string>& ids) {
    for (const auto& id : ids) {
      v1::HeartbeatRequest hb;
      hb.set_member_id(id);
      ASSERT_TRUE(c_->Heartbeat(hb).ok());
    }
  }

  // Every member writes a 10-byte file and acks checkpoint `id` at `step`; returns whether the
  // last ack committed it.
  bool WriteAndAckCheckpoint(const std::vector<std::string>& ids, uint64_t gen, int64_t step) {
    v1::BeginCheckpointRequest begin;
    begin.set_member_id(ids[0]);
    begin.set_generation(gen);
    begin.set_step(step);
    auto b = c_->BeginCheckpoint(begin);
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok() || !MakeDirectories(b->dir()).ok()) return false;
    bool committed = false;
    for (size_t i = 0; i < ids.size(); ++i) {
      std::string file = "shard-" + std::to_string(i) + ".bin";
      EXPECT_TRUE(WriteFileAtomically(b->dir() + "/" + file, "0123456789").ok());
      v1::AckCheckpointRequest ack;
      ack.set_member_id(ids[i]);
      ack.set_generation(gen);
      ack.set_checkpoint_id(b->checkpoint_id());
      auto* f = ack.add_files();
      f->set_path(file);
      f->set_size_bytes(10);
      f->set_rank(static_cast<int>(i));
      auto resp = c_->AckCheckpoint(ack);
      EXPECT_TRUE(resp.ok()) << resp.status();
      committed = resp.ok() && resp->committed();
    }
    return committed;
  }
  // Heartbeat reporting `step` at `step_seconds` per step; returns the directives.
  v1::Directives HeartbeatAtStep(const std::string& id, int64_t step, double step_seconds) {
    v1::HeartbeatRequest hb;
    hb.set_member_id(id);
    hb.set_step(step);
    hb.mutable_metrics()->set_step_seconds(step_seconds);
    auto r = c_->Heartbeat(hb);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->directives() : v1::Directives();
  }

  std::string dir_;
  CoordinatorOptions opts_;
  FakeClock clock_;
  RecordingListener listener_;
  std::unique_ptr<Coordinator> c_;
};

}  // namespace retort::coordinator
