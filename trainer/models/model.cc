#include "trainer/models/model.h"

#include <torch/types.h>
#include <torch/utils.h>

#include <map>

#include "trainer/models/vit.h"
#include "trainer/safetensors.h"

namespace retort::trainer {

StatusOr<std::unique_ptr<Model>> MakeModel(const std::string& spec, uint64_t seed) {
  const std::string kVit = "vit:", kScript = "torchscript:";
  if (spec.rfind(kScript, 0) == 0) return LoadTorchScriptModel(spec.substr(kScript.size()));
  if (spec.rfind(kVit, 0) == 0) {
    std::string preset = spec.substr(kVit.size());
    const size_t at = preset.find('@');
    if (at == std::string::npos) return MakeVitPreset(preset, seed);
    const std::string weights = preset.substr(at + 1);
    RETORT_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                            MakeVitPreset(preset.substr(0, at), seed));
    RETORT_RETURN_IF_ERROR(LoadModelSafetensors(*model, weights));
    return model;
  }
  if (spec.find(':') != std::string::npos)
    return InvalidArgumentError("model spec '" + spec +
                                "': expected 'vit:<preset>' or 'torchscript:<path>'");
  return MakeVitPreset(spec, seed);
}

Status CopyParameters(Model& src, Model& dst) {
  std::map<std::string, torch::Tensor> by_name;
  for (auto& [name, t] : src.NamedParameters()) by_name[name] = t;
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : dst.NamedParameters()) {
    auto it = by_name.find(name);
    if (it == by_name.end())
      return NotFoundError("CopyParameters: '" + name + "' of " + dst.Describe() +
                           " is missing in " + src.Describe());
    if (!it->second.sizes().equals(t.sizes()))
      return InvalidArgumentError("CopyParameters: '" + name + "' has shape " +
                                  c10::str(it->second.sizes()) + " in " + src.Describe() + " but " +
                                  c10::str(t.sizes()) + " in " + dst.Describe());
    t.copy_(it->second);
  }
  return Status::Ok();
}

}  // namespace retort::trainer
