// retort-run: the local launcher. Starts a coordinator and N workers on 127.0.0.1 from one job
// spec, prefixes their logs, shows progress, keeps the job going through worker failures within
// its elastic bounds (restarting workers, --max-restarts), stops everything on Ctrl-C, and ends
// with one line saying how the job ended (job_runner.h has the contract and exit codes).
#include <limits.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <optional>
#include "common/args.h"
#include "common/file_util.h"
#include "coordinator/job_spec.h"
#include "tools/exit_status.h"
#include "tools/job_runner.h"
#include "tools/signals.h"
#include "tools/stdin_eof_watcher.h"

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

// "0.8712" or "not evaluated": a result's student top-1.
std::string Top1Text(const nlohmann::json& result) {
  if (!result.value("evaluated", result.contains("student_top1"))) return "not evaluated";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4f", result.value("student_top1", 0.0));
  return buf;
}

// The embedded default: train the teacher, then distil the student from it, then report.
int RunDefaultPipeline(tools::RunOptions o, const std::string& output_dir,
                       std::atomic<int>& interrupts) {
  const auto start = std::chrono::steady_clock::now();
  const std::string base = output_dir.empty() ? "retort-out" : output_dir;
  auto teacher_job = coordinator::ParseJobSpec(kTeacherJob, "embedded teacher job");
  if (!teacher_job.ok()) {
    std::fprintf(stderr, "retort-run: %s\n", teacher_job.status().ToString().c_str());
    return 1;
  }
  std::printf("retort-run: [1/2] training the teacher (%s) on Fashion-MNIST with %d worker(s)\n",
              teacher_job->student().preset().c_str(), o.workers);
  std::fflush(stdout);
  std::string teacher_dir, student_dir;
  o.output_flag = base + "/teacher";
  if (int rc = tools::RunJob(o, *teacher_job, interrupts, &teacher_dir); rc != 0) return rc;
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
  o.output_flag = base + "/student";
  if (int rc = tools::RunJob(o, *kd_job, interrupts, &student_dir); rc != 0) return rc;
  auto student = ReadResult(student_dir);
  if (!student) {
    std::fprintf(stderr, "retort-run: the distillation job wrote no %s/result.json\n",
                 student_dir.c_str());
    return 1;
  }
  const bool evaluated =
      Top1Text(*teacher) != "not evaluated" && Top1Text(*student) != "not evaluated";
  const double teacher_top1 = teacher->value("student_top1", 0.0);
  const double student_top1 = student->value("student_top1", 0.0);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const bool accurate = student_top1 >= 0.85, close = teacher_top1 - student_top1 <= 0.03;
  char delta[64] = "";
  if (evaluated)
    std::snprintf(delta, sizeof(delta), " (%+.2f points vs the teacher)",
                  100.0 * (student_top1 - teacher_top1));
  std::printf(
      "\nretort-run: Fashion-MNIST distillation finished in %s\n"
      "  teacher %-14s top-1 %s on %lld test images\n"
      "  student %-14s top-1 %s%s\n"
      "  targets: student top-1 >= 0.85 %s; within 3 points of the teacher %s\n"
      "  teacher weights:  %s\n"
      "  student weights:  %s (safetensors, PyTorch parameter names)\n"
      "  metrics:          %s, %s\n"
      "  coordinator state and checkpoints: %s/state, %s/state\n",
      FormatDuration(took).c_str(), teacher->value("student", std::string()).c_str(),
      Top1Text(*teacher).c_str(), static_cast<long long>(student->value("test_samples", 0)),
      student->value("student", std::string()).c_str(), Top1Text(*student).c_str(), delta,
      !evaluated ? "not evaluated"
      : accurate ? "met"
                 : "NOT met",
      !evaluated ? "not evaluated"
      : close    ? "met"
                 : "NOT met",
      teacher->value("student_weights", std::string()).c_str(),
      student->value("student_weights", std::string()).c_str(),
      teacher->value("metrics", std::string()).c_str(),
      student->value("metrics", std::string()).c_str(), teacher_dir.c_str(), student_dir.c_str());
  return 0;
}

constexpr const char* kProgram = "retort-run";

// Everything the flags say.
struct Config {
  tools::RunOptions o;
  std::string job_path;
  int max_restarts = tools::RestartPolicy{}.max_restarts;
  bool print_job = false;
  bool stop_on_stdin_eof = false;
};

void RegisterFlags(ArgParser& args, Config* c) {
  args.AddString("job", &c->job_path,
                 "job spec (YAML or JSON); default: the embedded Fashion-MNIST job");
  args.AddInt("workers", &c->o.workers, "number of worker processes");
  args.AddInt("workers-per-node", &c->o.workers_per_node,
              "simulate nodes of this many workers (0 = all on one node)");
  args.AddInt("gpus-per-node", &c->o.gpus_per_node,
              "one worker per GPU: nodes of this many workers, worker L of a node on cuda:L "
              "(sets --workers-per-node; NCCL inside a node, UCX between nodes)");
  args.AddInt("threads", &c->o.threads,
              "compute threads per worker (0 = the job's threads_per_worker)");
  args.AddString("output-dir", &c->o.output_flag,
                 "the run's directory: outputs, state and checkpoints (default: the job's "
                 "output_dir, else retort-out)");
  args.AddString("state-dir", &c->o.state_flag,
                 "keep the coordinator's state (and default checkpoints) here instead of "
                 "OUTPUT/state");
  args.AddBool("fresh", &c->o.fresh,
               "remove what an earlier run of the job left (state, checkpoints, metrics, "
               "results) and start from scratch");
  args.AddInt("max-restarts", &c->max_restarts,
              "restart a worker that died at most this many times per worker (0 = never)");
  args.AddInt("exit-grace-s", &c->o.exit_grace_s,
              "after the coordinator exits, wait this long for workers to exit by themselves "
              "before SIGTERM");
  args.AddString("bin-dir", &c->o.bin_dir,
                 "directory holding retort-coordinator and retort-worker");
  args.AddBool("stop-when-formed", &c->o.stop_when_formed,
               "stop the job once all workers formed a generation");
  args.AddInt("timeout-s", &c->o.timeout_s, "stop the job after this many seconds (0 = no limit)");
  args.AddBool("print-job", &c->print_job, "print the job spec that would run, and exit");
  args.AddBool("stop-on-stdin-eof", &c->stop_on_stdin_eof,
               "stop the job (as on SIGTERM) when standard input ends: for a program that "
               "starts retort-run with a pipe on its standard input, so that the job ends with "
               "that program however it ends (the Python package does this)");
  args.AddBool("train", &c->o.train, "workers train (--no-train: control plane only)");
  args.AddString("log-level", &c->o.log_level, "log level of the coordinator and workers");
  args.AddBool("tls", &c->o.tls,
               "mutual TLS between the coordinator, workers and launcher, with certificates "
               "made in OUTPUT_DIR/tls (see retortctl certs) unless --tls-dir names them");
  args.AddString("tls-dir", &c->o.tls_dir,
                 "mutual TLS with the certificates in this folder (as `retortctl certs` writes "
                 "them: ca.crt, coordinator/worker/operator .crt and .key)");
  args.AddStringList("worker-arg", &c->o.worker_args,
                     "pass this flag to every worker (repeatable), e.g. "
                     "--worker-arg=--comm-timeout-ms=20000");
}

// The flags' rules: usage errors. Folds --gpus-per-node and --max-restarts into the options.
Status CheckConfig(Config* c) {
  tools::RunOptions& o = c->o;
  if (o.gpus_per_node > 0) {
    if (o.workers_per_node > 0 && o.workers_per_node != o.gpus_per_node)
      return InvalidArgumentError("--gpus-per-node=" + std::to_string(o.gpus_per_node) +
                                  " and --workers-per-node=" + std::to_string(o.workers_per_node) +
                                  " disagree");
    o.workers_per_node = o.gpus_per_node;
  }
  if (o.workers < 1 || o.workers > 256 || o.workers_per_node < 0 || o.gpus_per_node < 0 ||
      o.threads < 0 || o.timeout_s < 0 || c->max_restarts < 0 || c->max_restarts > 1000 ||
      o.exit_grace_s < 0)
    return InvalidArgumentError(
        "--workers must be in [1, 256], --max-restarts in [0, 1000]; other counts must be >= 0");
  o.restarts.max_restarts = c->max_restarts;
  return Status::Ok();
}

// The job spec's text: --job's file, else the embedded teacher job.
StatusOr<std::string> JobText(const Config& c) {
  if (c.job_path.empty()) return std::string(kTeacherJob);
  auto text = ReadFileToString(c.job_path);
  if (!text.ok()) return tools::UsageError(text.status());
  return *text;
}

// Runs the job (or the embedded pipeline, or prints the spec); the launcher's exit code, or a
// usage error.
StatusOr<int> Run(Config c) {
  RETORT_RETURN_IF_ERROR(CheckConfig(&c));
  RETORT_ASSIGN_OR_RETURN(std::string job_text, JobText(c));
  auto job = coordinator::ParseJobSpec(job_text, c.job_path.empty() ? "embedded job" : c.job_path);
  if (!job.ok()) return tools::UsageError(job.status(), "invalid job spec");
  if (c.print_job) {
    if (c.job_path.empty())
      std::printf("# step 1: the teacher\n%s---\n# step 2: the distillation\n%s", kTeacherJob,
                  kStudentJob);
    else
      std::printf("%s", job_text.c_str());
    return tools::kExitOk;
  }
  std::atomic<int> interrupts{0};
  tools::TerminationSignalWatcher signal_watcher([&](int) { interrupts++; });
  std::optional<tools::StdinEofWatcher> stdin_watcher;
  if (c.stop_on_stdin_eof)
    stdin_watcher.emplace([&] {
      std::fprintf(stderr, "retort-run: standard input ended (--stop-on-stdin-eof): stopping\n");
      interrupts++;
    });
  if (!c.job_path.empty()) return tools::RunJob(c.o, *job, interrupts);
  return RunDefaultPipeline(c.o, c.o.output_flag, interrupts);
}

}  // namespace

int main(int argc, char** argv) {
  tools::BlockTerminationSignals();
  // A launcher whose reader is gone (the program that started it was killed) must still stop
  // its job and reap its processes: its writes then fail instead of ending it.
  std::signal(SIGPIPE, SIG_IGN);
  // Line-buffered even into a file or pipe: progress and pids appear as they happen.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Config config;
  config.o.bin_dir = SelfDir();
  ArgParser args(
      "retort-run [--job=SPEC.yaml] [--workers=N] [flags]",
      "Runs a retort job on this machine: one coordinator and N workers on 127.0.0.1.\n"
      "Without --job it runs the embedded default: train a ViT teacher on Fashion-MNIST, then\n"
      "distil a smaller ViT student from it, and report both top-1 accuracies (--print-job).\n"
      "\n"
      "One directory holds a run: the job spec, metrics.jsonl, result.json, the student's\n"
      "weights and the coordinator's state with its checkpoints (state/). It is --output-dir,\n"
      "else the job's output_dir, else retort-out. Running a job again resumes it from its\n"
      "state; a completed job is reported ('already completed; results in DIR', exit 0);\n"
      "--fresh starts it from scratch.\n"
      "\n"
      "A worker that dies is reported and restarted (--max-restarts per worker, backoff from\n"
      "1 s doubling to 30 s) as a new member; the job goes on while at least the job's\n"
      "elastic.min_workers workers remain, and fails when fewer do. When the job completes,\n"
      "workers exit by themselves; after --exit-grace-s the launcher sends SIGTERM.\n"
      "Ctrl-C stops the job gracefully (twice: terminate, three times: kill).\n"
      "\n"
      "The last line says how the job ended. Exit status: 0 completed (or already completed,\n"
      "or stopped as asked), 1 failed (the reason is on the last line), 2 usage error.");
  RegisterFlags(args, &config);
  if (auto code = args.ParseOrExitCode(argc, argv, kProgram)) return *code;
  StatusOr<int> code = Run(std::move(config));
  return code.ok() ? *code : tools::ExitCode(kProgram, code.status());
}
