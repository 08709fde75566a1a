// TorchScript teacher/student: wraps a torch::jit::Module loaded from a file.
#include <torch/script.h>

#include "trainer/models/model.h"

namespace retort::trainer {
namespace {

class TorchScriptModel final : public Model {
 public:
  TorchScriptModel(torch::jit::Module module, std::string path)
      : module_(std::move(module)), path_(std::move(path)) {}
  torch::Tensor Forward(const torch::Tensor& images) override {
    return module_.forward({images}).toTensor();
  }
  std::vector<std::pair<std::string, torch::Tensor>> NamedParameters() override {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) {
      out.emplace_back(p.name, p.value);
    }
    return out;
  }
  std::vector<std::pair<std::string, torch::Tensor>> NamedBuffers() override {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& b : module_.named_buffers(/*recurse=*/true)) out.emplace_back(b.name, b.value);
    return out;
  }
  void SetTraining(bool training) override { module_.train(training); }
  bool IsTraining() const override { return module_.is_training(); }
  void To(torch::Device device) override { module_.to(device); }
  std::string Describe() const override { return "torchscript:" + path_; }

 private:
  torch::jit::Module module_;
  std::string path_;
};

}  // namespace

StatusOr<std::unique_ptr<Model>> LoadTorchScriptModel(const std::string& path) {
  try {
    torch::jit::Module module = torch::jit::load(path);
    for (const auto& p : module.named_parameters(true)) {
      if (!p.value.is_floating_point())
        return InvalidArgumentError("TorchScript model " + path + ": parameter '" + p.name +
                                    "' is not floating point");
      p.value.set_requires_grad(true);
    }
    return std::unique_ptr<Model>(std::make_unique<TorchScriptModel>(std::move(module), path));
  } catch (const c10::Error& e) {
    return InvalidArgumentError("cannot load TorchScript model " + path + ": " +
                                e.what_without_backtrace());
  } catch (const std::exception& e) {
    // A damaged archive can fail below c10 (the zip reader, the unpickler's std containers).
    return InvalidArgumentError("cannot load TorchScript model " + path + ": " + e.what());
  }
}

}  // namespace retort::trainer
