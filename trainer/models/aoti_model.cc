// Exported (AOTInductor) teacher: wraps torch::inductor::AOTIModelPackageLoader.
#include "trainer/models/aoti_model.h"

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/version.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

namespace retort::trainer {
namespace {

// The name the loader gives a package's model (aoti_compile_and_package writes one, "model").
constexpr const char* kModelName = "model";

void EnableInputChecks() {
  static std::once_flag once;
  // Each package's kernels read the variable once, at their first run: set it before any load.
  std::call_once(once, [] { ::setenv("AOTI_RUNTIME_CHECK_INPUTS", "1", /*overwrite=*/0); });
}

c10::DeviceIndex LoaderIndex(torch::Device device) {
  return device.is_cuda() ? device.index() : c10::DeviceIndex{-1};
}

class ExportedModel final : public Model {
 public:
  ExportedModel(std::string path, torch::Device device,
                std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader)
      : path_(std::move(path)), device_(device), loader_(std::move(loader)) {}

  // A batch of one (a rank's part of a small batch, the last evaluation batch) runs as two: the
  // package's batch dimension starts at 2 (torch.export specialises a size of 1), and a frozen
  // teacher's logits of one sample do not depend on the other (eval mode).
  torch::Tensor Forward(const torch::Tensor& images) override {
    torch::Tensor input = images.to(device_, torch::kFloat);
    const bool single = input.dim() > 0 && input.size(0) == 1;
    if (single) input = torch::cat({input, input});
    std::vector<torch::Tensor> out = loader_->run({input.contiguous()});
    TORCH_CHECK(out.size() == 1, "exported model ", path_, " returned ", out.size(),
                " outputs, expected one (the logits)");
    torch::Tensor logits = single ? out[0].narrow(0, 0, 1) : out[0];
    return logits.to(images.device());
  }
  std::vector<std::pair<std::string, torch::Tensor>> NamedParameters() override { return {}; }
  void SetTraining(bool /*training*/) override {}
  bool IsTraining() const override { return false; }
  void To(torch::Device device) override {
    if (device.is_cuda() && device.index() < 0) device = torch::Device(torch::kCUDA, 0);
    if (device == device_) return;
    TORCH_CHECK(device.type() == device_.type(), "exported model ", path_, " was compiled for ",
                device_.type(), " and cannot run on ", device.str());
    // Another GPU of the same kind: load the kernels again for that device.
    loader_ = std::make_unique<torch::inductor::AOTIModelPackageLoader>(path_, kModelName, false, 1,
                                                                        LoaderIndex(device));
    device_ = device;
  }
  std::string Describe() const override { return "exported:" + path_; }

 private:
  std::string path_;
  torch::Device device_;
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader_;
};

}  // namespace

StatusOr<std::map<std::string, std::string>> ReadExportedPackageMetadata(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return InvalidArgumentError("exported model " + path + ": no such file");
  try {
    auto metadata =
        torch::inductor::AOTIModelPackageLoader::load_metadata_from_package(path, kModelName);
    return std::map<std::string, std::string>(metadata.begin(), metadata.end());
  } catch (const c10::Error& e) {
    return InvalidArgumentError("exported model " + path +
                                " is not a readable AOTInductor package (corrupt, truncated or "
                                "another format?): " +
                                e.what_without_backtrace());
  } catch (const std::exception& e) {
    return InvalidArgumentError("exported model " + path +
                                " is not a readable AOTInductor package (corrupt, truncated or "
                                "another format?): " +
                                e.what());
  }
}

StatusOr<std::string> ExportedPackageDeviceKind(const std::string& path) {
  RETORT_ASSIGN_OR_RETURN(auto metadata, ReadExportedPackageMetadata(path));
  auto it = metadata.find("AOTI_DEVICE_KEY");
  if (it == metadata.end() || it->second.empty())
    return InvalidArgumentError("exported model " + path +
                                ": its metadata names no device (AOTI_DEVICE_KEY)");
  return it->second;
}

StatusOr<std::unique_ptr<Model>> LoadExportedModel(const std::string& path, torch::Device device) {
  RETORT_ASSIGN_OR_RETURN(const std::string kind, ExportedPackageDeviceKind(path));
  if (kind != c10::DeviceTypeName(device.type(), /*lower_case=*/true))
    return FailedPreconditionError("exported model " + path + " was compiled for " + kind +
                                   " and cannot run on " + device.str() +
                                   " (export it with --device " +
                                   c10::DeviceTypeName(device.type(), true) + ")");
  if (device.is_cuda() && device.index() < 0) device = torch::Device(torch::kCUDA, 0);
  EnableInputChecks();
  try {
    auto loader = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
        path, kModelName, /*run_single_threaded=*/false, /*num_runners=*/1, LoaderIndex(device));
    return std::unique_ptr<Model>(std::make_unique<ExportedModel>(path, device, std::move(loader)));
  } catch (const c10::Error& e) {
    return InvalidArgumentError("cannot load exported model " + path + ": " +
                                e.what_without_backtrace());
  } catch (const std::exception& e) {
    return InvalidArgumentError("cannot load exported model " + path + ": " + e.what());
  }
}

std::string LinkedTorchVersion() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

}  // namespace retort::trainer
