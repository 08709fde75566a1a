// Exported teachers: torch.export / AOTInductor packages (.pt2) run through LibTorch's
// torch::inductor::AOTIModelPackageLoader. A package is forward-only compiled kernels (C++/OpenMP
// on a CPU, Triton/cuBLAS on a GPU) with its weights inside, built for one device kind.
//
// This header is torch-light (model.h); the AOTI loader's header stays in aoti_model.cc.
#pragma once

#include <torch/types.h>

#include <map>
#include <memory>
#include <string>

#include "common/status.h"
#include "trainer/models/model.h"

namespace retort::trainer {

// The metadata a package's compiler wrote (AOTI_DEVICE_KEY: "cpu" or "cuda", AOTI_PLATFORM,
// AOTI_CPU_ISA, ...), read without loading its kernels. INVALID_ARGUMENT naming the file when it
// is missing or not a readable package (corrupt, truncated, another format).
StatusOr<std::map<std::string, std::string>> ReadExportedPackageMetadata(const std::string& path);

// The device kind the package was compiled for ("cpu" or "cuda"), from its metadata.
StatusOr<std::string> ExportedPackageDeviceKind(const std::string& path);

// Loads the package's kernels for `device`, whose kind must be the package's
// (FAILED_PRECONDITION naming both otherwise). The model has no parameters (its weights are
// compiled in), cannot train (SetTraining(true) is ignored: it is always in eval mode) and
// To(device) of another device kind throws c10::Error (callers check the kind first).
// Forward takes float32 [n, C, H, W] on any device, runs on the package's device and returns
// the logits on the input's device.
//
// Every package loaded by this process validates its inputs' shapes at each run
// (AOTI_RUNTIME_CHECK_INPUTS=1, set here before the first load unless the environment sets it):
// an input a fixed-size package was not compiled for is then an error, not a read past its end.
StatusOr<std::unique_ptr<Model>> LoadExportedModel(const std::string& path, torch::Device device);

// The LibTorch this process runs, "MAJOR.MINOR.PATCH" (torch/version.h).
std::string LinkedTorchVersion();

}  // namespace retort::trainer
