// Pre-flight checks of a job spec: what the coordinator can find wrong before any worker
// starts, so that a job that would fail on every worker at setup or at its first step is refused
// at once with the field and value named (retort-coordinator exits 2), instead of failing later.
//
// Checked:
//   - dataset.path (fashion-mnist, image-folder), teacher/student.weights_path,
//     torchscript_path and exported_path (with its <path>.json sidecar) exist on the coordinator's
//     host, when they are local paths (not URLs); checkpoint.dir is a directory the coordinator can
//     write, or can create. Off with PreflightOptions.check_paths = false for setups where the
//     coordinator cannot see the workers' files (a Kubernetes coordinator pod without the dataset
//     volume).
//   - For built-in ViT presets: dataset.image_size is divisible by the preset's patch size and
//     equals the image size the preset was built for (its position embeddings fix it).
// Thread-compatible; touches the filesystem only to stat paths.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "retort/v1/retort.pb.h"

namespace retort::coordinator {

struct PreflightOptions {
  bool check_paths = true;
};

// Every problem found, one message each (empty: none). The spec is expected to have passed
// ValidateJobSpec (defaults applied).
std::vector<std::string> PreflightProblems(const v1::JobSpec& job, const PreflightOptions& options);

// OK, or INVALID_ARGUMENT listing every problem ("; "-separated).
Status PreflightJob(const v1::JobSpec& job, const PreflightOptions& options);

}  // namespace retort::coordinator
