#include "coordinator/job_spec.h"

#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <set>
#include <sstream>
#include <vector>

#include "common/file_util.h"
#include "coordinator/job_spec_yaml.h"
#include "models/vit_presets.h"

namespace retort::coordinator {
namespace {

int SourceCount(const v1::ModelSpec& m) {
  return int{!m.preset().empty()} + int{!m.torchscript_path().empty()} +
         int{!m.exported_path().empty()};
}

// `teacher`: the model is only run forward, so an exported (AOTInductor) package may give it.
Status ValidateModel(const v1::ModelSpec& m, const std::string& field, bool teacher) {
  if (!teacher && !m.exported_path().empty())
    return InvalidArgumentError(
        field +
        ".exported_path: an exported package is forward-only and cannot be trained; "
        "give the student as a preset or torchscript_path");
  if (SourceCount(m) != 1)
    return InvalidArgumentError(
        field + (teacher ? ": set exactly one of preset, torchscript_path or exported_path"
                         : ": set exactly one of preset or torchscript_path"));
  if (!m.exported_path().empty() && !m.weights_path().empty())
    return InvalidArgumentError(field +
                                ".weights_path: an exported package carries its weights; export "
                                "the model with them instead (python -m retort.export)");
  if (!m.preset().empty() && models::FindVitPresetShape(m.preset()) == nullptr)
    return InvalidArgumentError(field + ".preset: unknown preset '" + m.preset() +
                                "' (known: " + models::VitPresetNameList() + ")");
  return Status::Ok();
}

Status Range(bool ok, const std::string& field, const std::string& rule) {
  return ok ? Status::Ok() : InvalidArgumentError(field + ": " + rule);
}

std::string Str(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// `field` within [lo, hi]; the message states the range and the value.
Status IntIn(int64_t v, int64_t lo, int64_t hi, const std::string& field) {
  return Range(v >= lo && v <= hi, field,
               "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                   std::to_string(v));
}

// Finite `v` with lo <= v (lo < v when lo_open) and v <= hi (v < hi when hi_open).
Status DoubleIn(double v, double lo, bool lo_open, double hi, bool hi_open,
                const std::string& field) {
  const bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  return Range(ok, field,
               std::string("must be in ") + (lo_open ? "(" : "[") + Str(lo) + ", " + Str(hi) +
                   (hi_open ? ")" : "]") + ", got " + Str(v));
}

// Bounds beyond which a value is a typo rather than a plan (steps x global_batch stays far
// below 2^63).
constexpr int64_t kMaxSteps = 1'000'000'000;
constexpr int64_t kMaxEpochs = 1'000'000;
constexpr int64_t kMaxSyntheticSamples = int64_t{1} << 40;
constexpr double kHuge = 1e6;

// Fields the spec defines whose behaviour this version of retort does not have yet: a job that
// sets one is refused by name rather than run without it. Each entry goes when its feature lands.
Status RefuseFieldsNotYetAvailable(const v1::JobSpec& s) {
  std::vector<std::string> set;
  for (const char* role : {"teacher", "student"}) {
    const auto& m = std::string(role) == "teacher" ? s.teacher() : s.student();
    if (m.drop_path_rate() != 0) set.push_back(std::string(role) + ".drop_path_rate");
    if (m.distillation_token()) set.push_back(std::string(role) + ".distillation_token");
  }
  const auto& a = s.dataset().augmentation();
  if (!a.auto_augment().empty()) set.push_back("dataset.augmentation.auto_augment");
  if (s.dataset().repeated_augmentations() > 1) set.push_back("dataset.repeated_augmentations");
  if (s.ema().decay() != 0 || s.ema().start_step() != 0) set.push_back("ema");
  if (s.max_micro_batch() != 0) set.push_back("max_micro_batch");
  if (!s.recipe().empty()) set.push_back("recipe");
  if (s.has_soft_labels()) set.push_back("soft_labels");
  const auto& kd = s.distillation();
  if (kd.loss() == "dist" || kd.has_dist_beta() || kd.has_dist_gamma())
    set.push_back("distillation.loss: dist");
  if (!kd.soft_labels().empty() || !kd.view_policy().empty())
    set.push_back("distillation.soft_labels");
  if (s.checkpoint().replicas() > 1) set.push_back("checkpoint.replicas");
  if (set.empty()) return Status::Ok();
  std::string names;
  for (const auto& n : set) names += (names.empty() ? "" : ", ") + n;
  return UnimplementedError(names +
                            ": not available in this version of retort (the spec format has "
                            "the field; training does not apply it yet). Remove it to run.");
}

Status ValidateMixing(const v1::JobSpec& s) {
  const auto& m = s.mixing();
  RETORT_RETURN_IF_ERROR(DoubleIn(m.mixup_alpha(), 0, false, 100, false, "mixing.mixup_alpha"));
  RETORT_RETURN_IF_ERROR(DoubleIn(m.cutmix_alpha(), 0, false, 100, false, "mixing.cutmix_alpha"));
  RETORT_RETURN_IF_ERROR(
      DoubleIn(m.label_smoothing(), 0, false, 1, true, "mixing.label_smoothing"));
  const bool on = m.mixup_alpha() > 0 || m.cutmix_alpha() > 0;
  if (!on) {
    // label_smoothing alone is plain label smoothing of the CE term.
    if (m.has_prob() || m.has_switch_prob() || !m.mode().empty())
      return InvalidArgumentError(
          "mixing: prob, switch_prob and mode need mixing on (set mixup_alpha or cutmix_alpha "
          "> 0)");
    return Status::Ok();
  }
  RETORT_RETURN_IF_ERROR(DoubleIn(m.prob(), 0, false, 1, false, "mixing.prob"));
  RETORT_RETURN_IF_ERROR(DoubleIn(m.switch_prob(), 0, false, 1, false, "mixing.switch_prob"));
  RETORT_RETURN_IF_ERROR(Range(m.mode() == "pair" || m.mode() == "batch", "mixing.mode",
                               "'" + m.mode() + "' is not one of pair, batch"));
  if (s.distillation().cache_top_k() > 0)
    return InvalidArgumentError(
        "distillation.cache_top_k: the teacher-logit cache is keyed by the view (sample, "
        "augmentation), and with mixing on the teacher sees mixed images that never repeat; "
        "set cache_top_k: 0 or turn mixing off");
  if (s.global_batch() < 2)
    return InvalidArgumentError("mixing: needs global_batch >= 2 (samples mix in pairs)");
  return Status::Ok();
}

Status ValidateStraggler(const v1::JobSpec& s) {
  const auto& st = s.elastic().straggler();
  if (!st.rebalance() && (st.has_threshold() || st.window_steps() != 0 || st.has_min_share()))
    return InvalidArgumentError(
        "elastic.straggler: threshold, window_steps and min_share tune rebalancing; set "
        "rebalance: true");
  if (st.rebalance()) {
    RETORT_RETURN_IF_ERROR(
        DoubleIn(st.threshold(), 0, true, 10, false, "elastic.straggler.threshold"));
    RETORT_RETURN_IF_ERROR(IntIn(st.window_steps(), 1, 100000, "elastic.straggler.window_steps"));
    RETORT_RETURN_IF_ERROR(
        DoubleIn(st.min_share(), 0, true, 1, false, "elastic.straggler.min_share"));
  }
  RETORT_RETURN_IF_ERROR(
      DoubleIn(st.drain_below(), 0, false, 1, true, "elastic.straggler.drain_below"));
  RETORT_RETURN_IF_ERROR(
      IntIn(st.drain_after_steps(), 0, kMaxSteps, "elastic.straggler.drain_after_steps"));
  if ((st.drain_below() > 0) != (st.drain_after_steps() > 0))
    return InvalidArgumentError(
        "elastic.straggler: drain_below and drain_after_steps go together (a fraction of the "
        "others' median throughput, and for how many steps)");
  return Status::Ok();
}

}  // namespace

bool HasTeacher(const v1::JobSpec& s) { return SourceCount(s.teacher()) > 0; }

void ApplyJobSpecDefaults(v1::JobSpec* s, const std::set<std::string>* written) {
  // A field gets its default only when the text left it out (or, for a spec built in code,
  // when it is 0/empty): an explicitly written value is kept and validated.
  auto absent = [written](const char* path) {
    return written == nullptr || written->count(path) == 0;
  };
  if (s->name().empty() && absent("name")) s->set_name("retort-job");
  auto* d = s->mutable_dataset();
  if (d->kind().empty() && absent("dataset.kind")) d->set_kind("fashion-mnist");
  if (d->kind() == "fashion-mnist" && d->path().empty() && absent("dataset.path"))
    d->set_path("/usr/share/datasets/fashion-mnist");
  if (d->prefetch_batches() == 0 && absent("dataset.prefetch_batches")) d->set_prefetch_batches(4);
  if (d->decode().empty() && absent("dataset.decode")) d->set_decode("auto");
  if (d->num_classes() == 0 && absent("dataset.num_classes"))
    d->set_num_classes(d->kind() == "fashion-mnist" ? 10 : 1000);
  if (d->image_size() == 0 && absent("dataset.image_size"))
    d->set_image_size(d->kind() == "fashion-mnist" ? 28 : 224);
  if (d->kind() == "synthetic" && d->synthetic_samples() == 0 &&
      absent("dataset.synthetic_samples"))
    d->set_synthetic_samples(4096);
  if (s->global_batch() == 0 && absent("global_batch")) s->set_global_batch(128);
  if (s->steps() == 0 && s->epochs() == 0 && absent("steps") && absent("epochs")) s->set_epochs(1);
  auto* o = s->mutable_optimizer();
  if (o->lr() == 0 && absent("optimizer.lr")) o->set_lr(1e-3);
  if (o->beta1() == 0 && absent("optimizer.beta1")) o->set_beta1(0.9);
  if (o->beta2() == 0 && absent("optimizer.beta2")) o->set_beta2(0.999);
  if (o->eps() == 0 && absent("optimizer.eps")) o->set_eps(1e-8);
  auto* kd = s->mutable_distillation();
  if (kd->temperature() == 0 && absent("distillation.temperature")) kd->set_temperature(4.0);
  const bool has_teacher = HasTeacher(*s);
  if (!kd->has_alpha()) kd->set_alpha(has_teacher ? 0.5 : 0.0);
  if (kd->loss() == "dkd") {
    // mdistiller's DKD defaults for CIFAR/ImageNet students.
    if (!kd->has_dkd_alpha()) kd->set_dkd_alpha(1.0);
    if (!kd->has_dkd_beta()) kd->set_dkd_beta(8.0);
  }
  auto* e = s->mutable_elastic();
  if (e->min_workers() == 0 && absent("elastic.min_workers")) e->set_min_workers(1);
  if (e->max_workers() == 0 && absent("elastic.max_workers"))
    e->set_max_workers(std::max(e->min_workers(), 1024));
  if (e->has_straggler() && e->straggler().rebalance()) {
    auto* st = e->mutable_straggler();
    if (!st->has_threshold()) st->set_threshold(0.1);
    if (st->window_steps() == 0 && absent("elastic.straggler.window_steps"))
      st->set_window_steps(20);
    if (!st->has_min_share()) st->set_min_share(0.25);
  }
  auto* c = s->mutable_checkpoint();
  if (c->keep() == 0 && absent("checkpoint.keep")) c->set_keep(3);
  if (s->precision().empty() && absent("precision")) s->set_precision("float32");
  if (s->seed() == 0 && absent("seed")) s->set_seed(1234);
  auto* m = s->mutable_mixing();
  if (m->mixup_alpha() > 0 || m->cutmix_alpha() > 0) {
    if (!m->has_prob()) m->set_prob(1.0);
    if (!m->has_switch_prob()) m->set_switch_prob(0.5);
    if (m->mode().empty() && absent("mixing.mode")) m->set_mode("pair");
    if (!m->has_label_smoothing()) m->set_label_smoothing(0.1);
  }
}

void ApplyJobSpecDefaults(v1::JobSpec* spec) { ApplyJobSpecDefaults(spec, nullptr); }

Status ValidateJobSpec(const v1::JobSpec& s) {
  RETORT_RETURN_IF_ERROR(Range(!s.name().empty(), "name", "must not be empty"));
  const bool has_teacher = HasTeacher(s);
  if (has_teacher || !s.teacher().weights_path().empty())
    RETORT_RETURN_IF_ERROR(ValidateModel(s.teacher(), "teacher", /*teacher=*/true));
  if (!has_teacher && s.distillation().alpha() != 0)
    return InvalidArgumentError(
        "distillation.alpha: must be 0 without a teacher (supervised training)");
  RETORT_RETURN_IF_ERROR(ValidateModel(s.student(), "student", /*teacher=*/false));
  const auto& d = s.dataset();
  static const std::set<std::string> kinds = {"fashion-mnist", "image-folder", "synthetic"};
  RETORT_RETURN_IF_ERROR(
      Range(kinds.count(d.kind()) > 0, "dataset.kind",
            "'" + d.kind() + "' is not one of fashion-mnist, image-folder, synthetic"));
  if (d.kind() != "synthetic" && d.path().empty())
    return InvalidArgumentError("dataset.path: required for " + d.kind());
  static const std::set<std::string> decoders = {"cpu", "gpu", "auto"};
  RETORT_RETURN_IF_ERROR(Range(decoders.count(d.decode()) > 0, "dataset.decode",
                               "'" + d.decode() + "' is not one of cpu, gpu, auto"));
  RETORT_RETURN_IF_ERROR(IntIn(d.loader_threads(), 0, 256, "dataset.loader_threads"));
  RETORT_RETURN_IF_ERROR(IntIn(d.prefetch_batches(), 1, 1024, "dataset.prefetch_batches"));
  RETORT_RETURN_IF_ERROR(IntIn(d.image_size(), 8, 4096, "dataset.image_size"));
  RETORT_RETURN_IF_ERROR(IntIn(d.num_classes(), 2, 1 << 20, "dataset.num_classes"));
  RETORT_RETURN_IF_ERROR(IntIn(d.synthetic_samples(), d.kind() == "synthetic" ? 1 : 0,
                               kMaxSyntheticSamples, "dataset.synthetic_samples"));
  RETORT_RETURN_IF_ERROR(IntIn(s.global_batch(), 1, 1 << 24, "global_batch"));
  if (s.steps() != 0 && s.epochs() != 0)
    return InvalidArgumentError("steps/epochs: set exactly one of steps or epochs, got steps " +
                                std::to_string(s.steps()) + " and epochs " +
                                std::to_string(s.epochs()));
  if (s.steps() == 0 && s.epochs() == 0)
    return InvalidArgumentError("steps/epochs: set exactly one of steps or epochs (>= 1)");
  if (s.steps() != 0) RETORT_RETURN_IF_ERROR(IntIn(s.steps(), 1, kMaxSteps, "steps"));
  if (s.epochs() != 0) RETORT_RETURN_IF_ERROR(IntIn(s.epochs(), 1, kMaxEpochs, "epochs"));
  const auto& o = s.optimizer();
  RETORT_RETURN_IF_ERROR(DoubleIn(o.lr(), 0, true, 10, true, "optimizer.lr"));
  RETORT_RETURN_IF_ERROR(
      DoubleIn(o.weight_decay(), 0, false, kHuge, false, "optimizer.weight_decay"));
  RETORT_RETURN_IF_ERROR(DoubleIn(o.beta1(), 0, false, 1, true, "optimizer.beta1"));
  RETORT_RETURN_IF_ERROR(DoubleIn(o.beta2(), 0, false, 1, true, "optimizer.beta2"));
  RETORT_RETURN_IF_ERROR(DoubleIn(o.eps(), 0, true, 1, false, "optimizer.eps"));
  RETORT_RETURN_IF_ERROR(IntIn(o.warmup_steps(), 0, kMaxSteps, "optimizer.warmup_steps"));
  // The schedule warms up, then decays over the rest: a warmup longer than the job would fail
  // every worker's optimizer setup. (With epochs the step count is known only to the workers.)
  if (s.steps() != 0 && o.warmup_steps() > s.steps())
    return InvalidArgumentError("optimizer.warmup_steps: must be <= steps (" +
                                std::to_string(s.steps()) + "), got " +
                                std::to_string(o.warmup_steps()));
  RETORT_RETURN_IF_ERROR(DoubleIn(o.min_lr(), 0, false, o.lr(), false, "optimizer.min_lr"));
  RETORT_RETURN_IF_ERROR(
      DoubleIn(o.clip_grad_norm(), 0, false, kHuge, false, "optimizer.clip_grad_norm"));
  const auto& kd = s.distillation();
  RETORT_RETURN_IF_ERROR(
      DoubleIn(kd.temperature(), 0, true, 100, false, "distillation.temperature"));
  RETORT_RETURN_IF_ERROR(DoubleIn(kd.alpha(), 0, false, 1, false, "distillation.alpha"));
  RETORT_RETURN_IF_ERROR(IntIn(kd.cache_top_k(), 0, d.num_classes(), "distillation.cache_top_k"));
  // Empty is "kl" (left empty so that specs stored by earlier versions compare equal).
  static const std::set<std::string> losses = {"", "kl", "hard", "dkd", "dist"};
  RETORT_RETURN_IF_ERROR(Range(losses.count(kd.loss()) > 0, "distillation.loss",
                               "'" + kd.loss() + "' is not one of kl, hard, dkd, dist"));
  if (!kd.loss().empty() && kd.loss() != "kl" && !has_teacher)
    return InvalidArgumentError("distillation.loss: " + kd.loss() +
                                " distils from a teacher; this job has none");
  if ((kd.has_dkd_alpha() || kd.has_dkd_beta()) && kd.loss() != "dkd")
    return InvalidArgumentError("distillation.dkd_alpha/dkd_beta: apply to loss: dkd only");
  RETORT_RETURN_IF_ERROR(
      DoubleIn(kd.dkd_alpha(), 0, false, kHuge, false, "distillation.dkd_alpha"));
  RETORT_RETURN_IF_ERROR(DoubleIn(kd.dkd_beta(), 0, false, kHuge, false, "distillation.dkd_beta"));
  RETORT_RETURN_IF_ERROR(IntIn(s.threads_per_worker(), 0, 1024, "threads_per_worker"));
  const auto& c = s.checkpoint();
  RETORT_RETURN_IF_ERROR(IntIn(c.every_steps(), 0, kMaxSteps, "checkpoint.every_steps"));
  RETORT_RETURN_IF_ERROR(IntIn(c.keep(), 1, 1000, "checkpoint.keep"));
  RETORT_RETURN_IF_ERROR(
      IntIn(c.replicate_every_steps(), 0, kMaxSteps, "checkpoint.replicate_every_steps"));
  const auto& e = s.elastic();
  RETORT_RETURN_IF_ERROR(IntIn(e.min_workers(), 1, 100000, "elastic.min_workers"));
  RETORT_RETURN_IF_ERROR(IntIn(e.max_workers(), e.min_workers(), 100000, "elastic.max_workers"));
  RETORT_RETURN_IF_ERROR(Range(s.precision() == "float32" || s.precision() == "bfloat16",
                               "precision", "'" + s.precision() + "' is not float32 or bfloat16"));
  RETORT_RETURN_IF_ERROR(IntIn(c.replicas(), 0, 16, "checkpoint.replicas"));
  RETORT_RETURN_IF_ERROR(
      IntIn(c.max_consecutive_failures(), 0, 1000000, "checkpoint.max_consecutive_failures"));
  RETORT_RETURN_IF_ERROR(ValidateMixing(s));
  RETORT_RETURN_IF_ERROR(ValidateStraggler(s));
  const auto& aug = d.augmentation();
  RETORT_RETURN_IF_ERROR(DoubleIn(aug.random_erase_prob(), 0, false, 1, false,
                                  "dataset.augmentation.random_erase_prob"));
  static const std::set<std::string> erase_modes = {"", "pixel", "rand", "const"};
  RETORT_RETURN_IF_ERROR(Range(
      erase_modes.count(aug.random_erase_mode()) > 0, "dataset.augmentation.random_erase_mode",
      "'" + aug.random_erase_mode() + "' is not one of pixel, rand, const"));
  RETORT_RETURN_IF_ERROR(
      IntIn(aug.random_erase_count(), 0, 64, "dataset.augmentation.random_erase_count"));
  RETORT_RETURN_IF_ERROR(
      DoubleIn(aug.color_jitter(), 0, false, 1, false, "dataset.augmentation.color_jitter"));
  if (aug.color_jitter() > 0 && (!d.augment() || d.kind() == "synthetic"))
    return InvalidArgumentError(
        "dataset.augmentation.color_jitter: needs images (fashion-mnist or image-folder) and "
        "dataset.augment: true (it is drawn from each sample's augmentation seed)");
  if (aug.random_erase_prob() > 0 && !d.augment())
    return InvalidArgumentError(
        "dataset.augmentation.random_erase_prob: erasing is drawn from each sample's "
        "augmentation seed; set dataset.augment: true");
  if (aug.random_erase_prob() == 0 &&
      (!aug.random_erase_mode().empty() || aug.random_erase_count() > 0))
    return InvalidArgumentError(
        "dataset.augmentation.random_erase_mode/count: set random_erase_prob > 0 as well");
  const auto& ev = s.evaluation();
  RETORT_RETURN_IF_ERROR(IntIn(ev.every_steps(), 0, kMaxSteps, "evaluation.every_steps"));
  RETORT_RETURN_IF_ERROR(IntIn(ev.every_epochs(), 0, kMaxEpochs, "evaluation.every_epochs"));
  RETORT_RETURN_IF_ERROR(
      IntIn(ev.max_samples(), 0, kMaxSyntheticSamples, "evaluation.max_samples"));
  if ((ev.export_best() || ev.max_samples() > 0) && ev.every_steps() == 0 && ev.every_epochs() == 0)
    return InvalidArgumentError(
        "evaluation: export_best and max_samples apply to evaluations during training; set "
        "evaluation.every_steps or evaluation.every_epochs");
  return RefuseFieldsNotYetAvailable(s);
}

StatusOr<v1::JobSpec> ParseJobSpec(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(source + ": not valid YAML/JSON: " + e.what());
  }
  if (!root.IsMap())
    return InvalidArgumentError(source + ": a job spec must be a mapping of fields");
  v1::JobSpec spec;
  std::set<std::string> written;
  RETORT_RETURN_IF_ERROR(YamlToMessage(root, &spec, "", &written).WithContext(source));
  // Written zeros where 0 would otherwise mean "the default": refused here with the field's own
  // name (ValidateJobSpec would only see that neither steps nor epochs is set).
  if (written.count("steps") && spec.steps() == 0)
    return InvalidArgumentError(source +
                                ": steps: must be >= 1, got 0 (leave steps out to train by "
                                "epochs)");
  if (written.count("epochs") && spec.epochs() == 0)
    return InvalidArgumentError(source +
                                ": epochs: must be >= 1, got 0 (leave epochs out to train by "
                                "steps)");
  ApplyJobSpecDefaults(&spec, &written);
  RETORT_RETURN_IF_ERROR(ValidateJobSpec(spec).WithContext(source));
  return spec;
}

StatusOr<v1::JobSpec> LoadJobSpecFile(const std::string& path) {
  RETORT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseJobSpec(text, path);
}

std::string JobSpecToJson(const v1::JobSpec& spec) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(spec, &out, opts);
  return out;
}

}  // namespace retort::coordinator
