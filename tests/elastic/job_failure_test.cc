// Failures that recur on every try fail the job once: a coordinator and training workers on
// 127.0.0.1 with a job that cannot succeed (corrupt images without skip_corrupt, labels the
// model has no class for, a dataset path that does not exist). The coordinator exits 3 within a
// bounded time with the first error recorded (shown by `retortctl status` after a restart on the
// same state), and no worker re-joins to fail again. Jobs whose mistake the coordinator can see
// (a missing local path, an image size the model's patches do not divide) are refused before
// any worker starts (exit 2). A transient failure (a worker killed) is still survived.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "elastic/elastic_cluster.h"
#include "testing/coordinator_process.h"
#include "testing/subprocess.h"

namespace retort::elastic_testing {
namespace {

using std::chrono::milliseconds;
using testing::BinaryPath;
using testing::Subprocess;

// The old behaviour retried forever; a failed job must be over well within this.
constexpr milliseconds kFailWithin{90000};
constexpr milliseconds kStartup{30000};

int CountOccurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1))
    ++n;
  return n;
}

// One job: a coordinator (with `coordinator_flags`) and workers; SIGKILLs what still runs.
class FailingJob {
 public:
  FailingJob(const std::string& job_yaml, std::vector<std::string> coordinator_flags = {})
      : dir_(testing::MakeTempDir("retort_job_failure")), flags_(std::move(coordinator_flags)) {
    std::ofstream(dir_ + "/job.yaml") << job_yaml << "output_dir: " << dir_ << "/out\n";
  }

  // Starts the coordinator; false (with *error) when it writes no port file within kStartup.
  // With `with_job` false it resumes from the state dir (no --job, no pre-flight checks).
  bool StartCoordinator(bool with_job, bool exit_when_finished, std::string* error) {
    std::vector<std::string> flags = {"--state-dir=" + dir_ + "/state",
                                      "--heartbeat-interval-ms=200", "--eviction-timeout-ms=2000",
                                      "--settle-ms=300"};
    if (with_job) flags.push_back("--job=" + dir_ + "/job.yaml");
    if (!exit_when_finished) flags.push_back("--no-exit-when-finished");
    flags.insert(flags.end(), flags_.begin(), flags_.end());
    testing::LaunchedCoordinator c = testing::LaunchCoordinator(
        {.flags = flags,
         .port_file = dir_ + "/port",
         .log_path = dir_ + "/coordinator-" + std::to_string(++starts_) + ".log",
         .timeout = kStartup});
    coordinator_ = std::move(c.process);
    if (!c.ok()) {
      *error = c.error;
      return false;
    }
    address_ = c.address();
    return true;
  }

  void StartWorker(int local_rank) {
    workers_.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{BinaryPath("tools/retort-worker"), "--coordinator=" + address_,
                                 "--node=node0", "--local-rank=" + std::to_string(local_rank),
                                 "--rpc-timeout-ms=1000", "--comm-timeout-ms=5000",
                                 "--join-timeout-ms=10000", "--threads=1"},
        dir_ + "/worker" + std::to_string(workers_.size()) + ".log"));
  }

  // `retortctl status --json`, parsed (null when it fails).
  nlohmann::json Status() {
    std::string out;
    int code = testing::RunCommand({BinaryPath("tools/retortctl"), "--coordinator=" + address_,
                                    "--timeout-ms=2000", "--json", "status"},
                                   &out, milliseconds(10000));
    if (code != 0) return nullptr;
    auto j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
    return j.is_discarded() ? nullptr : j;
  }

  std::string Logs() const {
    std::string all;
    if (coordinator_) all += "--- coordinator:\n" + coordinator_->Log() + "\n";
    for (size_t i = 0; i < workers_.size(); ++i) {
      std::string log = workers_[i]->Log();
      if (log.size() > 4000) log = "..." + log.substr(log.size() - 4000);
      all += "--- worker " + std::to_string(i) + ":\n" + log + "\n";
    }
    return all;
  }

  Subprocess& coordinator() { return *coordinator_; }
  Subprocess& worker(size_t i) { return *workers_.at(i); }
  size_t worker_count() const { return workers_.size(); }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::vector<std::string> flags_;
  std::string address_;
  int starts_ = 0;
  std::unique_ptr<Subprocess> coordinator_;
  std::vector<std::unique_ptr<Subprocess>> workers_;
};

// Runs `job` with two workers until the coordinator exits; expects exit 3 within kFailWithin,
// one failure, no re-join, and the failure in `retortctl status --json` after a restart.
// Returns the status JSON's "failure" object (null on a failed expectation).
nlohmann::json ExpectFailsOnce(FailingJob& job) {
  std::string error;
  if (!job.StartCoordinator(/*with_job=*/true, /*exit_when_finished=*/true, &error)) {
    ADD_FAILURE() << error;
    return nullptr;
  }
  job.StartWorker(0);
  job.StartWorker(1);
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<int> code = job.coordinator().Wait(kFailWithin);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!code) {
    ADD_FAILURE() << "the job did not end within " << kFailWithin.count() << " ms\n" << job.Logs();
    return nullptr;
  }
  EXPECT_EQ(*code, 3) << job.Logs();
  std::printf("[ measured ] job failed; coordinator exited %d after %.1f s\n", *code, seconds);
  const std::string log = job.coordinator().Log();
  EXPECT_EQ(CountOccurrences(log, "job_failed:"), 1) << log;
  // Two joins at most: none after the failure. (A worker slower to start than the failure finds
  // the coordinator gone and gives up at its join timeout.)
  const int joins = CountOccurrences(log, "member_joined:");
  EXPECT_GE(joins, 1) << log;
  EXPECT_LE(joins, 2) << "a worker re-joined:\n" << log;
  for (size_t i = 0; i < job.worker_count(); ++i) {
    EXPECT_TRUE(job.worker(i).Wait(milliseconds(30000)).has_value())
        << "worker " << i << " still runs\n"
        << job.Logs();
  }
  // Restarted on the same state: still failed, with the first error; exits 3 by itself...
  if (!job.StartCoordinator(false, true, &error)) {
    ADD_FAILURE() << error;
    return nullptr;
  }
  std::optional<int> again = job.coordinator().Wait(milliseconds(20000));
  EXPECT_EQ(again.value_or(-1), 3) << job.coordinator().Log();
  // ... and, kept running, shows the failure in `retortctl status`.
  if (!job.StartCoordinator(false, false, &error)) {
    ADD_FAILURE() << error;
    return nullptr;
  }
  nlohmann::json status;
  testing::WaitFor([&] { return !(status = job.Status()).is_null(); }, milliseconds(10000));
  job.coordinator().Signal(SIGTERM);
  if (status.is_null()) {
    ADD_FAILURE() << "no status\n" << job.coordinator().Log();
    return nullptr;
  }
  EXPECT_EQ(status.value("state", ""), "failed") << status.dump();
  if (!status.contains("failure") || !status["failure"].is_object()) {
    ADD_FAILURE() << "no failure in status: " << status.dump();
    return nullptr;
  }
  const nlohmann::json& f = status["failure"];
  EXPECT_EQ(f.value("kind", ""), "recurring") << f.dump();
  EXPECT_FALSE(f.value("member_id", "").empty()) << f.dump();
  EXPECT_EQ(f.value("node", ""), "node0") << f.dump();
  return f;
}

TEST(JobFailureTest, CorruptImagesWithoutSkipFailTheJobOnce) {
  FailingJob probe("");  // only for its directory
  const std::string images = probe.dir() + "/images";
  for (const char* cls : {"a", "b"}) {
    std::filesystem::create_directories(images + "/" + cls);
    for (int i = 0; i < 8; ++i)
      std::ofstream(images + "/" + cls + "/" + std::to_string(i) + ".jpg") << "not a JPEG";
  }
  FailingJob job(
      "name: corrupt\nstudent: {preset: fm-student}\n"
      "dataset: {kind: image-folder, path: " +
      images +
      ", image_size: 28, num_classes: 2, skip_corrupt: false}\n"
      "global_batch: 8\nsteps: 20\nelastic: {min_workers: 1, max_workers: 4}\n");
  nlohmann::json f = ExpectFailsOnce(job);
  if (f.is_null()) return;
  EXPECT_EQ(f.value("phase", ""), "data") << f.dump();
  EXPECT_EQ(f.value("step", -1), 0) << f.dump();
  EXPECT_NE(f.value("message", "").find(".jpg: not a JPEG or PNG image"), std::string::npos)
      << f.dump();
}

TEST(JobFailureTest, LabelsTheModelHasNoClassForFailTheJobAtTheFirstStep) {
  // fm-student has 10 classes; labels go up to 19. Nothing before the first step can tell.
  FailingJob job(
      "name: classes\nstudent: {preset: fm-student}\n"
      "dataset: {kind: synthetic, image_size: 28, num_classes: 20, synthetic_samples: 256}\n"
      "global_batch: 16\nsteps: 20\nelastic: {min_workers: 1, max_workers: 4}\n");
  nlohmann::json f = ExpectFailsOnce(job);
  if (f.is_null()) return;
  EXPECT_EQ(f.value("phase", ""), "step") << f.dump();
  EXPECT_EQ(f.value("message", "").rfind("INVALID_ARGUMENT: ", 0), 0u) << f.dump();
}

TEST(JobFailureTest, MissingDatasetOnTheWorkersFailsTheJobOnce) {
  // --no-check-paths: the coordinator cannot see the workers' files, so the workers find out.
  FailingJob job(
      "name: missing\nstudent: {preset: fm-student}\n"
      "dataset: {kind: image-folder, path: /nonexistent/retort-images, image_size: 28, "
      "num_classes: 2}\nglobal_batch: 8\nsteps: 20\nelastic: {min_workers: 1, max_workers: 4}\n",
      {"--no-check-paths"});
  nlohmann::json f = ExpectFailsOnce(job);
  if (f.is_null()) return;
  EXPECT_EQ(f.value("phase", ""), "setup") << f.dump();
  EXPECT_NE(f.value("message", "").find("/nonexistent/retort-images"), std::string::npos)
      << f.dump();
}

// Runs the coordinator alone and expects it to refuse the job (exit 2) naming `expected`.
void ExpectRefusedBeforeAnyWorker(const std::string& yaml, const std::string& expected) {
  FailingJob job(yaml);
  Subprocess c({BinaryPath("tools/retort-coordinator"), "--state-dir=" + job.dir() + "/state",
                "--listen=127.0.0.1:0", "--job=" + job.dir() + "/job.yaml"},
               job.dir() + "/coordinator.log");
  std::optional<int> code = c.Wait(milliseconds(20000));
  ASSERT_TRUE(code.has_value()) << "the coordinator accepted the job:\n" << c.Log();
  EXPECT_EQ(*code, 2) << c.Log();
  EXPECT_NE(c.Log().find(expected), std::string::npos) << c.Log();
  EXPECT_FALSE(std::filesystem::exists(job.dir() + "/state/state.json"))
      << "a refused job left state behind";
}

TEST(JobFailureTest, MissingLocalDatasetIsRefusedBeforeAnyWorkerStarts) {
  ExpectRefusedBeforeAnyWorker(
      "name: missing\nstudent: {preset: fm-student}\n"
      "dataset: {kind: image-folder, path: /nonexistent/retort-images, image_size: 28, "
      "num_classes: 2}\nglobal_batch: 8\nsteps: 20\n",
      "dataset.path: '/nonexistent/retort-images' does not exist");
}

TEST(JobFailureTest, ImageSizeThePatchSizeDoesNotDivideIsRefusedBeforeAnyWorkerStarts) {
  ExpectRefusedBeforeAnyWorker(
      "name: size\nstudent: {preset: fm-student}\n"
      "dataset: {kind: synthetic, image_size: 30, num_classes: 10}\nglobal_batch: 8\nsteps: 20\n",
      "dataset.image_size: 30 is not divisible by the patch size 4 of student.preset "
      "'fm-student'");
}

TEST(JobFailureTest, AKilledWorkerIsTransientAndTheJobStillCompletes) {
  FailingJob job(
      "name: transient\nstudent: {preset: fm-student}\n"
      "dataset: {kind: synthetic, image_size: 28, num_classes: 10, synthetic_samples: 2048}\n"
      "global_batch: 16\nsteps: 60\nelastic: {min_workers: 1, max_workers: 4}\n");
  std::string error;
  ASSERT_TRUE(job.StartCoordinator(true, true, &error)) << error;
  job.StartWorker(0);
  job.StartWorker(1);
  const std::string metrics = job.dir() + "/out/metrics.jsonl";
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        MetricsFile m = ReadMetrics(metrics);
        return !m.lines.empty() && m.lines.back().world_size == 2 && m.lines.back().step >= 5;
      },
      milliseconds(60000)))
      << job.Logs();
  job.worker(1).Signal(SIGKILL);
  std::optional<int> code = job.coordinator().Wait(milliseconds(120000));
  ASSERT_TRUE(code.has_value()) << "the job did not end\n" << job.Logs();
  EXPECT_EQ(*code, 0) << job.Logs();
  EXPECT_EQ(CountOccurrences(job.coordinator().Log(), "job_failed:"), 0) << job.Logs();
  EXPECT_NE(job.coordinator().Log().find("job is completed"), std::string::npos) << job.Logs();
  EXPECT_EQ(ReadMetrics(metrics).lines.back().step, 60) << job.Logs();
}

}  // namespace
}  // namespace retort::elastic_testing
