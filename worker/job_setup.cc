#include "worker/job_setup.h"

#include "trainer/data/fashion_mnist.h"
#include "trainer/data/image_folder.h"
#include "trainer/data/image_folder_layout.h"
#include "trainer/data/image_transforms.h"
#include "trainer/data/synthetic_dataset.h"
#include "trainer/kd_loss.h"
#include "trainer/model_flops.h"
#include "trainer/models/vit.h"
#include "trainer/safetensors.h"
#include "worker/worker_device.h"

#include <torch/torch.h>

#include "common/logging.h"

namespace retort::worker {

bool HasTeacher(const v1::JobSpec& job) {
  const auto& t = job.teacher();
  return !t.preset().empty() || !t.torchscript_path().empty() || !t.exported_path().empty();
}

models::ModelSpec ToModelSpec(const v1::ModelSpec& m) {
  return {.preset = m.preset(),
          .torchscript_path = m.torchscript_path(),
          .weights_path = m.weights_path(),
          .allow_partial_weights = m.allow_partial_weights()};
}

double ModelFlopsPerSample(const v1::JobSpec& job) {
  if (!job.student().torchscript_path().empty()) return 0;
  auto student = trainer::VitPreset(job.student().preset());
  if (!student.ok()) return 0;
  if (!HasTeacher(job)) return trainer::KdTrainingFlopsPerSample(*student, nullptr);
  if (job.teacher().preset().empty()) return 0;  // TorchScript or exported
  auto teacher = trainer::VitPreset(job.teacher().preset());
  if (!teacher.ok()) return 0;
  return trainer::KdTrainingFlopsPerSample(*student, &*teacher);
}

StatusOr<std::unique_ptr<trainer::Model>> BuildModel(const v1::ModelSpec& spec, uint64_t seed) {
  return trainer::BuildModel(ToModelSpec(spec), seed);
}

StatusOr<std::shared_ptr<const trainer::data::Dataset>> OpenDataset(const v1::JobSpec& job,
                                                                    bool train) {
  const auto& d = job.dataset();
  if (d.kind() == "fashion-mnist") {
    trainer::data::FashionMnistOptions o;
    if (!d.path().empty()) o.root = d.path();
    o.train = train;
    if (!d.augment()) {
      o.padding = 0;
      o.horizontal_flip = false;
    }
    RETORT_ASSIGN_OR_RETURN(auto ds, trainer::data::FashionMnistDataset::Load(o));
    return std::shared_ptr<const trainer::data::Dataset>(std::move(ds));
  }
  if (d.kind() == "image-folder") {
    // <path>/train/ with val/ or test/, or <path>/<class>/ for both splits (image_folder_layout.h).
    RETORT_ASSIGN_OR_RETURN(auto layout,
                            trainer::data::ResolveImageFolderLayout(
                                d.path(), train ? trainer::data::ImageFolderSplit::kTrain
                                                : trainer::data::ImageFolderSplit::kEval));
    trainer::data::ImageFolderOptions o;
    o.root = layout.class_root;
    o.label_classes = layout.label_classes;
    o.image_size = d.image_size();
    RETORT_ASSIGN_OR_RETURN(auto ds, trainer::data::ImageFolderDataset::Open(o));
    return std::shared_ptr<const trainer::data::Dataset>(std::move(ds));
  }
  if (d.kind() == "synthetic") {
    trainer::data::SyntheticOptions o;
    o.size = d.synthetic_samples() > 0 ? d.synthetic_samples() : 4096;
    if (!train) o.size = std::max<int64_t>(o.size / 8, 1);
    int channels = d.image_size() == 28 ? 1 : 3;
    o.shape = {channels, d.image_size(), d.image_size()};
    o.num_classes = d.num_classes();
    o.seed = job.seed() + (train ? 0 : 1);
    RETORT_ASSIGN_OR_RETURN(auto ds, trainer::data::SyntheticDataset::Create(o));
    return std::shared_ptr<const trainer::data::Dataset>(
        std::make_shared<trainer::data::SyntheticDataset>(std::move(ds)));
  }
  return InvalidArgumentError("dataset.kind '" + d.kind() + "' is not supported");
}

StatusOr<int> ResolveDecodeDevice(const v1::JobSpec& job, const std::string& device) {
  const std::string& decode = job.dataset().decode();
  if (job.dataset().kind() != "image-folder" || decode == "cpu") return -1;
  const int cuda = CudaIndex(device);
  if (decode == "gpu" && cuda < 0)
    return FailedPreconditionError("dataset.decode: gpu, but this worker trains on " + device +
                                   " (use decode: auto or cpu, or a GPU worker)");
  if (!trainer::data::NvjpegDecoderBuilt()) {
    if (decode == "gpu")
      return FailedPreconditionError(
          "dataset.decode: gpu needs nvJPEG, which this build lacks (no CUDA toolkit or "
          "nvidia-nvjpeg wheel was found at build time)");
    return -1;
  }
  return cuda;
}

trainer::data::LoaderOptions MakeLoaderOptions(const v1::JobSpec& job, bool train,
                                               const std::string& device, int decode_device) {
  trainer::data::LoaderOptions o;
  o.decode_device = decode_device;
  o.pin_memory = CudaIndex(device) >= 0;
  o.cuda_device = CudaIndex(device);  // every decode thread selects the worker's device
  o.global_batch = job.global_batch();
  o.seed = job.seed();
  o.drop_last = train;
  o.split_unit = train && trainer::data::MixingEnabled(MakeMixingOptions(job)) ? 2 : 1;
  o.augment = train && job.dataset().augment();
  o.num_threads = job.dataset().loader_threads() > 0 ? job.dataset().loader_threads() : 1;
  o.prefetch_depth = std::max(1, job.dataset().prefetch_batches());
  o.skip_corrupt = job.dataset().skip_corrupt();
  return o;
}

trainer::KdStepOptions MakeKdStepOptions(const v1::JobSpec& job, int64_t total_steps) {
  trainer::KdStepOptions o;
  o.loss.alpha = HasTeacher(job) ? job.distillation().alpha() : 0.0;
  o.loss.temperature = job.distillation().temperature();
  o.loss.label_smoothing = job.mixing().label_smoothing();
  const std::string& loss = job.distillation().loss();
  o.loss.kind = loss == "hard"  ? trainer::DistillationLoss::kHard
                : loss == "dkd" ? trainer::DistillationLoss::kDkd
                                : trainer::DistillationLoss::kKl;
  if (job.distillation().has_dkd_alpha()) o.loss.dkd_alpha = job.distillation().dkd_alpha();
  if (job.distillation().has_dkd_beta()) o.loss.dkd_beta = job.distillation().dkd_beta();
  const auto& opt = job.optimizer();
  o.optimizer.lr = opt.lr();
  o.optimizer.beta1 = opt.beta1();
  o.optimizer.beta2 = opt.beta2();
  o.optimizer.eps = opt.eps();
  o.optimizer.weight_decay = opt.weight_decay();
  o.optimizer.warmup_steps = opt.warmup_steps();
  o.optimizer.total_steps = total_steps;
  o.optimizer.min_lr = opt.min_lr();
  o.optimizer.max_grad_norm = opt.clip_grad_norm();
  o.optimizer.decay_all_parameters = opt.decay_all_parameters();
  // One switch for both halves: a float32 job is fp32 end to end on a GPU too.
  o.teacher_bf16_on_cuda = job.precision() == "bfloat16";
  o.student_bf16_on_cuda = o.teacher_bf16_on_cuda;
  return o;
}

trainer::data::MixingOptions MakeMixingOptions(const v1::JobSpec& job) {
  const v1::MixingSpec& m = job.mixing();
  trainer::data::MixingOptions o;
  o.mixup_alpha = m.mixup_alpha();
  o.cutmix_alpha = m.cutmix_alpha();
  o.prob = m.has_prob() ? m.prob() : 1.0;
  o.switch_prob = m.has_switch_prob() ? m.switch_prob() : 0.5;
  o.per_batch = m.mode() == "batch";
  o.seed = job.seed();
  return o;
}

trainer::data::ColorJitterOptions MakeColorJitterOptions(const v1::JobSpec& job) {
  trainer::data::ColorJitterOptions o;
  o.strength = job.dataset().augment() ? job.dataset().augmentation().color_jitter() : 0.0;
  const trainer::data::Normalization norm = job.dataset().kind() == "fashion-mnist"
                                                ? trainer::data::FashionMnistNormalization()
                                                : trainer::data::ImageNetNormalization();
  for (int c = 0; c < 3; ++c) {
    o.mean[static_cast<size_t>(c)] = norm.mean[c];
    o.std[static_cast<size_t>(c)] = norm.std[c];
  }
  return o;
}

trainer::data::RandomErasingOptions MakeRandomErasingOptions(const v1::JobSpec& job) {
  const v1::AugmentationSpec& a = job.dataset().augmentation();
  trainer::data::RandomErasingOptions o;
  o.probability = job.dataset().augment() ? a.random_erase_prob() : 0.0;
  o.fill = a.random_erase_mode() == "rand"    ? trainer::data::EraseFill::kPerChannel
           : a.random_erase_mode() == "const" ? trainer::data::EraseFill::kZero
                                              : trainer::data::EraseFill::kPixel;
  o.count = std::max(1, a.random_erase_count());
  return o;
}

StatusOr<std::vector<trainer::Batch>> ReadEvalBatches(const trainer::data::Dataset& test,
                                                      int64_t begin, int64_t end) {
  constexpr int64_t kBatch = 500;
  const auto shape = test.shape();
  const int64_t per = shape.channels * shape.height * shape.width;
  std::vector<trainer::Batch> batches;
  for (int64_t i = begin; i < end; i += kBatch) {
    const int64_t count = std::min<int64_t>(kBatch, end - i);
    trainer::Batch b;
    b.images = torch::empty({count, shape.channels, shape.height, shape.width});
    b.labels = torch::empty({count}, torch::kInt64);
    auto* labels = b.labels.data_ptr<int64_t>();
    for (int64_t k = 0; k < count; ++k)
      RETORT_RETURN_IF_ERROR(test.Get(i + k, 0, b.images.data_ptr<float>() + k * per, &labels[k]));
    batches.push_back(std::move(b));
  }
  return batches;
}

Status CheckTeacherBeatsChance(const v1::JobSpec& job, trainer::Model& teacher,
                               const trainer::data::Dataset& test) {
  constexpr int64_t kSamples = 512;
  constexpr double kTimesChance = 1.5;
  // The file the teacher's weights came from: weights_path, or the exported package that
  // carries them.
  const std::string& weights = job.teacher().weights_path().empty() ? job.teacher().exported_path()
                                                                    : job.teacher().weights_path();
  if (weights.empty() || !job.evaluate() || test.size() == 0 || test.num_classes() < 2)
    return Status::Ok();
  RETORT_ASSIGN_OR_RETURN(auto batches,
                          ReadEvalBatches(test, 0, std::min<int64_t>(kSamples, test.size())));
  teacher.SetTraining(false);
  const trainer::Top1Result r = trainer::EvaluateTop1(teacher, batches);
  const double chance = 1.0 / test.num_classes();
  LOG_INFO("trainer") << "teacher " << teacher.Describe() << " with " << weights << ": top-1 "
                      << r.accuracy() << " on the first " << r.total << " test samples (chance "
                      << chance << ")";
  if (r.accuracy() >= kTimesChance * chance) return Status::Ok();
  const std::string figures = "top-1 " + std::to_string(r.accuracy()) + " on " +
                              std::to_string(r.total) + " test samples, chance " +
                              std::to_string(chance);
  if (job.distillation().allow_untrained_teacher()) {
    LOG_WARN("trainer") << "the teacher is at chance level (" << figures
                        << "); going on since distillation.allow_untrained_teacher is set";
    return Status::Ok();
  }
  return FailedPreconditionError(
      "the teacher loaded from " + weights + " is at chance level (" + figures +
      "): its weights do not fit this model or dataset (wrong file, missing buffers, other "
      "preprocessing?). Set distillation.allow_untrained_teacher: true to distil from it anyway");
}

int64_t TotalSteps(const v1::JobSpec& job, int64_t steps_per_epoch) {
  return job.steps() > 0 ? job.steps() : job.epochs() * steps_per_epoch;
}

}  // namespace retort::worker
