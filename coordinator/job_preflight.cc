#include "coordinator/job_preflight.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "coordinator/job_spec.h"
#include "models/vit_presets.h"

namespace retort::coordinator {
namespace {

// The trainer's default Fashion-MNIST directory (trainer/data/fashion_mnist.h), used by workers
// when dataset.path is empty.
constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";

bool IsUrl(const std::string& path) { return path.find("://") != std::string::npos; }

// `field` names the spec field; `want_directory` whether it must be a directory (else a file).
void CheckLocalPath(const std::string& field, const std::string& path, bool want_directory,
                    std::vector<std::string>* problems) {
  if (path.empty() || IsUrl(path)) return;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    problems->push_back(field + ": '" + path +
                        "' does not exist on the coordinator's host (pass --no-check-paths when "
                        "only the workers can see it)");
    return;
  }
  const bool is_directory = std::filesystem::is_directory(status);
  if (want_directory && !is_directory)
    problems->push_back(field + ": '" + path + "' is not a directory");
  if (!want_directory && is_directory)
    problems->push_back(field + ": '" + path + "' is a directory, not a file");
}

// checkpoint.dir: the coordinator commits manifests there and creates it when missing, so it
// must be a directory, or creatable: its nearest existing ancestor a directory this process
// may write into.
void CheckCheckpointDir(const std::string& path, std::vector<std::string>* problems) {
  if (path.empty() || IsUrl(path)) return;
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) p = path;
  std::filesystem::path existing = p;
  while (!std::filesystem::exists(existing, ec) && existing.has_parent_path() &&
         existing.parent_path() != existing)
    existing = existing.parent_path();
  if (!std::filesystem::is_directory(existing, ec)) {
    problems->push_back("checkpoint.dir: '" + path + "' cannot be a directory: '" +
                        existing.string() + "' is not one");
    return;
  }
  if (::access(existing.c_str(), W_OK | X_OK) != 0)
    problems->push_back("checkpoint.dir: '" + path + "'" +
                        (existing == p
                             ? std::string(" is not writable")
                             : " cannot be created: '" + existing.string() + "' is not writable") +
                        " by the coordinator");
}

void CheckModelPaths(const std::string& field, const v1::ModelSpec& m,
                     std::vector<std::string>* problems) {
  CheckLocalPath(field + ".torchscript_path", m.torchscript_path(), false, problems);
  CheckLocalPath(field + ".exported_path", m.exported_path(), false, problems);
  if (!m.exported_path().empty())  // and the JSON sidecar beside the package
    CheckLocalPath(field + ".exported_path's sidecar", m.exported_path() + ".json", false,
                   problems);
  CheckLocalPath(field + ".weights_path", m.weights_path(), false, problems);
}

void CheckImageSize(const std::string& field, const v1::ModelSpec& m, int64_t image_size,
                    std::vector<std::string>* problems) {
  if (m.preset().empty()) return;  // TorchScript/exported: their input size is theirs to check
  const models::VitPresetShape* shape = models::FindVitPresetShape(m.preset());
  if (shape == nullptr) return;  // ValidateJobSpec names unknown presets
  const std::string preset = field + ".preset '" + m.preset() + "'";
  if (image_size % shape->patch_size != 0) {
    problems->push_back("dataset.image_size: " + std::to_string(image_size) +
                        " is not divisible by the patch size " + std::to_string(shape->patch_size) +
                        " of " + preset);
  } else if (image_size != shape->image_size) {
    problems->push_back("dataset.image_size: " + std::to_string(image_size) + " differs from the " +
                        std::to_string(shape->image_size) + "x" +
                        std::to_string(shape->image_size) + " input " + preset +
                        " takes (its position embeddings fix the number of patches)");
  }
}

}  // namespace

std::vector<std::string> PreflightProblems(const v1::JobSpec& job,
                                           const PreflightOptions& options) {
  std::vector<std::string> problems;
  const bool has_teacher = HasTeacher(job);
  if (options.check_paths) {
    const auto& d = job.dataset();
    if (d.kind() == "fashion-mnist")
      CheckLocalPath("dataset.path", d.path().empty() ? kDefaultFashionMnistDir : d.path(), true,
                     &problems);
    else if (d.kind() == "image-folder")
      CheckLocalPath("dataset.path", d.path(), true, &problems);
    if (has_teacher) CheckModelPaths("teacher", job.teacher(), &problems);
    CheckModelPaths("student", job.student(), &problems);
    CheckCheckpointDir(job.checkpoint().dir(), &problems);
  }
  if (has_teacher) CheckImageSize("teacher", job.teacher(), job.dataset().image_size(), &problems);
  CheckImageSize("student", job.student(), job.dataset().image_size(), &problems);
  return problems;
}

Status PreflightJob(const v1::JobSpec& job, const PreflightOptions& options) {
  const auto problems = PreflightProblems(job, options);
  if (problems.empty()) return Status::Ok();
  std::string message;
  for (const auto& p : problems) message += (message.empty() ? "" : "; ") + p;
  return InvalidArgumentError(message);
}

}  // namespace retort::coordinator
