// The layout of a safetensors file (https://github.com/huggingface/safetensors), torch-free:
// an 8-byte little-endian header length N, N bytes of JSON header
//   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value"}}
// padded with spaces to a multiple of 8, then the data section: raw little-endian tensor bytes
// at [begin, end) relative to its start.
//
// This file holds the one parser and the one header writer: trainer/safetensors.{h,cc} moves
// the tensor bytes with LibTorch around them, and tests/fuzz/fuzz_safetensors.cc feeds the
// parser hostile files. Every check a file can fail is here, before any allocation the file
// sizes: a tensor's byte range must lie inside the data section, must be exactly the size its
// dtype and shape need (computed without overflow), and must not overlap another tensor's.
//
// Thread-safety: plain functions of their arguments.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace retort::models {

// The dtypes retort reads and writes (enough for student weights and teachers), by the name
// the safetensors header uses. The one list: trainer/safetensors.cc maps LibTorch types to it.
struct SafetensorsDtype {
  const char* name;  // "F32", ...
  int element_bytes;
};
const std::vector<SafetensorsDtype>& SafetensorsDtypes();
// nullptr when `name` is not one of SafetensorsDtypes().
const SafetensorsDtype* FindSafetensorsDtype(std::string_view name);

// Headers larger than this are refused (the reference implementation's limit).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsTensor {
  std::string name;
  std::string dtype;  // one of SafetensorsDtypes()
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte range in the data section
  uint64_t end = 0;
  bool operator==(const SafetensorsTensor&) const = default;
};

struct SafetensorsLayout {
  std::vector<SafetensorsTensor> tensors;  // in header order
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // where the data section starts in the file (8 + N)
  uint64_t data_bytes = 0;   // its size (the rest of the file)
};

// Parses and checks a whole safetensors file held in memory. DATA_LOSS naming what is wrong
// (and, for the JSON, at which byte of the header) for any malformed, truncated or
// inconsistent file; never reads outside `file`.
StatusOr<SafetensorsLayout> ParseSafetensorsLayout(std::string_view file);

// What the writer is given per tensor: its data is packed in this order, without gaps.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // one of SafetensorsDtypes()
  std::vector<int64_t> shape;
};
// The first 8 + N bytes of a file holding `entries` (length prefix and padded JSON header);
// the data section, sum of the entries' sizes, follows. `data_bytes` receives that sum.
// INVALID_ARGUMENT for a duplicate name, an unknown dtype or a negative dimension.
StatusOr<std::string> SafetensorsHeader(const std::vector<SafetensorsEntry>& entries,
                                        const std::map<std::string, std::string>& metadata,
                                        uint64_t* data_bytes);

}  // namespace retort::models
