// KD step throughput on one CUDA device: ViT-B/16 teacher -> ViT-S/16 student (by default),
// synthetic data already on the device, bf16 (frozen bf16 teacher, autocast student, fp32
// master weights, fused AdamW), one rank (no collective). Prints one JSON object; compare with
// kd_reference_gpu.py (PyTorch eager and torch.compile) through run_kd_gpu_bench.sh.
// Utilisation on two bases: "mfu" divides model FLOPs (every token of every block, the same for
// both sides), "mfu_computed" the FLOPs retort computes (its last block runs the class token
// only, about 7% fewer); the reference computes the full model, so its two figures agree.
// With --jpeg-folder the batches come from retort's Loader instead (an ImageFolder of JPEGs,
// decoded by nvJPEG on the device, or on CPU threads and copied): the object then also says how
// much of each step waited for data.
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "bench/trainer/model_input_shape.h"
#include "common/args.h"
#include "trainer/data/batch.h"
#include "trainer/data/image_folder.h"
#include "trainer/data/loader.h"
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
  std::string jpeg_folder, decode = "gpu";
  int64_t decode_threads = 4;
  double gflop_per_sample = 0;  // 0: model FLOPs from the ViT presets (trainer/model_flops.h)
  retort::ArgParser args("kd_step_gpu_bench [flags]",
                         "One-GPU KD step throughput (JSON on stdout).");
  args.AddString("teacher", &teacher_spec, "teacher preset");
  args.AddString("student", &student_spec, "student preset");
  args.AddString("device", &device_name, "CUDA device");
  args.AddInt("batch", &batch, "samples per step");
  args.AddInt("warmup", &warmup, "untimed steps");
  args.AddInt("steps", &steps, "timed steps");
  args.AddBool("bf16", &bf16, "bf16 teacher and autocast student (--no-bf16: fp32)");
  args.AddString("jpeg-folder", &jpeg_folder,
                 "ImageFolder of JPEGs to train on through retort's Loader (empty: synthetic "
                 "batches already on the device)");
  args.AddString("decode", &decode, "with --jpeg-folder: gpu (nvJPEG) or cpu (decode threads)");
  args.AddInt("decode-threads", &decode_threads, "with --jpeg-folder: decode threads");
  args.AddDouble("gflop-per-sample", &gflop_per_sample,
                 "model GFLOPs per sample for MFU (0: from the presets, 62.72 for vit-b16 -> "
                 "vit-s16 at 224x224)");
  auto parsed = args.Parse(argc, argv);
  if (!parsed.ok()) {
    std::cerr << "kd_step_gpu_bench: " << parsed.status().message() << "\n";
    return 2;
  }
  if (!*parsed) return 0;
  if (decode != "gpu" && decode != "cpu") {
    std::cerr << "kd_step_gpu_bench: --decode must be gpu or cpu, got '" << decode << "'\n";
    return 2;
  }
  torch::Device device(device_name);
  if (device.is_cuda() && !device.has_index()) device.set_index(0);  // "cuda" means cuda:0
  // --device cpu runs the same code paths on the CPU (a smoke test of the program: no MFU, no
  // peak memory).
  const bool on_cuda = device.is_cuda();
  if (on_cuda && torch::cuda::device_count() == 0) {
    std::cerr << "kd_step_gpu_bench: no CUDA device is visible\n";
    return 1;
  }
  cudaDeviceProp props{};
  std::snprintf(props.name, sizeof(props.name), "cpu");
  if (on_cuda) cudaGetDeviceProperties(&props, device.index());

  auto teacher = rt::BuildModel({.preset = teacher_spec}, 1);
  auto student = rt::BuildModel({.preset = student_spec}, 2);
  if (!teacher.ok() || !student.ok()) {
    std::cerr << (teacher.ok() ? student.status() : teacher.status()) << "\n";
    return 1;
  }
  // FLOPs per sample on both bases (model_flops.h): model FLOPs, the same work for retort and
  // the PyTorch references, and the FLOPs retort computes (its class-token-only last block).
  double gflop_model = gflop_per_sample, gflop_computed = gflop_per_sample;
  {
    auto t = rt::VitPreset(teacher_spec), s = rt::VitPreset(student_spec);
    if (t.ok() && s.ok()) {
      if (gflop_model <= 0) gflop_model = rt::KdTrainingFlopsPerSample(*s, &*t) / 1e9;
      gflop_computed = gflop_model *
                       rt::KdTrainingFlopsPerSample(*s, &*t, rt::FlopsCount::kComputed) /
                       rt::KdTrainingFlopsPerSample(*s, &*t);
    }
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

  // Real input: retort's Loader over the JPEG folder, one global batch per step (world of 1).
  std::unique_ptr<rt::data::Loader> loader;
  if (!jpeg_folder.empty()) {
    rt::data::ImageFolderOptions folder;
    folder.root = jpeg_folder;
    folder.image_size = static_cast<int>(image);
    auto dataset = rt::data::ImageFolderDataset::Open(folder);
    if (!dataset.ok()) {
      std::cerr << "kd_step_gpu_bench: " << dataset.status() << "\n";
      return 1;
    }
    rt::data::LoaderOptions lo;
    lo.global_batch = batch;
    lo.seed = 1;
    lo.num_threads = static_cast<int>(decode_threads);
    lo.decode_device = decode == "gpu" ? static_cast<int>(device.index()) : -1;
    lo.pin_memory = decode == "cpu" && on_cuda;
    auto created =
        rt::data::Loader::Create(std::shared_ptr<const rt::data::Dataset>(std::move(*dataset)), lo);
    if (!created.ok() || !(*created)->Seek(rt::data::SamplerState{0, 0}, 0, 1).ok()) {
      std::cerr << "kd_step_gpu_bench: loader: "
                << (created.ok() ? "seek failed" : created.status().ToString()) << "\n";
      return 1;
    }
    loader = std::move(*created);
  }
  // The next step's batch: synthetic, or the Loader's on the device (a CPU-decoded batch is
  // copied from pinned memory on the current stream).
  auto next_batch = [&]() -> retort::StatusOr<rt::Batch> {
    if (!loader) return b;
    RETORT_ASSIGN_OR_RETURN(rt::Batch next, loader->Next(retort::Deadline::AfterMs(120000)));
    if (next.images.device() != device) {
      next.images = next.images.to(device, /*non_blocking=*/true);
      next.labels = next.labels.to(device, /*non_blocking=*/true);
    }
    return next;
  };

  for (int64_t i = 0; i < warmup; ++i) {
    auto input = next_batch();
    if (!input.ok()) {
      std::cerr << "warm-up batch " << i << ": " << input.status() << "\n";
      return 1;
    }
    auto r = (*step)->Step(*input);
    if (!r.ok()) {
      std::cerr << "warm-up step " << i << ": " << r.status() << "\n";
      return 1;
    }
  }
  if (on_cuda) {
    torch::cuda::synchronize(device.index());
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
  }
  std::vector<double> step_ms;
  double loss = 0;
  const double wait_before = loader ? loader->stats().total_wait_seconds : 0.0;
  for (int64_t i = 0; i < steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto input = next_batch();
    if (!input.ok()) {
      std::cerr << "batch " << i << ": " << input.status() << "\n";
      return 1;
    }
    auto r = (*step)->Step(*input);  // ends with a host read of the loss: the step is complete
    step_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!r.ok()) {
      std::cerr << "step " << i << ": " << r.status() << "\n";
      return 1;
    }
    loss = r->loss;
  }
  const double peak_memory_gib =
      on_cuda ? static_cast<double>(c10::cuda::CUDACachingAllocator::getDeviceStats(device.index())
                                        .allocated_bytes[0]
                                        .peak) /
                    (1 << 30)
              : 0.0;
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
      << ", \"peak_memory_gib\": " << peak_memory_gib << ", \"final_loss\": ";
  if (std::isfinite(loss))
    out << loss;
  else
    out << "null";  // JSON has no NaN
  if (loader) {
    double total_ms = 0;
    for (double ms : step_ms) total_ms += ms;
    const double waited_ms = 1e3 * (loader->stats().total_wait_seconds - wait_before);
    out << ", \"input\": \"jpeg\", \"decode\": \"" << decode
        << "\", \"decode_threads\": " << decode_threads
        << ", \"data_wait_ms_mean\": " << waited_ms / static_cast<double>(steps)
        << ", \"data_wait_fraction\": " << waited_ms / total_ms;
  } else {
    out << ", \"input\": \"synthetic\"";
  }
  if (gflop_model > 0) {
    out << ", \"gflop_per_sample_model\": " << gflop_model
        << ", \"gflop_per_sample_computed\": " << gflop_computed;
  }
  if (peak > 0 && gflop_model > 0) {
    out << ", \"mfu\": " << samples_per_s * gflop_model * 1e9 / peak
        << ", \"mfu_computed\": " << samples_per_s * gflop_computed * 1e9 / peak;
  }
  out << "}";
  std::cout << out.str() << std::endl;
  return 0;
}
