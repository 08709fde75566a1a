// KD step throughput on CPU, single process (world size 1 over the thread fake): one JSON line
// per mode ("retort" with the teacher forward every step, "retort_cached" with the
// teacher-logit cache warm) plus the profiler summary. Compare with kd_reference.py via
// run_kd_bench.sh.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "bench/trainer/model_input_shape.h"
#include "common/args.h"
#include "trainer/cpu_runtime.h"
#include "trainer/data/batch.h"
#include "trainer/kd_step.h"
#include "trainer/models/model.h"
#include "trainer/teacher_logit_cache.h"
#include "trainer/testing/thread_shard_comm.h"

namespace rt = retort::trainer;

int main(int argc, char** argv) {
  std::string teacher_spec = "fm-teacher", student_spec = "fm-student";
  int64_t batch = 128, threads = 2, warmup = 3, steps = 20, parts = 2;
  bool profile_lines = false;
  std::string only_mode;  // empty: every mode
  retort::ArgParser args("kd_step_bench [flags]",
                         "KD step throughput on CPU, one process: one JSON line per mode plus "
                         "the profiler summary.");
  args.AddString("teacher", &teacher_spec, "teacher preset");
  args.AddString("student", &student_spec, "student preset");
  args.AddInt("batch", &batch, "samples per step");
  args.AddInt("threads", &threads, "intra-op threads");
  args.AddInt("warmup", &warmup, "untimed steps first");
  args.AddInt("steps", &steps, "timed steps");
  args.AddInt("local-parallelism", &parts,
              "parts the batch is split into in the retort and retort_cached modes");
  args.AddBool("profile-lines", &profile_lines, "print the profiler's line per step");
  args.AddString("mode", &only_mode,
                 "retort_intraop | retort | retort_cached (default: all three)");
  if (auto code = args.ParseOrExitCode(argc, argv, "kd_step_bench")) return *code;
  rt::ConfigureCpuRuntime(static_cast<int>(threads));
  auto group = std::make_shared<rt::testing::ThreadShardGroup>(1);
  rt::testing::ThreadShardComm comm(group, 0);

  struct Mode {
    const char* name;
    int64_t local_parallelism;
    bool cached;
  };
  const Mode modes[] = {
      {"retort_intraop", 1, false}, {"retort", parts, false}, {"retort_cached", parts, true}};
  for (const Mode& mode : modes) {
    if (!only_mode.empty() && only_mode != mode.name) continue;
    const bool cached = mode.cached;
    auto teacher = rt::BuildModel({.preset = teacher_spec}, 1);
    auto student = rt::BuildModel({.preset = student_spec}, 2);
    if (!teacher.ok() || !student.ok()) {
      std::cerr << (teacher.ok() ? student.status() : teacher.status()) << "\n";
      return 1;
    }
    const auto [channels, image, classes] =
        retort::bench::InputShapeOf(**student, {.channels = 1, .image = 28, .classes = 10});
    std::unique_ptr<rt::TeacherLogitCache> cache;
    rt::KdStepOptions options;
    if (cached)
      cache = std::move(rt::TeacherLogitCache::Create(classes, classes, 4.0, 1 << 20).value());
    options.cache = cache.get();
    options.local_parallelism = static_cast<int>(mode.local_parallelism);
    const int64_t numel = rt::FlatParameterCount(**student);
    auto step = rt::KdStep::Create(std::move(*teacher), std::move(*student), &comm,
                                   rt::MakeEvenShardPlan(numel, 1), options);
    if (!step.ok()) {
      std::cerr << step.status() << "\n";
      return 1;
    }
    rt::Batch b;
    b.images = torch::randn({batch, channels, image, image});
    b.labels = torch::randint(classes, {batch}, torch::kLong);
    for (int64_t i = 0; i < batch; ++i) {
      b.sample_indices.push_back(i);
      b.augmentation_seeds.push_back(0);
    }
    rt::StepProfiler profiler({}, profile_lines ? &std::cout : nullptr);
    std::vector<double> times;
    for (int64_t s = 0; s < warmup + steps; ++s) {
      auto result = (*step)->Step(b);
      if (!result.ok()) {
        std::cerr << result.status() << "\n";
        return 1;
      }
      if (s < warmup) continue;
      profiler.Record(result->timing);
      times.push_back(result->timing.total);
    }
    std::sort(times.begin(), times.end());
    double sum = 0;
    for (double t : times) sum += t;
    const double median = times[times.size() / 2];
    std::printf(
        "{\"impl\":\"%s\",\"local_parallelism\":%lld,\"teacher\":\"%s\",\"student\":\"%s\","
        "\"batch\":%lld,\"threads\":%lld,"
        "\"steps\":%lld,\"median_step_s\":%.5f,\"samples_per_s\":%.2f,\"mean_samples_per_s\":%.2f}"
        "\n",
        mode.name, static_cast<long long>(mode.local_parallelism), teacher_spec.c_str(),
        student_spec.c_str(), static_cast<long long>(batch), static_cast<long long>(threads),
        static_cast<long long>(steps), median, batch / median, batch * times.size() / sum);
    std::printf("%s\n", profiler.Summarize().ToJson().c_str());
    std::fflush(stdout);
  }
  return 0;
}
