#include "worker/exported_teacher.h"

#include <torch/torch.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/file_util.h"
#include "common/logging.h"
#include "trainer/data/image_transforms.h"
#include "trainer/models/aoti_model.h"

namespace retort::worker {
namespace {

constexpr const char* kSidecarFormat = "retort.exported/1";

// What the job's dataset normalises its samples with; nullopt when it does not say
// (synthetic data is drawn already normalised).
std::optional<trainer::data::Normalization> DatasetNormalization(const v1::JobSpec& job) {
  if (job.dataset().kind() == "fashion-mnist") return trainer::data::FashionMnistNormalization();
  if (job.dataset().kind() == "image-folder") return trainer::data::ImageNetNormalization();
  return std::nullopt;
}

std::string Join(const std::vector<double>& v) {
  std::ostringstream out;
  for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << v[i];
  return "[" + out.str() + "]";
}

// "2.15.0+cu132" -> "2.15".
std::string MajorMinor(const std::string& version) {
  const size_t first = version.find('.');
  if (first == std::string::npos) return version;
  const size_t second = version.find_first_not_of("0123456789", first + 1);
  return version.substr(0, second);
}

Status CheckAgainstDataset(const std::string& package, const ExportedSidecar& sidecar,
                           const v1::JobSpec& job, const trainer::data::Dataset& test) {
  const auto shape = test.shape();
  const std::vector<int64_t> want = {shape.channels, shape.height, shape.width};
  if (sidecar.input_shape != want) {
    std::vector<double> have(sidecar.input_shape.begin(), sidecar.input_shape.end());
    return FailedPreconditionError(
        "exported teacher " + package + " takes input " + Join(have) +
        " but the dataset's samples are " + Join(std::vector<double>(want.begin(), want.end())) +
        " (C, H, W): export it with --input-shape " + std::to_string(shape.channels) + "," +
        std::to_string(shape.height) + "," + std::to_string(shape.width));
  }
  if (sidecar.num_classes != test.num_classes())
    return FailedPreconditionError(
        "exported teacher " + package + " has " + std::to_string(sidecar.num_classes) +
        " classes but the dataset has " + std::to_string(test.num_classes()));
  const auto norm = DatasetNormalization(job);
  if (norm && !sidecar.mean.empty()) {
    bool same = true;
    std::vector<double> mean, stdev;
    for (int c = 0; c < shape.channels; ++c) {
      mean.push_back(norm->mean[c]);
      stdev.push_back(norm->std[c]);
      same = same && std::abs(sidecar.mean[c] - norm->mean[c]) < 1e-3 &&
             std::abs(sidecar.std[c] - norm->std[c]) < 1e-3;
    }
    if (!same)
      return FailedPreconditionError(
          "exported teacher " + package + " expects inputs normalised with mean " +
          Join(sidecar.mean) + ", std " + Join(sidecar.std) + " but the " + job.dataset().kind() +
          " dataset normalises with mean " + Join(mean) + ", std " + Join(stdev));
  } else if (sidecar.mean.empty()) {
    LOG_WARN("trainer") << "exported teacher " << package
                        << ": its sidecar states no normalisation; not checked";
  }
  return Status::Ok();
}

// Runs the model at two batch sizes: a fixed batch dimension and logits of another shape show
// here, before training.
Status ProbeForward(const std::string& package, trainer::Model& model,
                    const ExportedSidecar& sidecar) {
  for (int64_t n : {2, 3}) {
    std::vector<int64_t> size = {n};
    size.insert(size.end(), sidecar.input_shape.begin(), sidecar.input_shape.end());
    torch::Tensor logits;
    try {
      torch::InferenceMode inference;
      logits = model.Forward(torch::zeros(size));
    } catch (const std::exception& e) {
      const std::string what = e.what();
      if (what.find("unmatched dim value at 0") != std::string::npos)
        return FailedPreconditionError(
            "exported teacher " + package + " has a fixed batch dimension (it does not run at " +
            std::to_string(n) + " samples): export it with a dynamic batch (python -m " +
            "retort.export does): " + what.substr(0, what.find('\n')));
      return FailedPreconditionError("exported teacher " + package + " fails on a batch of " +
                                     std::to_string(n) + ": " + what.substr(0, what.find('\n')));
    }
    if (logits.dim() != 2 || logits.size(0) != n || logits.size(1) != sidecar.num_classes ||
        !logits.is_floating_point()) {
      std::ostringstream got;
      got << logits.sizes() << " " << logits.scalar_type();
      return FailedPreconditionError(
          "exported teacher " + package + " returns " + got.str() + " for a batch of " +
          std::to_string(n) + "; a teacher must return float logits [batch, num_classes] = [" +
          std::to_string(n) + ", " + std::to_string(sidecar.num_classes) + "]");
    }
  }
  return Status::Ok();
}

}  // namespace

std::string ExportedSidecarPath(const std::string& package) { return package + ".json"; }

StatusOr<ExportedSidecar> ReadExportedSidecar(const std::string& package) {
  const std::string path = ExportedSidecarPath(package);
  auto text = ReadFileToString(path);
  if (!text.ok())
    return InvalidArgumentError(
        "exported teacher " + package + ": no readable sidecar " + path +
        " (python -m retort.export writes it beside the package): " + text.status().message());
  const std::string where = "exported teacher sidecar " + path + ": ";
  try {
    const auto j = nlohmann::json::parse(*text);
    if (j.value("format", std::string()) != kSidecarFormat)
      return InvalidArgumentError(where + "format is not '" + kSidecarFormat + "'");
    ExportedSidecar s;
    s.input_shape = j.at("input_shape").get<std::vector<int64_t>>();
    if (s.input_shape.size() != 3)
      return InvalidArgumentError(where + "input_shape must be [C, H, W]");
    for (int64_t d : s.input_shape)
      if (d <= 0) return InvalidArgumentError(where + "input_shape has a dimension <= 0");
    s.num_classes = j.at("num_classes").get<int64_t>();
    if (s.num_classes < 2) return InvalidArgumentError(where + "num_classes must be >= 2");
    s.torch_version = j.at("torch_version").get<std::string>();
    s.device = j.at("device").get<std::string>();
    const auto& norm = j.at("normalization");
    if (!norm.is_null()) {
      s.mean = norm.at("mean").get<std::vector<double>>();
      s.std = norm.at("std").get<std::vector<double>>();
      if (s.mean.size() != static_cast<size_t>(s.input_shape[0]) || s.std.size() != s.mean.size())
        return InvalidArgumentError(where + "normalization needs one mean and std per channel");
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(where + e.what());
  }
}

StatusOr<std::unique_ptr<trainer::Model>> LoadExportedTeacher(const v1::JobSpec& job,
                                                              const std::string& device,
                                                              const trainer::data::Dataset& test) {
  const std::string& package = job.teacher().exported_path();
  RETORT_ASSIGN_OR_RETURN(const ExportedSidecar sidecar, ReadExportedSidecar(package));
  const std::string linked = trainer::LinkedTorchVersion();
  if (MajorMinor(sidecar.torch_version) != MajorMinor(linked))
    return FailedPreconditionError(
        "exported teacher " + package + " was built by PyTorch " + sidecar.torch_version +
        ", this worker runs LibTorch " + linked +
        ": AOTInductor packages load only into the PyTorch release that compiled them "
        "(re-export it with PyTorch " +
        MajorMinor(linked) + ")");
  RETORT_ASSIGN_OR_RETURN(const std::string kind, trainer::ExportedPackageDeviceKind(package));
  const torch::Device target(device);
  const std::string target_kind = target.is_cuda() ? "cuda" : "cpu";
  if (kind != target_kind)
    return FailedPreconditionError(
        "exported teacher " + package + " was compiled for " + kind +
        " but this worker trains on " + device +
        ": export it on the workers' device kind (python -m retort.export --device " + target_kind +
        ")");
  RETORT_RETURN_IF_ERROR(CheckAgainstDataset(package, sidecar, job, test));
  RETORT_ASSIGN_OR_RETURN(auto model, trainer::LoadExportedModel(package, target));
  RETORT_RETURN_IF_ERROR(ProbeForward(package, *model, sidecar));
  return model;
}

}  // namespace retort::worker
