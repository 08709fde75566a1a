#include "trainer/flat_parameters.h"

#include <torch/torch.h>

#include "trainer/models/model.h"

namespace retort::trainer {

StatusOr<std::unique_ptr<FlatParameters>> FlatParameters::Create(Model& model) {
  auto named = model.NamedParameters();
  if (named.empty()) return InvalidArgumentError(model.Describe() + " has no parameters");
  std::unique_ptr<FlatParameters> flat(new FlatParameters());
  const torch::Device device = named.front().second.device();
  int64_t total = 0;
  for (auto& [name, p] : named) {
    if (p.scalar_type() != torch::kFloat)
      return InvalidArgumentError("parameter '" + name + "' of " + model.Describe() + " is " +
                                  std::string(c10::toString(p.scalar_type())) +
                                  "; the flat buffer holds float32 only");
    if (p.device() != device)
      return InvalidArgumentError("parameter '" + name + "' is on " + p.device().str() +
                                  " but the first parameter is on " + device.str());
    if (!p.requires_grad())
      return InvalidArgumentError("parameter '" + name + "' of " + model.Describe() +
                                  " does not require grad (frozen parameters are not supported "
                                  "in the student)");
    flat->slots_.push_back({name, total, p.numel(), p.dim()});
    total += p.numel();
  }
  auto options = torch::TensorOptions().dtype(torch::kFloat).device(device);
  flat->params_ = torch::empty({total}, options);
  flat->grads_ = torch::zeros({total}, options);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < named.size(); ++i) {
    torch::Tensor p = named[i].second;
    const ParamSlot& slot = flat->slots_[i];
    auto data_view = flat->params_.narrow(0, slot.offset, slot.numel).view(p.sizes());
    data_view.copy_(p.detach());
    p.set_data(data_view);
    flat->grad_views_.push_back(flat->grads_.narrow(0, slot.offset, slot.numel).view(p.sizes()));
    p.mutable_grad() = flat->grad_views_.back();
    flat->tensors_.push_back(p);
  }
  return flat;
}

void FlatParameters::ZeroGrads() {
  grads_.zero_();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    torch::Tensor& g = tensors_[i].mutable_grad();
    if (!g.defined() || g.data_ptr() != grad_views_[i].data_ptr()) g = grad_views_[i];
  }
}

bool FlatParameters::AllViewsAttached() const {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const auto* base = params_.data_ptr<float>() + slots_[i].offset;
    if (tensors_[i].data_ptr() != static_cast<const void*>(base)) return false;
    if (!tensors_[i].grad().defined() || tensors_[i].grad().data_ptr() != grad_views_[i].data_ptr())
      return false;
  }
  return true;
}

}  // namespace retort::trainer
