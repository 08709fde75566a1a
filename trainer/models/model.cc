#include "trainer/models/model.h"

#include <torch/types.h>
#include <torch/utils.h>

#include <map>

#include "trainer/models/vit.h"
#include "trainer/safetensors.h"

namespace retort::trainer {

StatusOr<std::unique_ptr<Model>> BuildModel(const models::ModelSpec& spec, uint64_t seed) {
  if (spec.preset.empty() == spec.torchscript_path.empty())
    return InvalidArgumentError("model spec: set exactly one of preset ('" + spec.preset +
                                "') or torchscript_path ('" + spec.torchscript_path + "')");
  std::unique_ptr<Model> model;
  if (!spec.preset.empty()) {
    RETORT_ASSIGN_OR_RETURN(model, MakeVitPreset(spec.preset, seed));
  } else {
    RETORT_ASSIGN_OR_RETURN(model, LoadTorchScriptModel(spec.torchscript_path));
  }
  if (!spec.weights_path.empty())
    RETORT_RETURN_IF_ERROR(LoadModelSafetensors(*model, spec.weights_path,
                                                {.allow_partial = spec.allow_partial_weights})
                               .WithContext("loading weights " + spec.weights_path));
  return model;
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
