#include "coordinator/job_spec.h"

#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <set>
#include <sstream>

#include "common/file_util.h"

namespace retort::coordinator {
namespace {

std::string JsonEscape(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

bool LooksNumeric(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return *end == '\0' && s != "." && s.find_first_of("xXnN") == std::string::npos;
}

// YAML -> JSON text. Plain scalars become numbers/bools/null where they look like one; quoted
// scalars stay strings.
Status YamlToJson(const YAML::Node& node, std::ostringstream& out, const std::string& path) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      out << "null";
      return Status::Ok();
    case YAML::NodeType::Scalar: {
      const std::string& v = node.Scalar();
      bool plain = node.Tag() == "?";
      if (plain && (v == "true" || v == "false"))
        out << v;
      else if (plain && (v == "null" || v == "~"))
        out << "null";
      else if (plain && LooksNumeric(v))
        out << v;
      else
        out << JsonEscape(v);
      return Status::Ok();
    }
    case YAML::NodeType::Sequence: {
      out << "[";
      for (size_t i = 0; i < node.size(); ++i) {
        if (i) out << ",";
        RETORT_RETURN_IF_ERROR(YamlToJson(node[i], out, path + "[" + std::to_string(i) + "]"));
      }
      out << "]";
      return Status::Ok();
    }
    case YAML::NodeType::Map: {
      out << "{";
      bool first = true;
      for (const auto& kv : node) {
        if (!first) out << ",";
        first = false;
        std::string key = kv.first.as<std::string>();
        out << JsonEscape(key) << ":";
        RETORT_RETURN_IF_ERROR(YamlToJson(kv.second, out, path.empty() ? key : path + "." + key));
      }
      out << "}";
      return Status::Ok();
    }
    case YAML::NodeType::Undefined:
      break;
  }
  return InvalidArgumentError(path + ": undefined YAML node");
}

const std::set<std::string>& KnownPresets() {
  static const std::set<std::string> presets = {"fm-teacher",    "fm-student", "fm-teacher-p7",
                                                "fm-student-p7", "vit-b16",    "vit-s16",
                                                "vit-ti16"};
  return presets;
}

Status ValidateModel(const v1::ModelSpec& m, const std::string& field) {
  if (m.preset().empty() == m.torchscript_path().empty())
    return InvalidArgumentError(field + ": set exactly one of preset or torchscript_path");
  if (!m.preset().empty() && KnownPresets().count(m.preset()) == 0) {
    std::string names;
    for (const auto& p : KnownPresets()) names += (names.empty() ? "" : ", ") + p;
    return InvalidArgumentError(field + ".preset: unknown preset '" + m.preset() +
                                "' (known: " + names + ")");
  }
  return Status::Ok();
}

Status Range(bool ok, const std::string& field, const std::string& rule) {
  return ok ? Status::Ok() : InvalidArgumentError(field + ": " + rule);
}

}  // namespace

void ApplyJobSpecDefaults(v1::JobSpec* s) {
  if (s->name().empty()) s->set_name("retort-job");
  auto* d = s->mutable_dataset();
  if (d->kind().empty()) d->set_kind("fashion-mnist");
  if (d->kind() == "fashion-mnist" && d->path().empty())
    d->set_path("/usr/share/datasets/fashion-mnist");
  if (d->prefetch_batches() == 0) d->set_prefetch_batches(4);
  if (d->num_classes() == 0) d->set_num_classes(d->kind() == "fashion-mnist" ? 10 : 1000);
  if (d->image_size() == 0) d->set_image_size(d->kind() == "fashion-mnist" ? 28 : 224);
  if (s->global_batch() == 0) s->set_global_batch(128);
  if (s->steps() == 0 && s->epochs() == 0) s->set_epochs(1);
  auto* o = s->mutable_optimizer();
  if (o->lr() == 0) o->set_lr(1e-3);
  if (o->beta1() == 0) o->set_beta1(0.9);
  if (o->beta2() == 0) o->set_beta2(0.999);
  if (o->eps() == 0) o->set_eps(1e-8);
  auto* kd = s->mutable_distillation();
  if (kd->temperature() == 0) kd->set_temperature(4.0);
  const bool has_teacher =
      !s->teacher().preset().empty() || !s->teacher().torchscript_path().empty();
  if (!kd->has_alpha()) kd->set_alpha(has_teacher ? 0.5 : 0.0);
  auto* e = s->mutable_elastic();
  if (e->min_workers() == 0) e->set_min_workers(1);
  if (e->max_workers() == 0) e->set_max_workers(std::max(e->min_workers(), 1024));
  auto* c = s->mutable_checkpoint();
  if (c->keep() == 0) c->set_keep(3);
  if (s->precision().empty()) s->set_precision("float32");
  if (s->seed() == 0) s->set_seed(1234);
}

Status ValidateJobSpec(const v1::JobSpec& s) {
  const bool has_teacher = !s.teacher().preset().empty() || !s.teacher().torchscript_path().empty();
  if (has_teacher || !s.teacher().weights_path().empty())
    RETORT_RETURN_IF_ERROR(ValidateModel(s.teacher(), "teacher"));
  if (!has_teacher && s.distillation().alpha() != 0)
    return InvalidArgumentError(
        "distillation.alpha: must be 0 without a teacher (supervised training)");
  RETORT_RETURN_IF_ERROR(ValidateModel(s.student(), "student"));
  static const std::set<std::string> kinds = {"fashion-mnist", "image-folder", "synthetic"};
  RETORT_RETURN_IF_ERROR(
      Range(kinds.count(s.dataset().kind()) > 0, "dataset.kind",
            "'" + s.dataset().kind() + "' is not one of fashion-mnist, image-folder, synthetic"));
  if (s.dataset().kind() == "image-folder" && s.dataset().path().empty())
    return InvalidArgumentError("dataset.path: required for image-folder");
  RETORT_RETURN_IF_ERROR(
      Range(s.dataset().loader_threads() >= 0 && s.dataset().loader_threads() <= 256,
            "dataset.loader_threads", "must be in [0, 256]"));
  RETORT_RETURN_IF_ERROR(
      Range(s.dataset().prefetch_batches() >= 1 && s.dataset().prefetch_batches() <= 1024,
            "dataset.prefetch_batches", "must be in [1, 1024]"));
  RETORT_RETURN_IF_ERROR(Range(s.dataset().image_size() >= 8 && s.dataset().image_size() <= 4096,
                               "dataset.image_size", "must be in [8, 4096]"));
  RETORT_RETURN_IF_ERROR(
      Range(s.dataset().num_classes() >= 2, "dataset.num_classes", "must be >= 2"));
  RETORT_RETURN_IF_ERROR(
      Range(s.global_batch() >= 1 && s.global_batch() <= (1 << 24), "global_batch",
            "must be in [1, 16777216], got " + std::to_string(s.global_batch())));
  RETORT_RETURN_IF_ERROR(
      Range(s.steps() >= 0 && s.epochs() >= 0, "steps/epochs", "must not be negative"));
  RETORT_RETURN_IF_ERROR(Range((s.steps() > 0) != (s.epochs() > 0), "steps/epochs",
                               "set exactly one of steps or epochs"));
  const auto& o = s.optimizer();
  RETORT_RETURN_IF_ERROR(Range(o.lr() > 0 && o.lr() < 10 && std::isfinite(o.lr()), "optimizer.lr",
                               "must be in (0, 10)"));
  RETORT_RETURN_IF_ERROR(Range(o.weight_decay() >= 0, "optimizer.weight_decay", "must be >= 0"));
  RETORT_RETURN_IF_ERROR(
      Range(o.beta1() >= 0 && o.beta1() < 1, "optimizer.beta1", "must be in [0, 1)"));
  RETORT_RETURN_IF_ERROR(
      Range(o.beta2() >= 0 && o.beta2() < 1, "optimizer.beta2", "must be in [0, 1)"));
  RETORT_RETURN_IF_ERROR(Range(o.eps() > 0, "optimizer.eps", "must be > 0"));
  RETORT_RETURN_IF_ERROR(Range(o.warmup_steps() >= 0, "optimizer.warmup_steps", "must be >= 0"));
  RETORT_RETURN_IF_ERROR(
      Range(o.min_lr() >= 0 && o.min_lr() <= o.lr(), "optimizer.min_lr", "must be in [0, lr]"));
  RETORT_RETURN_IF_ERROR(
      Range(o.clip_grad_norm() >= 0, "optimizer.clip_grad_norm", "must be >= 0"));
  const auto& kd = s.distillation();
  RETORT_RETURN_IF_ERROR(Range(kd.temperature() > 0 && kd.temperature() <= 100,
                               "distillation.temperature", "must be in (0, 100]"));
  RETORT_RETURN_IF_ERROR(
      Range(kd.alpha() >= 0 && kd.alpha() <= 1, "distillation.alpha", "must be in [0, 1]"));
  RETORT_RETURN_IF_ERROR(Range(kd.cache_top_k() >= 0, "distillation.cache_top_k", "must be >= 0"));
  RETORT_RETURN_IF_ERROR(Range(s.threads_per_worker() >= 0 && s.threads_per_worker() <= 1024,
                               "threads_per_worker", "must be in [0, 1024]"));
  const auto& c = s.checkpoint();
  RETORT_RETURN_IF_ERROR(Range(c.every_steps() >= 0, "checkpoint.every_steps", "must be >= 0"));
  RETORT_RETURN_IF_ERROR(
      Range(c.keep() >= 1 && c.keep() <= 1000, "checkpoint.keep", "must be in [1, 1000]"));
  RETORT_RETURN_IF_ERROR(
      Range(c.replicate_every_steps() >= 0, "checkpoint.replicate_every_steps", "must be >= 0"));
  const auto& e = s.elastic();
  RETORT_RETURN_IF_ERROR(Range(e.min_workers() >= 1, "elastic.min_workers", "must be >= 1"));
  RETORT_RETURN_IF_ERROR(Range(e.max_workers() >= e.min_workers() && e.max_workers() <= 100000,
                               "elastic.max_workers", "must be in [min_workers, 100000]"));
  RETORT_RETURN_IF_ERROR(Range(s.precision() == "float32" || s.precision() == "bfloat16",
                               "precision", "'" + s.precision() + "' is not float32 or bfloat16"));
  return Status::Ok();
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
  std::ostringstream json;
  RETORT_RETURN_IF_ERROR(YamlToJson(root, json, "").WithContext(source));
  v1::JobSpec spec;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = false;
  auto st = google::protobuf::util::JsonStringToMessage(json.str(), &spec, opts);
  if (!st.ok()) return InvalidArgumentError(source + ": " + std::string(st.message()));
  ApplyJobSpecDefaults(&spec);
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
