#include "trainer/model_buffers.h"

#include <torch/torch.h>

#include <cstring>

#include "trainer/models/model.h"

namespace retort::trainer {
namespace {

int64_t PaddedWords(int64_t bytes) { return (bytes + 3) / 4; }

int64_t BufferBytes(Model& model) {
  int64_t bytes = 0;
  for (const auto& [name, t] : model.NamedBuffers())
    bytes += t.numel() * static_cast<int64_t>(t.element_size());
  return bytes;
}

}  // namespace

int64_t ModelBufferWords(Model& model) { return PaddedWords(BufferBytes(model)); }

torch::Tensor PackModelBuffers(Model& model) {
  torch::Tensor blob = torch::zeros({ModelBufferWords(model)}, torch::kFloat);
  auto* out = reinterpret_cast<unsigned char*>(blob.data_ptr<float>());
  for (const auto& [name, t] : model.NamedBuffers()) {
    torch::Tensor host = t.detach().to(torch::kCPU).contiguous();
    const size_t bytes = static_cast<size_t>(host.numel()) * host.element_size();
    if (bytes > 0) std::memcpy(out, host.data_ptr(), bytes);
    out += bytes;
  }
  return blob;
}

Status UnpackModelBuffers(const float* blob, int64_t words, Model& model) {
  const int64_t expected = ModelBufferWords(model);
  if (words != expected)
    return InvalidArgumentError("model buffers of " + model.Describe() + ": expected " +
                                std::to_string(expected) + " float32 words, got " +
                                std::to_string(words));
  const auto* in = reinterpret_cast<const unsigned char*>(blob);
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : model.NamedBuffers()) {
    torch::Tensor host = torch::empty(t.sizes(), t.options().device(torch::kCPU));
    const size_t bytes = static_cast<size_t>(host.numel()) * host.element_size();
    if (bytes > 0) std::memcpy(host.data_ptr(), in, bytes);
    in += bytes;
    t.copy_(host);
  }
  return Status::Ok();
}

Status BroadcastModelBuffers(Model& model, ShardComm& comm, Deadline deadline) {
  const int64_t words = ModelBufferWords(model);
  if (words == 0) return Status::Ok();
  // A communicator that takes device memory (NCCL) gets the blob on the model's device (that of
  // its buffers; words > 0, so there is one).
  const torch::Device device =
      comm.TakesDeviceMemory() ? model.NamedBuffers().front().second.device() : torch::kCPU;
  torch::Tensor all = torch::empty({words}, torch::TensorOptions(torch::kFloat).device(device));
  torch::Tensor mine = comm.rank() == 0 ? PackModelBuffers(model).to(device) : torch::Tensor();
  std::vector<int64_t> counts(comm.world_size(), 0);
  counts[0] = words;
  RETORT_RETURN_IF_ERROR(comm.AllGatherV(mine.defined() ? mine.data_ptr<float>() : nullptr,
                                         all.data_ptr<float>(), std::move(counts))
                             ->Wait(deadline)
                             .WithContext("model-buffer broadcast"));
  if (comm.rank() == 0) return Status::Ok();
  const torch::Tensor host = all.cpu();
  return UnpackModelBuffers(host.data_ptr<float>(), words, model);
}

}  // namespace retort::trainer
