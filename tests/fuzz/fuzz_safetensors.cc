// libFuzzer harness: the safetensors layout parser (models/safetensors_layout.h) on hostile
// weight files, as a worker meets a teacher's or student's `weights_path`, and the header
// writer on whatever the parser accepted.
//
// Input: the bytes of a whole safetensors file. Any input must give a layout or DATA_LOSS,
// never a crash or a read outside the input. When the parser accepts a file:
//  - every tensor's range lies inside the data section and ranges do not overlap;
//  - the writer takes the same tensors and metadata, and the parser reads its header back
//    (with a data section of the size it states) to the same names, dtypes, shapes and
//    metadata, with the data packed in order.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "models/safetensors_layout.h"

namespace retort {
namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "fuzz_safetensors: %s\n", what);
  std::abort();
}

void CheckRoundTrip(const models::SafetensorsLayout& layout) {
  std::vector<models::SafetensorsEntry> entries;
  for (const auto& t : layout.tensors) entries.push_back({t.name, t.dtype, t.shape});
  uint64_t data_bytes = 0;
  auto header = models::SafetensorsHeader(entries, layout.metadata, &data_bytes);
  if (!header.ok()) Fail("the writer refused what the parser accepted");
  if (data_bytes > layout.data_bytes) Fail("packed data is larger than the parsed data section");
  std::string file = *header;
  file.append(data_bytes, '\0');
  auto back = models::ParseSafetensorsLayout(file);
  if (!back.ok()) Fail("the parser refused what the writer wrote");
  if (back->metadata != layout.metadata) Fail("metadata changed in the round trip");
  if (back->tensors.size() != layout.tensors.size()) Fail("tensor count changed");
  uint64_t offset = 0;
  for (size_t i = 0; i < back->tensors.size(); ++i) {
    const auto& a = layout.tensors[i];
    const auto& b = back->tensors[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape)
      Fail("a tensor's name, dtype or shape changed in the round trip");
    if (b.begin != offset || b.end - b.begin != a.end - a.begin) Fail("data not packed in order");
    offset = b.end;
  }
}

}  // namespace
}  // namespace retort

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view file(reinterpret_cast<const char*>(data), size);
  auto layout = retort::models::ParseSafetensorsLayout(file);
  if (!layout.ok()) {
    if (layout.status().code() != retort::StatusCode::kDataLoss)
      retort::Fail("a malformed file gave another code than DATA_LOSS");
    return 0;
  }
  if (layout->data_offset + layout->data_bytes != size) retort::Fail("sections do not add up");
  for (const auto& t : layout->tensors)
    if (t.begin > t.end || t.end > layout->data_bytes) retort::Fail("a range outside the data");
  retort::CheckRoundTrip(*layout);
  return 0;
}
