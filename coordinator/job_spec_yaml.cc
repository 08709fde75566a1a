#include "coordinator/job_spec_yaml.h"

#include <google/protobuf/descriptor.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>

namespace retort::coordinator {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

std::string Line(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  return mark.is_null() ? std::string() : " (line " + std::to_string(mark.line + 1) + ")";
}

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

// Decimal number text: [+-]digits[.digits][(e|E)[+-]digits]. Rejects hex, inf, nan, '.5.'.
bool IsDecimalNumber(const std::string& s) {
  size_t i = 0;
  auto digits = [&] {
    const size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i > start;
  };
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  bool mantissa = digits();
  if (i < s.size() && s[i] == '.') {
    ++i;
    mantissa = digits() || mantissa;
  }
  if (!mantissa) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

std::optional<double> ParseDouble(const std::string& s) {
  if (!IsDecimalNumber(s)) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;  // may be inf on overflow; callers check finiteness
}

// An integral value in [lo, hi] written as a plain integer or in exponent form ("1e6").
template <typename T>
StatusOr<T> ParseInteger(const std::string& text, const std::string& field, const char* type) {
  const std::string range = std::string(" (") + type + ": [" +
                            std::to_string(std::numeric_limits<T>::min()) + ", " +
                            std::to_string(std::numeric_limits<T>::max()) + "])";
  const std::string digits = !text.empty() && text[0] == '+' ? text.substr(1) : text;
  T value{};
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty()) return value;
  if (ec == std::errc::result_out_of_range)
    return InvalidArgumentError(field + ": " + text + " is out of range" + range);
  const std::optional<double> d = ParseDouble(text);
  if (!d.has_value())
    return InvalidArgumentError(field + ": expected an integer, got " + Quoted(text));
  if (!std::isfinite(*d) || *d != std::floor(*d))
    return InvalidArgumentError(field + ": expected an integer, got " + text);
  // Doubles represent every power of two exactly: compare against 2^bits bounds.
  const double lo = static_cast<double>(std::numeric_limits<T>::min());
  const double hi_exclusive = std::ldexp(1.0, std::numeric_limits<T>::digits);
  if (*d < lo || *d >= hi_exclusive)
    return InvalidArgumentError(field + ": " + text + " is out of range" + range);
  return static_cast<T>(*d);
}

// Parses `text` as a T and adds it to (repeated) or sets it in `field` through the reflection
// call for T.
template <typename T>
Status StoreInteger(const std::string& text, const std::string& path, const char* type,
                    void (Reflection::*add)(Message*, const FieldDescriptor*, T) const,
                    void (Reflection::*set)(Message*, const FieldDescriptor*, T) const,
                    Message* message, const FieldDescriptor* field) {
  RETORT_ASSIGN_OR_RETURN(T v, ParseInteger<T>(text, path, type));
  (message->GetReflection()->*(field->is_repeated() ? add : set))(message, field, v);
  return Status::Ok();
}

// Sets (or, for a repeated field, adds) one scalar value.
Status SetScalar(const YAML::Node& node, Message* message, const FieldDescriptor* field,
                 const std::string& path) {
  if (node.IsNull())
    return InvalidArgumentError(path + ": no value" + Line(node) +
                                " (write a value, or leave the key out for the default)");
  if (!node.IsScalar())
    return InvalidArgumentError(path + ": expected a single value, got a " +
                                (node.IsMap() ? "mapping" : "list") + Line(node));
  const Reflection* r = message->GetReflection();
  const bool repeated = field->is_repeated();
  const std::string& text = node.Scalar();
  const bool plain = node.Tag() == "?";
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      if (text.empty())
        return InvalidArgumentError(path + ": empty string" + Line(node) +
                                    " (leave the key out for the default)");
      repeated ? r->AddString(message, field, text) : r->SetString(message, field, text);
      return Status::Ok();
    case FieldDescriptor::CPPTYPE_BOOL: {
      if (!plain || (text != "true" && text != "false"))
        return InvalidArgumentError(path + ": expected true or false, got " + Quoted(text) +
                                    Line(node));
      const bool v = text == "true";
      repeated ? r->AddBool(message, field, v) : r->SetBool(message, field, v);
      return Status::Ok();
    }
    case FieldDescriptor::CPPTYPE_INT32:
      return StoreInteger<int32_t>(text, path, "int32", &Reflection::AddInt32,
                                   &Reflection::SetInt32, message, field);
    case FieldDescriptor::CPPTYPE_INT64:
      return StoreInteger<int64_t>(text, path, "int64", &Reflection::AddInt64,
                                   &Reflection::SetInt64, message, field);
    case FieldDescriptor::CPPTYPE_UINT32:
      return StoreInteger<uint32_t>(text, path, "uint32", &Reflection::AddUInt32,
                                    &Reflection::SetUInt32, message, field);
    case FieldDescriptor::CPPTYPE_UINT64:
      return StoreInteger<uint64_t>(text, path, "uint64", &Reflection::AddUInt64,
                                    &Reflection::SetUInt64, message, field);
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: {
      const std::optional<double> v = ParseDouble(text);
      if (!v.has_value())
        return InvalidArgumentError(path + ": expected a number, got " + Quoted(text) + Line(node));
      if (!std::isfinite(*v))
        return InvalidArgumentError(path + ": " + text + " is not a finite number" + Line(node));
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT) {
        const auto f = static_cast<float>(*v);
        repeated ? r->AddFloat(message, field, f) : r->SetFloat(message, field, f);
      } else {
        repeated ? r->AddDouble(message, field, *v) : r->SetDouble(message, field, *v);
      }
      return Status::Ok();
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const EnumValueDescriptor* value = field->enum_type()->FindValueByName(text);
      if (value == nullptr) {
        std::string names;
        for (int i = 0; i < field->enum_type()->value_count(); ++i)
          names += (i ? ", " : "") + field->enum_type()->value(i)->name();
        return InvalidArgumentError(path + ": " + Quoted(text) + " is not one of " + names +
                                    Line(node));
      }
      repeated ? r->AddEnum(message, field, value) : r->SetEnum(message, field, value);
      return Status::Ok();
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return InvalidArgumentError(path + ": unsupported field type");
}

Status SetMessage(const YAML::Node& node, Message* message, const FieldDescriptor* field,
                  const std::string& path, std::set<std::string>* written) {
  if (node.IsNull())
    return InvalidArgumentError(path + ": no value" + Line(node) +
                                " (write a mapping, or leave the key out)");
  if (!node.IsMap())
    return InvalidArgumentError(path + ": expected a mapping of " +
                                field->message_type()->full_name() + " fields" + Line(node));
  const Reflection* r = message->GetReflection();
  Message* child =
      field->is_repeated() ? r->AddMessage(message, field) : r->MutableMessage(message, field);
  return YamlToMessage(node, child, path, written);
}

Status SetField(const YAML::Node& node, Message* message, const FieldDescriptor* field,
                const std::string& path, std::set<std::string>* written) {
  if (field->is_map())
    return InvalidArgumentError(path + ": map fields are not supported in job specs");
  const bool is_message = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
  if (!field->is_repeated()) {
    return is_message ? SetMessage(node, message, field, path, written)
                      : SetScalar(node, message, field, path);
  }
  if (!node.IsSequence()) return InvalidArgumentError(path + ": expected a list" + Line(node));
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string item = path + "[" + std::to_string(i) + "]";
    RETORT_RETURN_IF_ERROR(is_message ? SetMessage(node[i], message, field, item, written)
                                      : SetScalar(node[i], message, field, item));
  }
  return Status::Ok();
}

std::string FieldNames(const Descriptor* d) {
  std::string names;
  for (int i = 0; i < d->field_count(); ++i) names += (i ? ", " : "") + d->field(i)->name();
  return names;
}

}  // namespace

Status YamlToMessage(const YAML::Node& node, Message* message, const std::string& path,
                     std::set<std::string>* written) {
  const Descriptor* descriptor = message->GetDescriptor();
  if (!node.IsMap())
    return InvalidArgumentError((path.empty() ? "job spec" : path) + ": expected a mapping of " +
                                descriptor->full_name() + " fields" + Line(node));
  std::map<int, YAML::Mark> seen;  // field number -> where it was first written
  for (const auto& kv : node) {
    if (!kv.first.IsScalar())
      return InvalidArgumentError((path.empty() ? "job spec" : path) +
                                  ": a key must be a plain name" + Line(kv.first));
    const std::string key = kv.first.Scalar();
    const std::string at = path.empty() ? key : path + "." + key;
    const FieldDescriptor* field = descriptor->FindFieldByName(key);
    if (field == nullptr) field = descriptor->FindFieldByCamelcaseName(key);
    if (field == nullptr) {
      return InvalidArgumentError(at + ": unknown field" + Line(kv.first) + " (" +
                                  descriptor->full_name() + " has " + FieldNames(descriptor) + ")");
    }
    const std::string canonical = path.empty() ? field->name() : path + "." + field->name();
    auto [first, inserted] = seen.emplace(field->number(), kv.first.Mark());
    if (!inserted) {
      return InvalidArgumentError(canonical + ": written twice (lines " +
                                  std::to_string(first->second.line + 1) + " and " +
                                  std::to_string(kv.first.Mark().line + 1) + "); keep one value");
    }
    RETORT_RETURN_IF_ERROR(SetField(kv.second, message, field, canonical, written));
    if (written != nullptr) written->insert(canonical);
  }
  return Status::Ok();
}

}  // namespace retort::coordinator
