#include "tools/launcher_policy.h"

#include <google/protobuf/descriptor.h>

#include <algorithm>
#include <csignal>
#include <utility>

#include "common/backoff.h"

namespace retort::tools {

std::chrono::milliseconds RestartDelay(const RestartPolicy& policy, int restart) {
  return DoublingDelay(policy.initial, policy.max, restart);
}

std::string DescribeExit(int code) {
  std::string text = "status " + std::to_string(code);
  if (DiedOfSignal(code)) {
    const int sig = code - 128;
    static const std::pair<int, const char*> kNames[] = {
        {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
        {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
        {SIGSEGV, "SIGSEGV"}, {SIGPIPE, "SIGPIPE"}, {SIGTERM, "SIGTERM"}};
    std::string name = "signal " + std::to_string(sig);
    for (const auto& [n, text_name] : kNames)
      if (n == sig) name = text_name;
    text += " (killed by " + name + ")";
  }
  return text;
}

namespace {

// A string or enum field of `m` named `name`, as text ("" when absent or empty).
std::string FieldText(const google::protobuf::Message& m, const char* name) {
  const auto* field = m.GetDescriptor()->FindFieldByName(name);
  if (field == nullptr || field->is_repeated()) return "";
  const auto* refl = m.GetReflection();
  switch (field->cpp_type()) {
    case google::protobuf::FieldDescriptor::CPPTYPE_STRING:
      return refl->GetString(m, field);
    case google::protobuf::FieldDescriptor::CPPTYPE_ENUM:
      return refl->GetEnumValue(m, field) == 0 ? "" : std::string(refl->GetEnum(m, field)->name());
    default:
      return "";
  }
}

}  // namespace

std::string JobFailureText(const google::protobuf::Message& status) {
  const auto* field = status.GetDescriptor()->FindFieldByName("failure");
  if (field == nullptr || field->is_repeated() ||
      field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE)
    return "";
  const auto* refl = status.GetReflection();
  if (!refl->HasField(status, field)) return "";
  const auto& failure = refl->GetMessage(status, field);
  std::string message = FieldText(failure, "message"), kind = FieldText(failure, "kind");
  std::string member = FieldText(failure, "member_id");
  if (member.empty()) member = FieldText(failure, "member");
  std::string details = kind;
  if (!member.empty()) details += (details.empty() ? "" : ", ") + std::string("member ") + member;
  if (message.empty()) message = "the coordinator reports the job failed";
  return details.empty() ? message : message + " (" + details + ")";
}

std::string DescribeCoordinatorExit(int code) {
  switch (code) {
    case 0:
      return "the coordinator exited with status 0";
    case 1:
      return "the coordinator exited with status 1 (error)";
    case 2:
      return "the coordinator exited with status 2 (usage error)";
    case 3:
      return "the coordinator exited with status 3 (job failed)";
    default:
      return "the coordinator exited with " + DescribeExit(code);
  }
}

}  // namespace retort::tools
