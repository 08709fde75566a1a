#include "models/safetensors_layout.h"

#include <algorithm>
#include <set>

namespace retort::models {
namespace {

constexpr std::string_view kMetadataKey = "__metadata__";

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Bytes a tensor of `shape` and `element_bytes` needs; false on a negative dimension or an
// overflow of 64 bits.
bool TensorBytes(const std::vector<int64_t>& shape, int element_bytes, uint64_t* bytes) {
  uint64_t n = static_cast<uint64_t>(element_bytes);
  for (int64_t d : shape) {
    if (d < 0) return false;
  }
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
    *bytes = 0;
    return true;
  }
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  }
  *bytes = n;
  return true;
}

// The JSON the safetensors header uses: one object of objects whose values are strings or
// arrays of non-negative integers. Anything else is an error at a byte offset.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : s_(text) {}

  Status Parse(SafetensorsLayout* layout) {
    std::set<std::string> names;
    RETORT_RETURN_IF_ERROR(Expect('{'));
    if (Peek() != '}') {
      while (true) {
        RETORT_ASSIGN_OR_RETURN(std::string name, String());
        RETORT_RETURN_IF_ERROR(Expect(':'));
        if (!names.insert(name).second) return Error("duplicate entry '" + name + "'");
        if (name == kMetadataKey) {
          RETORT_RETURN_IF_ERROR(Metadata(&layout->metadata));
        } else {
          SafetensorsTensor t;
          t.name = std::move(name);
          RETORT_RETURN_IF_ERROR(Tensor(&t));
          layout->tensors.push_back(std::move(t));
        }
        if (Peek() != ',') break;
        ++pos_;
      }
    }
    RETORT_RETURN_IF_ERROR(Expect('}'));
    if (Peek() != '\0') return Error("unexpected text after the header object");
    return Status::Ok();
  }

 private:
  Status Metadata(std::map<std::string, std::string>* out) {
    RETORT_RETURN_IF_ERROR(Expect('{'));
    if (Peek() != '}') {
      while (true) {
        RETORT_ASSIGN_OR_RETURN(std::string key, String());
        RETORT_RETURN_IF_ERROR(Expect(':'));
        RETORT_ASSIGN_OR_RETURN(std::string value, String());
        if (!out->emplace(key, std::move(value)).second)
          return Error("duplicate metadata key '" + key + "'");
        if (Peek() != ',') break;
        ++pos_;
      }
    }
    return Expect('}');
  }

  Status Tensor(SafetensorsTensor* t) {
    bool has_dtype = false, has_shape = false, has_offsets = false;
    RETORT_RETURN_IF_ERROR(Expect('{'));
    if (Peek() != '}') {
      while (true) {
        RETORT_ASSIGN_OR_RETURN(std::string key, String());
        RETORT_RETURN_IF_ERROR(Expect(':'));
        if (key == "dtype" && !has_dtype) {
          RETORT_ASSIGN_OR_RETURN(t->dtype, String());
          has_dtype = true;
        } else if (key == "shape" && !has_shape) {
          RETORT_ASSIGN_OR_RETURN(std::vector<uint64_t> dims, IntArray());
          for (uint64_t d : dims) {
            if (d > static_cast<uint64_t>(INT64_MAX)) return Error("dimension out of range");
            t->shape.push_back(static_cast<int64_t>(d));
          }
          has_shape = true;
        } else if (key == "data_offsets" && !has_offsets) {
          RETORT_ASSIGN_OR_RETURN(std::vector<uint64_t> offsets, IntArray());
          if (offsets.size() != 2) return Error("data_offsets needs two numbers");
          t->begin = offsets[0];
          t->end = offsets[1];
          has_offsets = true;
        } else {
          return Error("unexpected or repeated key '" + key + "' in tensor '" + t->name + "'");
        }
        if (Peek() != ',') break;
        ++pos_;
      }
    }
    RETORT_RETURN_IF_ERROR(Expect('}'));
    if (!has_dtype || !has_shape || !has_offsets)
      return Error("tensor '" + t->name + "' lacks " +
                   (!has_dtype   ? "dtype"
                    : !has_shape ? "shape"
                                 : "data_offsets"));
    return Status::Ok();
  }

  char Peek() {
    while (pos_ < s_.size() && IsSpace(s_[pos_])) ++pos_;
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }
  Status Error(const std::string& what) const {
    return DataLossError("safetensors header: " + what + " at byte " + std::to_string(pos_));
  }
  Status Expect(char c) {
    if (Peek() != c) return Error(std::string("expected '") + c + "'");
    ++pos_;
    return Status::Ok();
  }
  static int HexDigit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // Code points of \uXXXX escapes are written as UTF-8; surrogates are refused (tensor names
  // are ASCII in practice, and the writer escapes only control characters).
  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  StatusOr<std::string> String() {
    RETORT_RETURN_IF_ERROR(Expect('"'));
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) return Error("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) return Error("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) return Error("unterminated escape");
      const char esc = s_[pos_++];
      switch (esc) {
        case '"':
        case '\\':
        case '/':
          out += esc;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = 0;
          for (int i = 0; i < 4; ++i) {
            const int h = pos_ < s_.size() ? HexDigit(s_[pos_]) : -1;
            if (h < 0) return Error("\\u needs four hex digits");
            cp = cp * 16 + static_cast<uint32_t>(h);
            ++pos_;
          }
          if (cp >= 0xD800 && cp <= 0xDFFF) return Error("surrogate escape in a string");
          AppendUtf8(cp, &out);
          break;
        }
        default:
          return Error(std::string("unknown escape '\\") + esc + "'");
      }
    }
  }
  StatusOr<std::vector<uint64_t>> IntArray() {
    std::vector<uint64_t> out;
    RETORT_RETURN_IF_ERROR(Expect('['));
    if (Peek() == ']') {
      ++pos_;
      return out;
    }
    while (true) {
      Peek();
      const size_t start = pos_;
      uint64_t v = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        if (__builtin_mul_overflow(v, uint64_t{10}, &v) ||
            __builtin_add_overflow(v, static_cast<uint64_t>(s_[pos_] - '0'), &v))
          return Error("number out of range");
        ++pos_;
      }
      if (pos_ == start) return Error("expected a non-negative integer");
      if (out.size() >= 64) return Error("more than 64 numbers in an array");
      out.push_back(v);
      if (Peek() != ',') break;
      ++pos_;
    }
    RETORT_RETURN_IF_ERROR(Expect(']'));
    return out;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

std::string JsonString(const std::string& s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 0xF];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

const std::vector<SafetensorsDtype>& SafetensorsDtypes() {
  static const std::vector<SafetensorsDtype> kDtypes = {{"F32", 4}, {"F16", 2}, {"BF16", 2},
                                                        {"F64", 8}, {"I64", 8}, {"I32", 4}};
  return kDtypes;
}

const SafetensorsDtype* FindSafetensorsDtype(std::string_view name) {
  for (const auto& d : SafetensorsDtypes())
    if (name == d.name) return &d;
  return nullptr;
}

StatusOr<SafetensorsLayout> ParseSafetensorsLayout(std::string_view file) {
  if (file.size() < 8) return DataLossError("safetensors: shorter than 8 bytes");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(static_cast<unsigned char>(file[i])) << (8 * i);
  if (n > file.size() - 8)
    return DataLossError("safetensors: header length " + std::to_string(n) +
                         " exceeds the file size " + std::to_string(file.size()));
  if (n > kMaxSafetensorsHeaderBytes)
    return DataLossError("safetensors: header length " + std::to_string(n) + " exceeds the " +
                         std::to_string(kMaxSafetensorsHeaderBytes) + "-byte limit");
  SafetensorsLayout layout;
  layout.data_offset = 8 + n;
  layout.data_bytes = file.size() - 8 - n;
  RETORT_RETURN_IF_ERROR(HeaderParser(file.substr(8, n)).Parse(&layout));

  std::vector<const SafetensorsTensor*> by_offset;
  std::string supported;
  for (const auto& d : SafetensorsDtypes()) supported += std::string(" ") + d.name;
  for (const auto& t : layout.tensors) {
    const SafetensorsDtype* dtype = FindSafetensorsDtype(t.dtype);
    if (!dtype)
      return DataLossError("safetensors: tensor '" + t.name + "' has dtype '" + t.dtype +
                           "' (supported:" + supported + ")");
    if (t.begin > t.end || t.end > layout.data_bytes)
      return DataLossError("safetensors: tensor '" + t.name + "' has data_offsets [" +
                           std::to_string(t.begin) + ", " + std::to_string(t.end) +
                           "] outside the data section of " + std::to_string(layout.data_bytes) +
                           " bytes");
    uint64_t bytes = 0;
    if (!TensorBytes(t.shape, dtype->element_bytes, &bytes) || bytes != t.end - t.begin)
      return DataLossError("safetensors: tensor '" + t.name + "' has " +
                           std::to_string(t.end - t.begin) + " bytes, not what its " + t.dtype +
                           " shape of " + std::to_string(t.shape.size()) + " dimensions needs");
    if (t.end > t.begin) by_offset.push_back(&t);
  }
  std::sort(
      by_offset.begin(), by_offset.end(),
      [](const SafetensorsTensor* a, const SafetensorsTensor* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      return DataLossError("safetensors: tensors '" + by_offset[i - 1]->name + "' and '" +
                           by_offset[i]->name + "' overlap in the data section");
  return layout;
}

StatusOr<std::string> SafetensorsHeader(const std::vector<SafetensorsEntry>& entries,
                                        const std::map<std::string, std::string>& metadata,
                                        uint64_t* data_bytes) {
  std::string json = "{";
  if (!metadata.empty()) {
    json += JsonString(std::string(kMetadataKey)) + ":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      json += (first ? "" : ",") + JsonString(k) + ":" + JsonString(v);
      first = false;
    }
    json += "}";
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& e : entries) {
    if (e.name == kMetadataKey || !names.insert(e.name).second)
      return InvalidArgumentError("safetensors: tensor name '" + e.name +
                                  "' is repeated or reserved");
    const SafetensorsDtype* dtype = FindSafetensorsDtype(e.dtype);
    if (!dtype)
      return InvalidArgumentError("safetensors: tensor '" + e.name + "' has unsupported dtype '" +
                                  e.dtype + "'");
    uint64_t bytes = 0, end = 0;
    if (!TensorBytes(e.shape, dtype->element_bytes, &bytes) ||
        __builtin_add_overflow(offset, bytes, &end))
      return InvalidArgumentError("safetensors: tensor '" + e.name +
                                  "' has a negative or too large shape");
    std::string shape;
    for (int64_t s : e.shape) shape += (shape.empty() ? "" : ",") + std::to_string(s);
    json += (json.size() > 1 ? "," : "") + JsonString(e.name) + ":{\"dtype\":\"" + e.dtype +
            "\",\"shape\":[" + shape + "],\"data_offsets\":[" + std::to_string(offset) + "," +
            std::to_string(end) + "]}";
    offset = end;
  }
  json += "}";
  while (json.size() % 8 != 0) json += ' ';
  std::string out(8, '\0');
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  *data_bytes = offset;
  return out + json;
}

}  // namespace retort::models
