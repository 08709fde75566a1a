#include "worker/job_setup.h"

#include "trainer/data/fashion_mnist.h"
#include "trainer/data/image_folder.h"
#include "trainer/data/image_folder_layout.h"
#include "trainer/data/synthetic_dataset.h"
#include "trainer/safetensors.h"

namespace retort::worker {

bool HasTeacher(const v1::JobSpec& job) {
  return !job.teacher().preset().empty() || !job.teacher().torchscript_path().empty();
}

std::string ModelSpecString(const v1::ModelSpec& m) {
  if (!m.torchscript_path().empty()) return "torchscript:" + m.torchscript_path();
  return "vit:" + m.preset();
}

StatusOr<std::unique_ptr<trainer::Model>> BuildModel(const v1::ModelSpec& spec, uint64_t seed) {
  RETORT_ASSIGN_OR_RETURN(auto model, trainer::MakeModel(ModelSpecString(spec), seed));
  if (!spec.weights_path().empty())
    RETORT_RETURN_IF_ERROR(
        trainer::LoadModelSafetensors(*model, spec.weights_path(),
                                      {.allow_partial = spec.allow_partial_weights()})
            .WithContext("loading weights " + spec.weights_path()));
  return model;
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

trainer::data::LoaderOptions MakeLoaderOptions(const v1::JobSpec& job, bool train) {
  trainer::data::LoaderOptions o;
  o.global_batch = job.global_batch();
  o.seed = job.seed();
  o.drop_last = train;
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
  o.teacher_bf16_on_cuda = job.precision() == "bfloat16";
  return o;
}

int64_t TotalSteps(const v1::JobSpec& job, int64_t steps_per_epoch) {
  return job.steps() > 0 ? job.steps() : job.epochs() * steps_per_epoch;
}

}  // namespace retort::worker
