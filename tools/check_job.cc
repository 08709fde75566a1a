#include "tools/check_job.h"

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>

#include "common/file_util.h"
#include "coordinator/job_preflight.h"
#include "coordinator/job_spec.h"

namespace retort::tools {
namespace {

// The spec as JSON with every field printed (defaults included), proto field names.
nlohmann::json FullSpecJson(const v1::JobSpec& spec) {
  std::string text;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(spec, &text, opts);
  return nlohmann::json::parse(text);
}

StatusOr<v1::JobSpec> LoadAndCheck(const std::string& path, bool check_paths) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    RETORT_ASSIGN_OR_RETURN(text, ReadFileToString(path));
  }
  RETORT_ASSIGN_OR_RETURN(v1::JobSpec spec,
                          coordinator::ParseJobSpec(text, path == "-" ? "<stdin>" : path));
  coordinator::PreflightOptions preflight;
  preflight.check_paths = check_paths;
  Status checked = coordinator::PreflightJob(spec, preflight);
  if (!checked.ok()) return InvalidArgumentError("fails pre-flight checks: " + checked.message());
  return spec;
}

}  // namespace

int CheckJobFile(const std::string& path, bool json, bool check_paths) {
  StatusOr<v1::JobSpec> spec = LoadAndCheck(path, check_paths);
  if (json) {
    nlohmann::json out = spec.ok()
                             ? nlohmann::json{{"valid", true}, {"job", FullSpecJson(*spec)}}
                             : nlohmann::json{{"valid", false}, {"error", spec.status().message()}};
    std::cout << out.dump() << std::endl;
  } else if (spec.ok()) {
    std::printf("%s: valid job spec (job '%s')\n", path.c_str(), spec->name().c_str());
  } else {
    std::fprintf(stderr, "retort-coordinator: invalid job spec: %s\n",
                 spec.status().message().c_str());
  }
  return spec.ok() ? 0 : 2;
}

}  // namespace retort::tools
