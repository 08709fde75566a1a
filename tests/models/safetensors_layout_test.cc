// The safetensors layout parser and header writer (models/safetensors_layout.h): round trips,
// and the hostile files that crashed or over-allocated in the reader it replaced (an uncaught
// exception on a bad \u escape or a number beyond 64 bits, an allocation of whatever size a
// shape claimed before its byte count was checked).
#include "models/safetensors_layout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace retort::models {
namespace {

// A file whose header is exactly `json` (padded to 8) followed by `data_bytes` zero bytes.
std::string FileWithHeader(std::string json, size_t data_bytes) {
  while (json.size() % 8 != 0) json += ' ';
  std::string out(8, '\0');
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json + std::string(data_bytes, '\0');
}

void ExpectDataLoss(const std::string& file, const std::string& words) {
  auto layout = ParseSafetensorsLayout(file);
  ASSERT_FALSE(layout.ok()) << "accepted: " << file.substr(8);
  EXPECT_EQ(layout.status().code(), StatusCode::kDataLoss) << layout.status();
  EXPECT_NE(layout.status().message().find(words), std::string::npos)
      << "expected '" << words << "' in: " << layout.status();
}

TEST(SafetensorsLayoutTest, WriterAndParserRoundTripNamesDtypesShapesAndMetadata) {
  const std::vector<SafetensorsEntry> entries = {{"a.weight", "F32", {3, 4}},
                                                 {"b", "I64", {5}},
                                                 {"q\"uote\\\n\x01", "BF16", {2}},
                                                 {"scalar", "F64", {}},
                                                 {"empty", "F16", {0, 7}}};
  uint64_t data_bytes = 0;
  auto header = SafetensorsHeader(entries, {{"format", "pt"}, {"k", "v\"\t"}}, &data_bytes);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(data_bytes, 12u * 4 + 5 * 8 + 2 * 2 + 8);
  EXPECT_EQ((header->size() - 8) % 8, 0u);
  auto layout = ParseSafetensorsLayout(*header + std::string(data_bytes, '\0'));
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->data_offset, header->size());
  EXPECT_EQ(layout->data_bytes, data_bytes);
  EXPECT_EQ(layout->metadata,
            (std::map<std::string, std::string>{{"format", "pt"}, {"k", "v\"\t"}}));
  ASSERT_EQ(layout->tensors.size(), entries.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& t = layout->tensors[i];
    EXPECT_EQ(t.name, entries[i].name);
    EXPECT_EQ(t.dtype, entries[i].dtype);
    EXPECT_EQ(t.shape, entries[i].shape);
    EXPECT_EQ(t.begin, offset);
    offset = t.end;
  }
}

TEST(SafetensorsLayoutTest, WriterRefusesDuplicateOrReservedNamesUnknownDtypesAndNegativeDims) {
  uint64_t bytes = 0;
  EXPECT_EQ(SafetensorsHeader({{"x", "F32", {1}}, {"x", "F32", {1}}}, {}, &bytes).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SafetensorsHeader({{"__metadata__", "F32", {1}}}, {}, &bytes).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SafetensorsHeader({{"x", "U8", {1}}}, {}, &bytes).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SafetensorsHeader({{"x", "F32", {-1}}}, {}, &bytes).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(SafetensorsLayoutTest, MalformedEscapesAndNumbersAreDataLossNotExceptions) {
  ExpectDataLoss(
      FileWithHeader(R"({"x\uZZZZ":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4),
      "four hex digits");
  ExpectDataLoss(FileWithHeader(R"({"x\u12":{}})", 0), "four hex digits");
  ExpectDataLoss(FileWithHeader(R"({"x\uD800":{}})", 0), "surrogate");
  ExpectDataLoss(FileWithHeader(R"({"x\q":{}})", 0), "unknown escape");
  ExpectDataLoss(
      FileWithHeader(R"({"x":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,4]}})",
                     4),
      "out of range");
  ExpectDataLoss(FileWithHeader(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[-1,4]}})", 4),
                 "non-negative integer");
  ExpectDataLoss(FileWithHeader("{\"x\n\":{}}", 0), "control character");
  ExpectDataLoss(FileWithHeader(R"({"x":{"dtype":"F32")", 0), "expected");
}

TEST(SafetensorsLayoutTest, ShapesAreCheckedAgainstTheirBytesBeforeAnythingIsAllocated) {
  // 2^40 elements claimed in 4 bytes: refused by arithmetic, not by a failed allocation.
  ExpectDataLoss(
      FileWithHeader(R"({"x":{"dtype":"F32","shape":[1099511627776],"data_offsets":[0,4]}})", 4),
      "not what its F32 shape");
  // 2^62 * 4 elements of 4 bytes wrap to 0 bytes in 64 bits: an overflow, not an empty tensor.
  ExpectDataLoss(
      FileWithHeader(
          R"({"x":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})", 0),
      "not what its F32 shape");
  // A zero dimension makes any other dimension an empty tensor.
  auto empty = ParseSafetensorsLayout(FileWithHeader(
      R"({"x":{"dtype":"F32","shape":[0,4611686018427387904],"data_offsets":[0,0]}})", 0));
  EXPECT_TRUE(empty.ok()) << empty.status();
}

TEST(SafetensorsLayoutTest, RangesMustBeInsideTheDataAndNotOverlap) {
  ExpectDataLoss(FileWithHeader(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
                 "outside the data section");
  ExpectDataLoss(FileWithHeader(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4),
                 "outside the data section");
  ExpectDataLoss(FileWithHeader(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                8),
                 "overlap");
  ExpectDataLoss(FileWithHeader(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                8),
                 "duplicate entry 'a'");
  ExpectDataLoss(FileWithHeader(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1),
                 "has dtype 'U8'");
  ExpectDataLoss(FileWithHeader(R"({"a":{"dtype":"F32","shape":[1]}})", 4), "lacks data_offsets");
  ExpectDataLoss(FileWithHeader(R"({"a":{"dtype":"F32","dtype":"F32"}})", 4), "repeated key");
  ExpectDataLoss(FileWithHeader(R"({} trailing)", 0), "after the header object");
}

TEST(SafetensorsLayoutTest, HeaderLengthBeyondTheFileOrTheLimitIsRefused) {
  ExpectDataLoss(std::string("\x07\0\0\0", 4), "shorter than 8 bytes");
  std::string huge(8, '\0');
  huge[7] = '\x01';  // 2^56
  ExpectDataLoss(huge + "{}      ", "exceeds the file size");
  // Within the file but over the limit: only the length prefix is checked, nothing is read.
  const uint64_t n = kMaxSafetensorsHeaderBytes + 8;
  std::string big(8, '\0');
  for (int i = 0; i < 8; ++i) big[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  big.resize(8 + n, ' ');
  ExpectDataLoss(big, "limit");
}

}  // namespace
}  // namespace retort::models
