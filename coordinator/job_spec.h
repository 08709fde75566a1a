// Loading and validating the job spec (retort.v1.JobSpec) from YAML or JSON.
// Unknown fields, duplicate keys, keys without a value, wrong types and out-of-range values are
// errors that name the field (job_spec_yaml.h has the parsing rules). A field left out of the
// text takes its default; a field written in the text keeps its value or is refused, never
// replaced by a default (`steps: 0` and `global_batch: 0` are errors, `optimizer.beta1: 0` is
// kept). The defaults and where 0 has a meaning of its own are in proto/retort/v1/retort.proto.
#pragma once

#include <set>
#include <string>

#include "common/status.h"
#include "retort/v1/retort.pb.h"

namespace retort::coordinator {

// Parses YAML (a superset of JSON) text into a JobSpec, fills defaults, validates.
StatusOr<v1::JobSpec> ParseJobSpec(const std::string& text, const std::string& source_name);
// Reads and parses a file.
StatusOr<v1::JobSpec> LoadJobSpecFile(const std::string& path);
// Fills fields that are 0/empty with their defaults (idempotent); for specs built in code.
void ApplyJobSpecDefaults(v1::JobSpec* spec);
// The same for parsed text: only fields whose dotted path is not in `written` get defaults.
// A null `written` means every 0/empty field is unset.
void ApplyJobSpecDefaults(v1::JobSpec* spec, const std::set<std::string>* written);
// Checks ranges and cross-field rules; the message names the field ("optimizer.lr: ...").
Status ValidateJobSpec(const v1::JobSpec& spec);
// True when the spec names a teacher (a preset, TorchScript file or exported package): a KD
// job; false for supervised training of the student.
bool HasTeacher(const v1::JobSpec& spec);
// The spec as JSON (for logs and `retortctl status --json`).
std::string JobSpecToJson(const v1::JobSpec& spec);

}  // namespace retort::coordinator
