// retort-run: the local launcher. Starts a coordinator and N workers on 127.0.0.1 from one job
// spec, prefixes their logs, shows progress, stops everything on Ctrl-C, and exits non-zero when
// the job failed.
#include <grpcpp/grpcpp.h>
#include <limits.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <optional>
#include "common/args.h"
#include "common/file_util.h"
#include "coordinator/coordinator.h"
#include "coordinator/job_spec.h"
#include "retort/v1/retort.grpc.pb.h"
#include "tools/process_group.h"
#include "tools/signals.h"

using namespace retort;
using std::chrono::milliseconds;

namespace {

// The embedded default is a two-step pipeline on Fashion-MNIST: train a ViT teacher with
// plain cross-entropy, then distil a smaller ViT student from it. Sized for a 2-core machine
// (7x7 patches: 16 tokens per image).
constexpr const char* kTeacherJob = R"(name: fashion-mnist-teacher
student: {preset: fm-teacher-p7}
dataset: {kind: fashion-mnist, augment: false}
global_batch: 128
steps: 1200
optimizer: {lr: 0.001, weight_decay: 0.05, warmup_steps: 60, min_lr: 0.00001, clip_grad_norm: 1.0}
threads_per_worker: 1
elastic: {min_workers: 1, max_workers: 8}
evaluate: true
)";

constexpr const char* kStudentJob = R"(name: fashion-mnist-kd
teacher: {preset: fm-teacher-p7, weights_path: "@TEACHER_WEIGHTS@"}
student: {preset: fm-student-p7}
dataset: {kind: fashion-mnist, augment: false}
global_batch: 128
steps: 1200
optimizer: {lr: 0.001, weight_decay: 0.05, warmup_steps: 60, min_lr: 0.00001, clip_grad_norm: 1.0}
distillation: {temperature: 4.0, alpha: 0.7}
threads_per_worker: 1
elastic: {min_workers: 1, max_workers: 8}
evaluate: true
)";

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.find_last_of('/'));
}

std::string FormatDuration(double seconds) {
  int s = static_cast<int>(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%d:%02d", s / 60, s % 60);
  return buf;
}

}  // namespace

struct RunOptions {
  std::string bin_dir, log_level;
  int workers = 2, workers_per_node = 0, threads = 0;
  int64_t timeout_s = 0;
  bool stop_when_formed = false, train = true;
};

// Runs one job to its end: a coordinator and o.workers workers. Returns 0 when every process
// exited cleanly, 1 otherwise. `interrupts` counts Ctrl-C presses (owned by main).
int RunJob(const RunOptions& o, const std::string& job_text, const v1::JobSpec& job_spec,
           const std::string& output_dir, std::atomic<int>& interrupts) {
  const auto* job = &job_spec;
  const std::string& bin_dir = o.bin_dir;
  const std::string& log_level = o.log_level;
  const int workers = o.workers, workers_per_node = o.workers_per_node, threads = o.threads;
  const int64_t timeout_s = o.timeout_s;
  const bool stop_when_formed = o.stop_when_formed, train = o.train;
  Status mk = MakeDirectories(output_dir);
  if (!mk.ok()) {
    std::fprintf(stderr, "retort-run: %s\n", mk.message().c_str());
    return 1;
  }
  std::string spec_path = output_dir + "/job.yaml", port_path = output_dir + "/coordinator.port";
  ::unlink(port_path.c_str());
  if (Status s = WriteFileAtomically(spec_path, job_text); !s.ok()) {
    std::fprintf(stderr, "retort-run: %s\n", s.message().c_str());
    return 1;
  }

  tools::ProcessGroup group;
  int coord =
      group.Spawn("coordinator", {bin_dir + "/retort-coordinator", "--listen=127.0.0.1:0",
                                  "--state-dir=" + output_dir + "/state", "--job=" + spec_path,
                                  "--port-file=" + port_path, "--log-level=" + log_level});
  auto start = std::chrono::steady_clock::now();
  while (!PathExists(port_path)) {
    if (group.Poll(coord)) {
      std::fprintf(stderr, "retort-run: the coordinator exited with status %d\n",
                   *group.Poll(coord));
      return 1;
    }
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(30)) {
      std::fprintf(stderr, "retort-run: the coordinator did not start within 30 s\n");
      return 1;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  std::string address = "127.0.0.1:" + std::to_string(std::stoi(*ReadFileToString(port_path)));
  for (int i = 0; i < workers; ++i) {
    int node = workers_per_node > 0 ? i / workers_per_node : 0;
    int local = workers_per_node > 0 ? i % workers_per_node : i;
    std::vector<std::string> argv = {bin_dir + "/retort-worker",
                                     "--coordinator=" + address,
                                     "--node=local" + std::to_string(node),
                                     "--local-rank=" + std::to_string(local),
                                     "--log-level=" + log_level,
                                     "--output-dir=" + output_dir};
    if (!train) argv.push_back("--no-train");
    if (threads > 0) argv.push_back("--threads=" + std::to_string(threads));
    group.Spawn("worker " + std::to_string(i), argv);
  }
  std::printf("retort-run: job '%s' with %d worker(s); coordinator at %s; output in %s\n",
              job->name().c_str(), workers, address.c_str(), output_dir.c_str());
  std::fflush(stdout);

  auto control =
      v1::ControlService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  auto call_stop = [&](const std::string& reason) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(2000));
    v1::StopRequest req;
    req.set_reason(reason);
    v1::ControlResponse resp;
    return control->Stop(&ctx, req, &resp).ok();
  };

  int handled_interrupts = interrupts.load();
  bool stop_requested = false, failed = false;
  uint64_t shown_generation = 0;
  int64_t shown_step = -1;
  auto last_progress = std::chrono::steady_clock::now();
  while (!group.AllExited()) {
    std::this_thread::sleep_for(milliseconds(200));
    int n = interrupts.load();
    if (n > handled_interrupts) {
      handled_interrupts = n;
      if (n == 1) {
        std::printf("retort-run: stopping the job (Ctrl-C again to terminate)\n");
        if (!call_stop("interrupted")) group.SignalAll(SIGTERM);
      } else if (n == 2) {
        group.SignalAll(SIGTERM);
      } else {
        group.SignalAll(SIGKILL);
      }
      stop_requested = true;
    }
    for (size_t i = 1; i < group.size(); ++i) {
      auto rc = group.Poll(static_cast<int>(i));
      if (rc && *rc != 0 && !failed && handled_interrupts == 0) {
        std::fprintf(stderr, "retort-run: %s exited with status %d; stopping the job\n",
                     group.name(i).c_str(), *rc);
        failed = true;
      }
    }
    if (auto rc = group.Poll(coord); rc && !stop_requested && !group.AllExited()) {
      std::fprintf(stderr, "retort-run: the coordinator exited with status %d; stopping workers\n",
                   *rc);
      failed = failed || *rc != 0;
      group.SignalAll(SIGTERM);
      stop_requested = true;
    }
    if (failed && !stop_requested) {
      if (!call_stop("a worker failed")) group.SignalAll(SIGTERM);
      stop_requested = true;
    }
    if (timeout_s > 0 && !stop_requested &&
        std::chrono::steady_clock::now() - start > std::chrono::seconds(timeout_s)) {
      std::printf("retort-run: --timeout-s=%lld reached; stopping the job\n",
                  static_cast<long long>(timeout_s));
      call_stop("launcher timeout");
      stop_requested = true;
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(500));
    v1::StatusResponse st;
    if (!control->Status(&ctx, v1::StatusRequest(), &st).ok()) continue;
    if (st.generation() != shown_generation && st.state() == v1::JOB_STATE_RUNNING) {
      shown_generation = st.generation();
      std::printf("retort-run: generation %llu: %d worker(s) on %s\n",
                  static_cast<unsigned long long>(st.generation()), st.members_size(),
                  workers_per_node > 0 ? "several nodes" : "one node");
      for (const auto& m : st.members())
        std::printf("retort-run:   rank %d  %-8s node %s local rank %d\n", m.rank(),
                    m.member_id().c_str(), m.node().c_str(), m.local_rank());
      std::fflush(stdout);
      if (stop_when_formed && st.members_size() == workers && !stop_requested) {
        std::printf(
            "retort-run: all %d workers formed generation %llu; stopping (--stop-when-formed)\n",
            workers, static_cast<unsigned long long>(st.generation()));
        call_stop("--stop-when-formed");
        stop_requested = true;
      }
    }
    auto now = std::chrono::steady_clock::now();
    if (st.step() != shown_step && st.step() > 0 && now - last_progress > std::chrono::seconds(2)) {
      shown_step = st.step();
      last_progress = now;
      // Every member reports the global batch's loss and throughput: average them.
      double loss = 0, sps = 0;
      for (const auto& m : st.members()) {
        loss += m.metrics().loss() / std::max(1, st.members_size());
        sps += m.metrics().samples_per_second() / std::max(1, st.members_size());
      }
      std::string eta = "?";
      if (st.total_steps() > 0 && sps > 0)
        eta = FormatDuration(static_cast<double>(st.total_steps() - st.step()) *
                             job->global_batch() / sps);
      std::printf("retort-run: step %lld%s  loss %.4f  %.0f samples/s  ETA %s\n",
                  static_cast<long long>(st.step()),
                  st.total_steps() > 0 ? ("/" + std::to_string(st.total_steps())).c_str() : "",
                  loss, sps, eta.c_str());
      std::fflush(stdout);
    }
  }
  int coord_rc = *group.Poll(coord);
  bool ok = !failed && coord_rc == 0;
  for (size_t i = 1; i < group.size(); ++i) ok = ok && *group.Poll(static_cast<int>(i)) == 0;
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("retort-run: %s after %s; state and checkpoints in %s/state\n",
              ok ? "finished" : "FAILED", FormatDuration(took).c_str(), output_dir.c_str());
  return ok ? 0 : 1;
}

// Reads <dir>/result.json written by rank 0 at the end of a job.
std::optional<nlohmann::json> ReadResult(const std::string& dir) {
  auto text = ReadFileToString(dir + "/result.json");
  if (!text.ok()) return std::nullopt;
  try {
    return nlohmann::json::parse(*text);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// The embedded default: train the teacher, then distil the student from it, then report.
int RunDefaultPipeline(const RunOptions& o, const std::string& output_dir,
                       std::atomic<int>& interrupts) {
  const auto start = std::chrono::steady_clock::now();
  const std::string teacher_dir = output_dir + "/teacher", student_dir = output_dir + "/student";
  auto teacher_job = coordinator::ParseJobSpec(kTeacherJob, "embedded teacher job");
  if (!teacher_job.ok()) {
    std::fprintf(stderr, "retort-run: %s\n", teacher_job.status().ToString().c_str());
    return 1;
  }
  std::printf("retort-run: [1/2] training the teacher (%s) on Fashion-MNIST with %d worker(s)\n",
              teacher_job->student().preset().c_str(), o.workers);
  std::fflush(stdout);
  if (int rc = RunJob(o, kTeacherJob, *teacher_job, teacher_dir, interrupts); rc != 0) return rc;
  auto teacher = ReadResult(teacher_dir);
  if (!teacher) {
    std::fprintf(stderr, "retort-run: the teacher job wrote no %s/result.json\n",
                 teacher_dir.c_str());
    return 1;
  }
  std::string kd_text = kStudentJob;
  const std::string placeholder = "@TEACHER_WEIGHTS@";
  kd_text.replace(kd_text.find(placeholder), placeholder.size(),
                  teacher->value("student_weights", std::string()));
  auto kd_job = coordinator::ParseJobSpec(kd_text, "embedded distillation job");
  if (!kd_job.ok()) {
    std::fprintf(stderr, "retort-run: %s\n", kd_job.status().ToString().c_str());
    return 1;
  }
  std::printf("retort-run: [2/2] distilling the student (%s) from the teacher with %d worker(s)\n",
              kd_job->student().preset().c_str(), o.workers);
  std::fflush(stdout);
  if (int rc = RunJob(o, kd_text, *kd_job, student_dir, interrupts); rc != 0) return rc;
  auto student = ReadResult(student_dir);
  if (!student) {
    std::fprintf(stderr, "retort-run: the distillation job wrote no %s/result.json\n",
                 student_dir.c_str());
    return 1;
  }
  const double teacher_top1 = teacher->value("student_top1", 0.0);
  const double student_top1 = student->value("student_top1", 0.0);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const bool accurate = student_top1 >= 0.85, close = teacher_top1 - student_top1 <= 0.03;
  std::printf(
      "\nretort-run: Fashion-MNIST distillation finished in %s\n"
      "  teacher %-14s top-1 %.4f on %lld test images\n"
      "  student %-14s top-1 %.4f (%+.2f points vs the teacher)\n"
      "  targets: student top-1 >= 0.85 %s; within 3 points of the teacher %s\n"
      "  teacher weights:  %s\n"
      "  student weights:  %s (safetensors, PyTorch parameter names)\n"
      "  metrics:          %s, %s\n"
      "  coordinator state and checkpoints: %s/state, %s/state\n",
      FormatDuration(took).c_str(), teacher->value("student", std::string()).c_str(), teacher_top1,
      static_cast<long long>(student->value("test_samples", 0)),
      student->value("student", std::string()).c_str(), student_top1,
      100.0 * (student_top1 - teacher_top1), accurate ? "met" : "NOT met",
      close ? "met" : "NOT met", teacher->value("student_weights", std::string()).c_str(),
      student->value("student_weights", std::string()).c_str(),
      teacher->value("metrics", std::string()).c_str(),
      student->value("metrics", std::string()).c_str(), teacher_dir.c_str(), student_dir.c_str());
  return 0;
}

int main(int argc, char** argv) {
  tools::BlockTerminationSignals();
  std::string job_path, output_dir = "retort-out", bin_dir = SelfDir(), log_level = "info";
  int workers = 2, workers_per_node = 0, threads = 0;
  int64_t timeout_s = 0;
  bool stop_when_formed = false, print_job = false, train = true;
  ArgParser args(
      "retort-run [--job=SPEC.yaml] [--workers=N] [flags]",
      "Runs a retort job on this machine: one coordinator and N workers on 127.0.0.1.\n"
      "Without --job it runs the embedded default: train a ViT teacher on Fashion-MNIST, then\n"
      "distil a smaller ViT student from it, and report both top-1 accuracies (--print-job).\n"
      "Ctrl-C stops the job gracefully (twice: terminate, three times: kill).");
  args.AddString("job", &job_path,
                 "job spec (YAML or JSON); default: the embedded Fashion-MNIST job");
  args.AddInt("workers", &workers, "number of worker processes");
  args.AddInt("workers-per-node", &workers_per_node,
              "simulate nodes of this many workers (0 = all on one node)");
  args.AddInt("threads", &threads, "compute threads per worker (0 = the job's threads_per_worker)");
  args.AddString("output-dir", &output_dir, "coordinator state, checkpoints and outputs go here");
  args.AddString("bin-dir", &bin_dir, "directory holding retort-coordinator and retort-worker");
  args.AddBool("stop-when-formed", &stop_when_formed,
               "stop the job once all workers formed a generation");
  args.AddInt("timeout-s", &timeout_s, "stop the job after this many seconds (0 = no limit)");
  args.AddBool("print-job", &print_job, "print the job spec that would run, and exit");
  args.AddBool("train", &train, "workers train (--no-train: control plane only)");
  args.AddString("log-level", &log_level, "log level of the coordinator and workers");
  auto parsed = args.Parse(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "retort-run: %s\n", parsed.status().message().c_str());
    return 2;
  }
  if (!*parsed) return 0;
  if (workers < 1 || workers > 256 || workers_per_node < 0 || threads < 0 || timeout_s < 0) {
    std::fprintf(stderr, "retort-run: --workers must be in [1, 256]; other counts must be >= 0\n");
    return 2;
  }
  std::string job_text = kTeacherJob;
  if (!job_path.empty()) {
    auto text = ReadFileToString(job_path);
    if (!text.ok()) {
      std::fprintf(stderr, "retort-run: %s\n", text.status().message().c_str());
      return 2;
    }
    job_text = *text;
  }
  auto job = coordinator::ParseJobSpec(job_text, job_path.empty() ? "embedded job" : job_path);
  if (!job.ok()) {
    std::fprintf(stderr, "retort-run: invalid job spec: %s\n", job.status().message().c_str());
    return 2;
  }
  if (print_job) {
    if (job_path.empty())
      std::printf("# step 1: the teacher\n%s---\n# step 2: the distillation\n%s", kTeacherJob,
                  kStudentJob);
    else
      std::printf("%s", job_text.c_str());
    return 0;
  }
  RunOptions o{bin_dir, log_level, workers,          workers_per_node,
               threads, timeout_s, stop_when_formed, train};
  std::atomic<int> interrupts{0};
  tools::TerminationSignalWatcher signal_watcher([&](int) { interrupts++; });
  if (!job_path.empty()) return RunJob(o, job_text, *job, output_dir, interrupts);
  return RunDefaultPipeline(o, output_dir, interrupts);
}
