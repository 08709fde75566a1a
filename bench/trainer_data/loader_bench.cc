// Loader throughput benchmark: decodes `steps` global batches (world size 1) with retort's
// Loader and prints one JSON line with images/s and the mean time Next() waited. With
// --make-jpeg-folder it instead writes a synthetic JPEG ImageFolder (for this program and the
// python reference to read). See bench/trainer_data/run.sh and RESULTS.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/args.h"
#include "common/status.h"
#include "trainer/data/fashion_mnist.h"
#include "trainer/data/image_codec.h"
#include "trainer/data/image_folder.h"
#include "trainer/data/loader.h"
#include "trainer/data/random.h"
#include "trainer/data/synthetic_dataset.h"

namespace retort::trainer::data {
namespace {

struct BenchOptions {
  std::string dataset = "fashion_mnist";  // fashion_mnist | image_folder | synthetic
  std::string root = "/usr/share/datasets/fashion-mnist";
  std::string make_jpeg_folder;
  int64_t num_images = 512;
  int jpeg_width = 500;
  int jpeg_height = 375;
  int num_classes = 8;
  int64_t batch = 256;
  int threads = 2;
  int depth = 2;
  int64_t steps = 50;
  int64_t warmup = 2;
  int image_size = 224;
  bool dct_scaling = true;
  bool augment = true;
  int decode_device = -1;
};

// Smooth colour field plus noise: compresses like a photograph (neither flat nor pure noise).
Status MakeJpegFolder(const BenchOptions& o) {
  const int w = o.jpeg_width, h = o.jpeg_height;
  std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
  for (int64_t i = 0; i < o.num_images; ++i) {
    SplitMix64 rng(MixSeed(99, static_cast<uint64_t>(i)));
    const double fx = rng.Uniform(0.005, 0.05), fy = rng.Uniform(0.005, 0.05),
                 phase = rng.Uniform(0, 6.28);
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        uint8_t* p = &rgb[static_cast<size_t>((y * w + x) * 3)];
        const double base = 0.5 + 0.5 * std::sin(fx * x + fy * y + phase);
        for (int c = 0; c < 3; ++c) {
          const double v = 255.0 * base * (0.6 + 0.2 * c) + static_cast<double>(rng.Below(24));
          p[c] = static_cast<uint8_t>(std::min(255.0, v));
        }
      }
    }
    RETORT_ASSIGN_OR_RETURN(std::string jpeg, EncodeJpeg(rgb.data(), w, h, 3, 90));
    const std::string dir = o.make_jpeg_folder + "/class_" + std::to_string(i % o.num_classes);
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/img_" + std::to_string(i) + ".jpg", std::ios::binary) << jpeg;
  }
  return Status::Ok();
}

StatusOr<std::shared_ptr<const Dataset>> OpenDataset(const BenchOptions& o) {
  if (o.dataset == "fashion_mnist") {
    FashionMnistOptions options;
    options.root = o.root;
    RETORT_ASSIGN_OR_RETURN(auto ds, FashionMnistDataset::Load(options));
    return std::shared_ptr<const Dataset>(std::move(ds));
  }
  if (o.dataset == "image_folder") {
    ImageFolderOptions options;
    options.root = o.root;
    options.image_size = o.image_size;
    options.jpeg_dct_scaling = o.dct_scaling;
    RETORT_ASSIGN_OR_RETURN(auto ds, ImageFolderDataset::Open(options));
    return std::shared_ptr<const Dataset>(std::move(ds));
  }
  if (o.dataset == "synthetic") {
    SyntheticOptions options;
    options.size = o.num_images;
    options.shape = SampleShape{3, o.image_size, o.image_size};
    RETORT_ASSIGN_OR_RETURN(auto ds, SyntheticDataset::Create(options));
    return std::shared_ptr<const Dataset>(std::make_shared<SyntheticDataset>(std::move(ds)));
  }
  return InvalidArgumentError("--dataset must be fashion_mnist, image_folder or synthetic, got " +
                              o.dataset);
}

Status Run(const BenchOptions& o) {
  if (!o.make_jpeg_folder.empty()) return MakeJpegFolder(o);
  RETORT_ASSIGN_OR_RETURN(std::shared_ptr<const Dataset> dataset, OpenDataset(o));
  LoaderOptions options;
  options.global_batch = o.batch;
  options.num_threads = o.threads;
  options.prefetch_depth = o.depth;
  options.augment = o.augment;
  options.seed = 1;
  options.drop_last = true;
  options.decode_device = o.decode_device;
  RETORT_ASSIGN_OR_RETURN(auto loader, Loader::Create(dataset, options));
  RETORT_RETURN_IF_ERROR(loader->Seek(SamplerState{0, 0}, 0, 1));
  for (int64_t i = 0; i < o.warmup; ++i) {
    RETORT_ASSIGN_OR_RETURN(Batch batch, loader->Next(Deadline::AfterMs(600000)));
  }
  const double wait_before = loader->stats().total_wait_seconds;
  const auto start = std::chrono::steady_clock::now();
  int64_t images = 0;
  for (int64_t i = 0; i < o.steps; ++i) {
    RETORT_ASSIGN_OR_RETURN(Batch batch, loader->Next(Deadline::AfterMs(600000)));
    images += batch.images.size(0);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double waited = loader->stats().total_wait_seconds - wait_before;
  std::printf(
      "{\"bench\":\"trainer_data_loader\",\"impl\":\"retort\",\"dataset\":\"%s\",\"threads\":%d,"
      "\"depth\":%d,\"batch\":%lld,\"steps\":%lld,\"image_size\":%d,\"dct_scaling\":%s,"
      "\"augment\":%s,\"decode\":\"%s\",\"images\":%lld,\"seconds\":%.4f,"
      "\"images_per_s\":%.1f,\"mean_next_wait_ms\":%.3f}\n",
      o.dataset.c_str(), o.threads, o.depth, static_cast<long long>(o.batch),
      static_cast<long long>(o.steps), o.image_size, o.dct_scaling ? "true" : "false",
      o.augment ? "true" : "false", o.decode_device >= 0 ? "gpu" : "cpu",
      static_cast<long long>(images), seconds, images / seconds,
      1000.0 * waited / static_cast<double>(o.steps));
  return Status::Ok();
}

}  // namespace
}  // namespace retort::trainer::data

int main(int argc, char** argv) {
  retort::trainer::data::BenchOptions o;
  retort::ArgParser args("trainer_data_bench [flags]",
                         "Data-loader throughput (JSON lines on stdout).");
  args.AddString("dataset", &o.dataset, "fashion_mnist | image_folder | synthetic");
  args.AddString("root", &o.root, "dataset root (Fashion-MNIST IDX folder or ImageFolder root)");
  args.AddString("make-jpeg-folder", &o.make_jpeg_folder,
                 "write a synthetic JPEG ImageFolder here and exit");
  args.AddInt("num-images", &o.num_images,
              "images to write (--make-jpeg-folder) or synthetic dataset size");
  args.AddInt("jpeg-width", &o.jpeg_width, "width of written JPEGs");
  args.AddInt("jpeg-height", &o.jpeg_height, "height of written JPEGs");
  args.AddInt("num-classes", &o.num_classes, "classes of the written folder");
  args.AddInt("batch", &o.batch, "global batch size");
  args.AddInt("threads", &o.threads, "decode threads");
  args.AddInt("depth", &o.depth, "prefetch depth (batches)");
  args.AddInt("steps", &o.steps, "timed steps");
  args.AddInt("warmup", &o.warmup, "untimed steps first");
  args.AddInt("image-size", &o.image_size, "output side for image_folder / synthetic");
  args.AddBool("dct-scaling", &o.dct_scaling, "JPEG DCT-domain downscaling");
  args.AddBool("augment", &o.augment, "training augmentation");
  args.AddInt("decode-device", &o.decode_device,
              "decode image_folder JPEGs on this CUDA device (nvJPEG; -1: the CPU), batches "
              "delivered as device tensors");
  if (auto code = args.ParseOrExitCode(argc, argv, "trainer_data_bench")) return *code;
  retort::Status status = retort::trainer::data::Run(o);
  if (!status.ok()) {
    std::fprintf(stderr, "trainer_data_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
