#include "trainer/safetensors.h"

#include <torch/torch.h>

#include <cctype>
#include <cstring>
#include <set>

#include "common/file_util.h"
#include "trainer/models/model.h"

namespace retort::trainer {
namespace {

struct DtypeName {
  torch::ScalarType type;
  const char* name;
};
constexpr DtypeName kDtypes[] = {{torch::kFloat, "F32"},     {torch::kHalf, "F16"},
                                 {torch::kBFloat16, "BF16"}, {torch::kDouble, "F64"},
                                 {torch::kLong, "I64"},      {torch::kInt, "I32"}};

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// A minimal JSON reader for the safetensors header: objects, strings, integer arrays.
class HeaderParser {
 public:
  explicit HeaderParser(const std::string& text) : s_(text) {}

  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<int64_t> offsets;
  };
  StatusOr<std::vector<std::pair<std::string, Entry>>> Parse() {
    std::vector<std::pair<std::string, Entry>> entries;
    RETORT_RETURN_IF_ERROR(Expect('{'));
    if (Peek() == '}') return entries;
    while (true) {
      RETORT_ASSIGN_OR_RETURN(std::string name, String());
      RETORT_RETURN_IF_ERROR(Expect(':'));
      RETORT_RETURN_IF_ERROR(Expect('{'));
      Entry e;
      bool metadata = name == "__metadata__";
      if (Peek() != '}') {
        while (true) {
          RETORT_ASSIGN_OR_RETURN(std::string key, String());
          RETORT_RETURN_IF_ERROR(Expect(':'));
          if (metadata || key == "dtype") {
            RETORT_ASSIGN_OR_RETURN(std::string value, String());
            if (!metadata) e.dtype = value;
          } else if (key == "shape") {
            RETORT_ASSIGN_OR_RETURN(e.shape, IntArray());
          } else if (key == "data_offsets") {
            RETORT_ASSIGN_OR_RETURN(e.offsets, IntArray());
          } else {
            return Error("unexpected key '" + key + "'");
          }
          if (Peek() == ',') {
            ++pos_;
            continue;
          }
          break;
        }
      }
      RETORT_RETURN_IF_ERROR(Expect('}'));
      if (!metadata) entries.emplace_back(name, std::move(e));
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      break;
    }
    RETORT_RETURN_IF_ERROR(Expect('}'));
    return entries;
  }

 private:
  char Peek() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }
  Status Error(const std::string& what) {
    return DataLossError("safetensors header: " + what + " at byte " + std::to_string(pos_));
  }
  Status Expect(char c) {
    if (Peek() != c) return Error(std::string("expected '") + c + "'");
    ++pos_;
    return Status::Ok();
  }
  StatusOr<std::string> String() {
    RETORT_RETURN_IF_ERROR(Expect('"'));
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) {
        const char esc = s_[++pos_];
        if (esc == 'u' && pos_ + 4 < s_.size()) {
          out += static_cast<char>(std::stoi(s_.substr(pos_ + 1, 4), nullptr, 16));
          pos_ += 4;
        } else {
          out += esc == 'n' ? '\n' : esc == 't' ? '\t' : esc;
        }
        ++pos_;
        continue;
      }
      out += s_[pos_++];
    }
    RETORT_RETURN_IF_ERROR(Expect('"'));
    return out;
  }
  StatusOr<std::vector<int64_t>> IntArray() {
    std::vector<int64_t> out;
    RETORT_RETURN_IF_ERROR(Expect('['));
    if (Peek() == ']') {
      ++pos_;
      return out;
    }
    while (true) {
      Peek();
      size_t end = pos_;
      while (end < s_.size() && std::isdigit(static_cast<unsigned char>(s_[end]))) ++end;
      if (end == pos_) return Error("expected a non-negative integer");
      out.push_back(std::stoll(s_.substr(pos_, end - pos_)));
      pos_ = end;
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      break;
    }
    RETORT_RETURN_IF_ERROR(Expect(']'));
    return out;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

Status WriteSafetensors(const std::string& path, const NamedTensors& tensors,
                        const std::map<std::string, std::string>& metadata) {
  std::string header = "{";
  std::vector<torch::Tensor> data;
  std::set<std::string> names;
  int64_t offset = 0;
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      header += (first ? "" : ",") + JsonString(k) + ":" + JsonString(v);
      first = false;
    }
    header += "}";
  }
  for (const auto& [name, tensor] : tensors) {
    if (!names.insert(name).second)
      return InvalidArgumentError("safetensors: duplicate tensor name '" + name + "'");
    const char* dtype = nullptr;
    for (const auto& d : kDtypes)
      if (d.type == tensor.scalar_type()) dtype = d.name;
    if (!dtype)
      return InvalidArgumentError("safetensors: tensor '" + name + "' has unsupported dtype " +
                                  std::string(c10::toString(tensor.scalar_type())));
    auto t = tensor.detach().to(torch::kCPU).contiguous();
    const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
    std::string shape;
    for (int64_t s : t.sizes()) shape += (shape.empty() ? "" : ",") + std::to_string(s);
    header += (header.size() > 1 ? "," : "") + JsonString(name) + ":{\"dtype\":\"" + dtype +
              "\",\"shape\":[" + shape + "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes) + "]}";
    offset += bytes;
    data.push_back(t);
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  std::string contents(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) contents[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  contents.reserve(8 + header.size() + offset);
  contents += header;
  for (const auto& t : data)
    contents.append(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  return WriteFileAtomically(path, contents);
}

StatusOr<NamedTensors> ReadSafetensors(const std::string& path) {
  RETORT_ASSIGN_OR_RETURN(std::string contents, ReadFileToString(path));
  if (contents.size() < 8) return DataLossError("safetensors " + path + ": shorter than 8 bytes");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(static_cast<unsigned char>(contents[i])) << (8 * i);
  if (n > contents.size() - 8)
    return DataLossError("safetensors " + path + ": header length " + std::to_string(n) +
                         " exceeds the file size " + std::to_string(contents.size()));
  const std::string header = contents.substr(8, n);
  const char* base = contents.data() + 8 + n;
  const uint64_t data_size = contents.size() - 8 - n;
  auto parsed = HeaderParser(header).Parse();
  if (!parsed.ok()) return parsed.status().WithContext(path);
  NamedTensors out;
  for (auto& [name, e] : *parsed) {
    const DtypeName* dtype = nullptr;
    for (const auto& d : kDtypes)
      if (e.dtype == d.name) dtype = &d;
    if (!dtype)
      return DataLossError("safetensors " + path + ": tensor '" + name + "' has dtype '" + e.dtype +
                           "' (supported: F32 F16 BF16 F64 I64 I32)");
    if (e.offsets.size() != 2 || e.offsets[0] > e.offsets[1] ||
        static_cast<uint64_t>(e.offsets[1]) > data_size)
      return DataLossError("safetensors " + path + ": tensor '" + name +
                           "' has data_offsets outside the data section");
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(dtype->type));
    const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
    if (bytes != e.offsets[1] - e.offsets[0])
      return DataLossError("safetensors " + path + ": tensor '" + name + "' has " +
                           std::to_string(e.offsets[1] - e.offsets[0]) + " bytes for shape " +
                           c10::str(t.sizes()));
    std::memcpy(t.data_ptr(), base + e.offsets[0], bytes);
    out.emplace_back(name, t);
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
