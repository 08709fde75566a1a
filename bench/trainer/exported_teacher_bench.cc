// Teacher formats side by side on the CPU, one process, one run: the same teacher as a built-in
// ViT preset, a TorchScript file and an exported AOTInductor package (same weights; the files
// come from export_bench_teachers.py through run_exported_teacher_bench.sh). One JSON line per
// --teacher: the median teacher forward at --batch (inference mode) and the median KD step with
// --student (local parallelism 1, so the step's teacher phase is the forward measured alone).
//
//   exported_teacher_bench --student torchscript:s.pt --teacher vit_builtin=preset:fm-teacher@w.st
//       --teacher vit_torchscript=torchscript:t.pt --teacher vit_exported=exported:t.pt2
//
// Model specs: preset:NAME[@WEIGHTS.safetensors] | torchscript:PATH | exported:PATH.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "common/args.h"
#include "trainer/cpu_runtime.h"
#include "trainer/data/batch.h"
#include "trainer/kd_step.h"
#include "trainer/models/aoti_model.h"
#include "trainer/models/model.h"
#include "trainer/testing/thread_shard_comm.h"

namespace rt = retort::trainer;

namespace {

// Builds the model a spec names (seed: of a preset's initialisation; exported packages load on
// `device`).
retort::StatusOr<std::unique_ptr<rt::Model>> BuildFromSpec(const std::string& text, uint64_t seed,
                                                           torch::Device device) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos)
    return retort::InvalidArgumentError("model spec '" + text + "': expected KIND:VALUE");
  const std::string kind = text.substr(0, colon), value = text.substr(colon + 1);
  if (kind == "exported") return rt::LoadExportedModel(value, device);
  retort::models::ModelSpec spec;
  if (kind == "preset") {
    const size_t at = value.find('@');
    spec.preset = value.substr(0, at);
    if (at != std::string::npos) spec.weights_path = value.substr(at + 1);
  } else if (kind == "torchscript") {
    spec.torchscript_path = value;
  } else {
    return retort::InvalidArgumentError("model spec '" + text +
                                        "': kind is not preset, torchscript or exported");
  }
  return rt::BuildModel(spec, seed);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> teachers;
  std::string student_text, shape_text = "1,28,28", device_text = "cpu";
  int64_t batch = 128, threads = 2, warmup = 2, reps = 10, steps = 10, classes = 10;
  retort::ArgParser args("exported_teacher_bench [flags]",
                         "Teacher forward and KD step per teacher format, CPU, JSON lines.");
  args.AddStringList("teacher", &teachers, "LABEL=SPEC, repeatable");
  args.AddString("student", &student_text, "student SPEC (empty: forward only)");
  args.AddString("input-shape", &shape_text, "C,H,W of a sample");
  args.AddString("device", &device_text, "cpu or cuda:N (exported packages: of that kind)");
  args.AddInt("classes", &classes, "classes (labels of the KD step)");
  args.AddInt("batch", &batch, "samples per forward and per step");
  args.AddInt("threads", &threads, "intra-op threads");
  args.AddInt("warmup", &warmup, "untimed forwards and steps first");
  args.AddInt("reps", &reps, "timed forwards");
  args.AddInt("steps", &steps, "timed KD steps");
  if (auto code = args.ParseOrExitCode(argc, argv, "exported_teacher_bench")) return *code;
  rt::ConfigureCpuRuntime(static_cast<int>(threads));

  std::vector<int64_t> shape = {batch};
  for (size_t pos = 0; pos <= shape_text.size();) {
    const size_t comma = std::min(shape_text.find(',', pos), shape_text.size());
    shape.push_back(std::stoll(shape_text.substr(pos, comma - pos)));
    pos = comma + 1;
  }
  const torch::Device device(device_text);
  torch::manual_seed(0);
  const torch::Tensor images = torch::randn(shape).to(device);
  rt::Batch b;
  b.images = images;
  b.labels = torch::randint(classes, {batch}, torch::kLong);
  for (int64_t i = 0; i < batch; ++i) {
    b.sample_indices.push_back(i);
    b.augmentation_seeds.push_back(0);
  }
  auto group = std::make_shared<rt::testing::ThreadShardGroup>(1);
  rt::testing::ThreadShardComm comm(group, 0);

  for (const std::string& entry : teachers) {
    const size_t eq = entry.find('=');
    const std::string label = entry.substr(0, eq);
    auto teacher = BuildFromSpec(entry.substr(eq + 1), 1, device);
    if (!teacher.ok()) {
      std::cerr << label << ": " << teacher.status() << "\n";
      return 1;
    }
    (*teacher)->To(device);
    (*teacher)->SetTraining(false);
    (*teacher)->Freeze();
    std::vector<double> forward;
    for (int64_t r = 0; r < warmup + reps; ++r) {
      torch::InferenceMode inference;
      const auto t0 = std::chrono::steady_clock::now();
      torch::Tensor logits = (*teacher)->Forward(images);
      if (device.is_cuda()) logits.cpu();  // waits for the device
      if (r >= warmup) forward.push_back(Seconds(t0));
    }
    double step_median = 0, teacher_phase = 0;
    if (!student_text.empty()) {
      auto student = BuildFromSpec(student_text, 2, device);
      if (!student.ok()) {
        std::cerr << "student: " << student.status() << "\n";
        return 1;
      }
      rt::KdStepOptions options;
      options.local_parallelism = 1;
      options.device = device;
      const int64_t numel = rt::FlatParameterCount(**student);
      auto step = rt::KdStep::Create(std::move(*teacher), std::move(*student), &comm,
                                     rt::MakeEvenShardPlan(numel, 1), options);
      if (!step.ok()) {
        std::cerr << label << ": " << step.status() << "\n";
        return 1;
      }
      std::vector<double> totals, phases;
      for (int64_t s = 0; s < warmup + steps; ++s) {
        auto result = (*step)->Step(b);
        if (!result.ok()) {
          std::cerr << label << ": " << result.status() << "\n";
          return 1;
        }
        if (s < warmup) continue;
        totals.push_back(result->timing.total);
        phases.push_back(result->timing.teacher_forward);
      }
      step_median = Median(totals);
      teacher_phase = Median(phases);
    }
    std::printf(
        "{\"bench\":\"exported_teacher\",\"label\":\"%s\",\"teacher\":\"%s\",\"student\":\"%s\","
        "\"device\":\"%s\",\"input_shape\":\"%s\",\"batch\":%lld,\"threads\":%lld,\"reps\":%lld,"
        "\"steps\":%lld,"
        "\"forward_median_s\":%.5f,\"kd_step_median_s\":%.5f,\"kd_teacher_phase_median_s\":%.5f}"
        "\n",
        label.c_str(), entry.substr(eq + 1).c_str(), student_text.c_str(), device_text.c_str(),
        shape_text.c_str(), static_cast<long long>(batch), static_cast<long long>(threads),
        static_cast<long long>(reps), static_cast<long long>(steps), Median(forward), step_median,
        teacher_phase);
    std::fflush(stdout);
  }
  return 0;
}
