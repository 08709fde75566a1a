// KD step throughput on one CUDA device: ViT-B/16 teacher -> ViT-S/16 student (by default),
// synthetic data already on the device, bf16 (frozen bf16 teacher, autocast student, fp32
// master weights, fused AdamW), one rank (no collective). Prints one JSON object; compare with
// kd_reference_gpu.py (PyTorch eager and torch.compile) through run_kd_gpu_bench.sh.
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "bench/trainer/model_input_shape.h"
#include "common/args.h"
#include "trainer/data/batch.h"
#include "trainer/kd_step.h"
#include "trainer/model_flops.h"
#include "trainer/models/model.h"
#include "trainer/testing/thread_shard_comm.h"

namespace rt = retort::trainer;

namespace {

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  std::string teacher_spec = "vit-b16", student_spec = "vit-s16", device_name = "cuda:0";
  int64_t batch = 256, warmup = 5, steps = 30;
  bool bf16 = true;
  double gflop_per_sample = 62.96;  // teacher forward + student forward and backward (B/16 -> S/16)
  retort::ArgParser args("kd_step_gpu_bench [flags]",
                         "One-GPU KD step throughput (JSON on stdout).");
  args.AddString("teacher", &teacher_spec, "teacher preset");
  args.AddString("student", &student_spec, "student preset");
  args.AddString("device", &device_name, "CUDA device");
  args.AddInt("batch", &batch, "samples per step");
  args.AddInt("warmup", &warmup, "untimed steps");
  args.AddInt("steps", &steps, "timed steps");
  args.AddBool("bf16", &bf16, "bf16 teacher and autocast student (--no-bf16: fp32)");
  args.AddDouble("gflop-per-sample", &gflop_per_sample,
                 "model FLOPs per sample for MFU (62.96 for vit-b16 -> vit-s16 at 224x224)");
  auto parsed = args.Parse(argc, argv);
  if (!parsed.ok()) {
    std::cerr << "kd_step_gpu_bench: " << parsed.status().message() << "\n";
    return 2;
  }
  if (!*parsed) return 0;
  if (torch::cuda::device_count() == 0) {
    std::cerr << "kd_step_gpu_bench: no CUDA device is visible\n";
    return 1;
  }
  const torch::Device device(device_name);
  cudaDeviceProp props{};
  cudaGetDeviceProperties(&props, device.index());

  auto teacher = rt::BuildModel({.preset = teacher_spec}, 1);
  auto student = rt::BuildModel({.preset = student_spec}, 2);
  if (!teacher.ok() || !student.ok()) {
    std::cerr << (teacher.ok() ? student.status() : teacher.status()) << "\n";
    return 1;
  }
  const auto [channels, image, classes] =
      retort::bench::InputShapeOf(**student, {.channels = 3, .image = 224, .classes = 1000});
  auto group = std::make_shared<rt::testing::ThreadShardGroup>(1);
  rt::testing::ThreadShardComm comm(group, 0);
  rt::KdStepOptions options;
  options.device = device;
  options.teacher_bf16_on_cuda = bf16;
  options.student_bf16_on_cuda = bf16;
  options.loss.alpha = 0.5;
  options.loss.temperature = 4.0;
  options.optimizer.lr = 1e-3;
  options.optimizer.weight_decay = 0.05;
  options.optimizer.max_grad_norm = 1.0;
  const rt::ShardPlan plan = rt::MakeEvenShardPlan(rt::FlatParameterCount(**student), 1);
  auto step = rt::KdStep::Create(std::move(*teacher), std::move(*student), &comm, plan, options);
  if (!step.ok()) {
    std::cerr << step.status() << "\n";
    return 1;
  }
  rt::Batch b;
  b.images = torch::randn({batch, channels, image, image}, torch::TensorOptions().device(device));
  b.labels =
      torch::randint(classes, {batch}, torch::TensorOptions().device(device).dtype(torch::kLong));
  for (int64_t i = 0; i < batch; ++i) {
    b.sample_indices.push_back(i);
    b.augmentation_seeds.push_back(0);
  }
  b.weight = 1.0;

  for (int64_t i = 0; i < warmup; ++i) {
    auto r = (*step)->Step(b);
    if (!r.ok()) {
      std::cerr << "warm-up step " << i << ": " << r.status() << "\n";
      return 1;
    }
  }
  torch::cuda::synchronize(device.index());
  c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
  std::vector<double> step_ms;
  double loss = 0;
  for (int64_t i = 0; i < steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = (*step)->Step(b);  // ends with a host read of the loss: the step is complete
    step_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!r.ok()) {
      std::cerr << "step " << i << ": " << r.status() << "\n";
      return 1;
    }
    loss = r->loss;
  }
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  const double median = Percentile(step_ms, 0.5);
  const double samples_per_s = batch / (median / 1e3);
  const double peak = rt::PeakBf16FlopsForDevice(props.name);
  std::ostringstream out;
  out.precision(6);
  out << "{\"impl\": \"retort\", \"device\": \"" << props.name << "\", \"teacher\": \""
      << teacher_spec << "\", \"student\": \"" << student_spec << "\", \"batch\": " << batch
      << ", \"bf16\": " << (bf16 ? "true" : "false") << ", \"steps\": " << steps
      << ", \"samples_per_s\": " << samples_per_s << ", \"step_ms_median\": " << median
      << ", \"step_ms_p99\": " << Percentile(step_ms, 0.99)
      << ", \"peak_memory_gib\": " << static_cast<double>(stats.allocated_bytes[0].peak) / (1 << 30)
      << ", \"final_loss\": " << loss;
  if (peak > 0) out << ", \"mfu\": " << samples_per_s * gflop_per_sample * 1e9 / peak;
  out << "}";
  std::cout << out.str() << std::endl;
  return 0;
}
