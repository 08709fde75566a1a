// A coordinator and its gRPC server inside the test process, on 127.0.0.1 with an ephemeral
// port and a real clock: for tests of gRPC clients (the worker agent, the coordinator's own
// gRPC surface). Header-only; the test links retort_coordinator.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "coordinator/coordinator.h"
#include "coordinator/job_spec.h"
#include "coordinator/server.h"
#include "testing/subprocess.h"

namespace retort::testing {

// A job the in-process coordinator accepts without data or weights (min_workers..max_workers).
inline v1::JobSpec InProcessJob(const std::string& name, int min_workers = 1, int max_workers = 4) {
  v1::JobSpec job;
  job.set_name(name);
  job.mutable_teacher()->set_preset("fm-teacher");
  job.mutable_student()->set_preset("fm-student");
  job.mutable_elastic()->set_min_workers(min_workers);
  job.mutable_elastic()->set_max_workers(max_workers);
  coordinator::ApplyJobSpecDefaults(&job);  // as the coordinator receives a spec
  return job;
}

class InProcessCoordinator {
 public:
  // Starts a coordinator for `job` (settling 50 ms, ticking every 10 ms, state in a fresh
  // temporary directory); fails the test (ASSERT) on error.
  void Start(const v1::JobSpec& job) {
    coordinator::CoordinatorOptions opts;
    opts.state_dir = MakeTempDir("retort_inproc") + "/state";
    opts.settle_ms = 50;
    opts.tick_ms = 10;
    auto c = coordinator::Coordinator::Create(opts, job, &clock_);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(c).value();
    coordinator_->Start();
    auto s = coordinator::CoordinatorServer::Start(coordinator_.get(), "127.0.0.1:0");
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(s).value();
    address_ = "127.0.0.1:" + std::to_string(server_->port());
  }
  ~InProcessCoordinator() {
    if (server_) server_->Shutdown(100);
    if (coordinator_) coordinator_->Shutdown();
  }
  coordinator::Coordinator& coordinator() { return *coordinator_; }
  const std::string& address() const { return address_; }

 private:
  RealClock clock_;
  std::unique_ptr<coordinator::Coordinator> coordinator_;
  std::unique_ptr<coordinator::CoordinatorServer> server_;
  std::string address_;
};

}  // namespace retort::testing
