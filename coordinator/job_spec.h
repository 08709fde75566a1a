// Loading and validating the job spec (retort.v1.JobSpec) from YAML or JSON.
// Unknown fields, wrong types and out-of-range values are errors that name the field.
#pragma once

#include <string>

#include "common/status.h"
#include "retort/v1/retort.pb.h"

namespace retort::coordinator {

// Parses YAML (a superset of JSON) text into a JobSpec, fills defaults, validates.
StatusOr<v1::JobSpec> ParseJobSpec(const std::string& text, const std::string& source_name);
// Reads and parses a file.
StatusOr<v1::JobSpec> LoadJobSpecFile(const std::string& path);
// Fills unset fields with defaults (idempotent).
void ApplyJobSpecDefaults(v1::JobSpec* spec);
// Checks ranges and cross-field rules; the message names the field ("optimizer.lr: ...").
Status ValidateJobSpec(const v1::JobSpec& spec);
// The spec as JSON (for logs and `retortctl status --json`).
std::string JobSpecToJson(const v1::JobSpec& spec);

}  // namespace retort::coordinator
