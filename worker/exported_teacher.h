// Exported teachers (job spec teacher.exported_path): the checks that refuse a package before
// training, each naming the file and what is wrong, then the loaded model.
//
// A package comes with a JSON sidecar, <exported_path>.json, that `python -m retort.export`
// writes beside it:
//   {"format": "retort.exported/1", "input_shape": [C, H, W],
//    "normalization": {"mean": [...], "std": [...]} or null (not stated),
//    "num_classes": N, "torch_version": "2.15.0+cu132", "device": "cpu" | "cuda",
//    "batch": {"min": 2, "max": 4096}, "model": "resnet18"}
// (torch.export specialises batch sizes 0 and 1: a package takes batches from 2.)
//
// Refused (before any training step):
//   - a missing or unreadable sidecar, or one in another format (INVALID_ARGUMENT);
//   - a package built by another PyTorch major.minor than the LibTorch linked here
//     (FAILED_PRECONDITION: its compiled wrapper calls this LibTorch's C shim);
//   - a corrupt or truncated package, or another format (INVALID_ARGUMENT);
//   - a package compiled for another device kind than the worker's: a CPU package on a GPU
//     worker or the reverse (FAILED_PRECONDITION);
//   - an input shape, class count or normalisation other than the job's dataset
//     (FAILED_PRECONDITION);
//   - a fixed batch dimension: the package does not run at two batch sizes
//     (FAILED_PRECONDITION);
//   - an output other than float logits [batch, num_classes] (FAILED_PRECONDITION).
// The teacher check (job_setup.h CheckTeacherBeatsChance) then applies as to every teacher.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "retort/v1/retort.pb.h"
#include "trainer/data/dataset.h"
#include "trainer/models/model.h"

namespace retort::worker {

struct ExportedSidecar {
  std::vector<int64_t> input_shape;  // [C, H, W]
  // Per-channel mean/std the model expects its input normalised with; empty: not stated.
  std::vector<double> mean;
  std::vector<double> std;
  int64_t num_classes = 0;
  std::string torch_version;  // of the PyTorch that exported it
  std::string device;         // "cpu" or "cuda"
};

// The sidecar path of a package: "<package>.json".
std::string ExportedSidecarPath(const std::string& package);

// Reads and validates <package>.json (INVALID_ARGUMENT naming it and the field).
StatusOr<ExportedSidecar> ReadExportedSidecar(const std::string& package);

// Checks job.teacher().exported_path against this worker (`device`: "cpu" or "cuda:N") and the
// job's dataset (`test`: its shape and class count), loads it on `device` and probes its forward
// at two batch sizes. The refusals are listed at the top of this file.
StatusOr<std::unique_ptr<trainer::Model>> LoadExportedTeacher(const v1::JobSpec& job,
                                                              const std::string& device,
                                                              const trainer::data::Dataset& test);

}  // namespace retort::worker
