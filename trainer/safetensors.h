// safetensors files (https://github.com/huggingface/safetensors format): an 8-byte
// little-endian header length N, N bytes of JSON header
//   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value"}}
// padded with spaces to a multiple of 8, then the raw little-endian tensor bytes (offsets are
// relative to the end of the header). Written atomically (common/file_util.h).
//
// Supported dtypes: F32, F16, BF16, F64, I64, I32 (enough for student weights and teachers).
#pragma once

#include <torch/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace retort::trainer {

class Model;

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

Status WriteSafetensors(const std::string& path, const NamedTensors& tensors,
                        const std::map<std::string, std::string>& metadata = {});
// Reads every tensor (CPU, contiguous). DATA_LOSS on a malformed or truncated file.
StatusOr<NamedTensors> ReadSafetensors(const std::string& path);

// The student's parameters (and buffers) under their PyTorch names, float32.
Status ExportModelSafetensors(Model& model, const std::string& path);
struct LoadWeightsOptions {
  // Tolerate tensors the model has but the file lacks (they keep their values) and tensors the
  // file holds but the model lacks (ignored): for deliberate fine-tuning setups. Off: both are
  // errors naming the tensors.
  bool allow_partial = false;
};
// Loads a model's state by name into `model` (e.g. a pretrained teacher): its parameters and
// its buffers (BatchNorm running statistics and the like), under the names PyTorch's
// state_dict() uses, converting dtypes; shapes must match. Without allow_partial the file's
// names must be exactly the model's: a missing or an extra tensor is an error naming each.
Status LoadModelSafetensors(Model& model, const std::string& path,
                            const LoadWeightsOptions& options = {});

}  // namespace retort::trainer
