#include "trainer/safetensors.h"

#include <torch/torch.h>

#include <cstring>

#include "common/file_util.h"
#include "models/safetensors_layout.h"
#include "trainer/models/model.h"

namespace retort::trainer {
namespace {

// LibTorch's types for the dtype names of models/safetensors_layout.h.
struct DtypeName {
  torch::ScalarType type;
  const char* name;
};
constexpr DtypeName kDtypes[] = {{torch::kFloat, "F32"},     {torch::kHalf, "F16"},
                                 {torch::kBFloat16, "BF16"}, {torch::kDouble, "F64"},
                                 {torch::kLong, "I64"},      {torch::kInt, "I32"}};

const char* DtypeNameOf(torch::ScalarType type) {
  for (const auto& d : kDtypes)
    if (d.type == type) return d.name;
  return nullptr;
}

}  // namespace

Status WriteSafetensors(const std::string& path, const NamedTensors& tensors,
                        const std::map<std::string, std::string>& metadata) {
  std::vector<models::SafetensorsEntry> entries;
  std::vector<torch::Tensor> data;
  for (const auto& [name, tensor] : tensors) {
    const char* dtype = DtypeNameOf(tensor.scalar_type());
    if (!dtype)
      return InvalidArgumentError("safetensors: tensor '" + name + "' has unsupported dtype " +
                                  std::string(c10::toString(tensor.scalar_type())));
    data.push_back(tensor.detach().to(torch::kCPU).contiguous());
    entries.push_back({name, dtype, data.back().sizes().vec()});
  }
  uint64_t data_bytes = 0;
  RETORT_ASSIGN_OR_RETURN(std::string contents,
                          models::SafetensorsHeader(entries, metadata, &data_bytes));
  contents.reserve(contents.size() + data_bytes);
  for (const auto& t : data)
    contents.append(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  return WriteFileAtomically(path, contents);
}

StatusOr<NamedTensors> ReadSafetensors(const std::string& path) {
  RETORT_ASSIGN_OR_RETURN(std::string contents, ReadFileToString(path));
  // Every range and size is checked here, before anything is allocated.
  auto layout = models::ParseSafetensorsLayout(contents);
  if (!layout.ok()) return layout.status().WithContext(path);
  NamedTensors out;
  const char* data = contents.data() + layout->data_offset;
  for (const auto& t : layout->tensors) {
    torch::ScalarType type = torch::kFloat;
    for (const auto& d : kDtypes)
      if (t.dtype == d.name) type = d.type;
    auto tensor = torch::empty(t.shape, torch::TensorOptions().dtype(type));
    std::memcpy(tensor.data_ptr(), data + t.begin, t.end - t.begin);
    out.emplace_back(t.name, tensor);
  }
  return out;
}

Status ExportModelSafetensors(Model& model, const std::string& path) {
  NamedTensors tensors;
  for (auto& [name, t] : model.NamedParameters()) tensors.emplace_back(name, t.to(torch::kFloat));
  for (auto& [name, t] : model.NamedBuffers()) tensors.emplace_back(name, t);
  return WriteSafetensors(path, tensors, {{"format", "pt"}, {"source", model.Describe()}});
}

namespace {

// "'a', 'b', 'c' and 4 more"
std::string NameList(const std::vector<std::string>& names) {
  constexpr size_t kShown = 8;
  std::string out;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) out += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > kShown) out += " and " + std::to_string(names.size() - kShown) + " more";
  return out;
}

}  // namespace

Status LoadModelSafetensors(Model& model, const std::string& path,
                            const LoadWeightsOptions& options) {
  RETORT_ASSIGN_OR_RETURN(NamedTensors tensors, ReadSafetensors(path));
  std::map<std::string, torch::Tensor> by_name(tensors.begin(), tensors.end());
  auto state = model.NamedParameters();
  for (auto& buffer : model.NamedBuffers()) state.push_back(std::move(buffer));
  std::vector<std::string> missing;
  torch::NoGradGuard no_grad;
  for (auto& [name, target] : state) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      missing.push_back(name);
      continue;
    }
    if (!it->second.sizes().equals(target.sizes()))
      return InvalidArgumentError("safetensors " + path + ": '" + name + "' has shape " +
                                  c10::str(it->second.sizes()) + ", " + model.Describe() +
                                  " expects " + c10::str(target.sizes()));
    target.copy_(it->second);
    by_name.erase(it);
  }
  if (options.allow_partial) return Status::Ok();
  if (!missing.empty())
    return NotFoundError("safetensors " + path + " has no tensor " + NameList(missing) + " for " +
                         model.Describe() + " (" + std::to_string(missing.size()) + " of " +
                         std::to_string(state.size()) +
                         " missing; allow_partial_weights loads it anyway)");
  if (!by_name.empty()) {
    std::vector<std::string> extra;
    for (const auto& [name, t] : by_name) extra.push_back(name);
    return InvalidArgumentError("safetensors " + path + " holds " + NameList(extra) + ", which " +
                                model.Describe() +
                                " does not have (allow_partial_weights ignores them)");
  }
  return Status::Ok();
}

}  // namespace retort::trainer
