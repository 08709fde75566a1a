// libFuzzer harness: the job-spec parser (coordinator/job_spec.h, job_spec_yaml.h) on arbitrary
// text, as `retort-coordinator --job` and the Kubernetes ConfigMap hand it over. Any text must
// give a spec or an INVALID_ARGUMENT, never a crash, a hang or an uncaught exception; a spec it
// accepts must validate again and print as JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "coordinator/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retort;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = coordinator::ParseJobSpec(text, "fuzz.yaml");
  if (!spec.ok()) {
    if (spec.status().code() != StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  if (!coordinator::ValidateJobSpec(*spec).ok()) std::abort();
  v1::JobSpec again = *spec;
  coordinator::ApplyJobSpecDefaults(&again);
  (void)coordinator::JobSpecToJson(again);
  return 0;
}
