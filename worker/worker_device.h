// Which device a worker trains on, and which it reports to the coordinator. Torch-free, with the
// number of visible CUDA devices as a parameter, so that every build (the control-plane-only one
// too) and CPU tests run the one rule; `retort-worker --print-device` prints its answer and
// deploy/validate asks it about every pod of a manifest.
//
// --device (the spec):
//   "auto"    cpu when no CUDA device is visible, else the GPU of this worker (below)
//   "cuda"    the GPU of this worker (below); no CUDA device visible is FAILED_PRECONDITION
//   "cpu"     the CPU
//   "cuda:N"  that device; FAILED_PRECONDITION when it is not visible
// The GPU of this worker, given its local rank on its node and V visible CUDA devices:
//   V == 1             cuda:0 (one GPU per pod or per task: the only one the process sees)
//   local rank < V     cuda:<local rank> (every GPU of the node visible to every worker)
//   else               FAILED_PRECONDITION naming the local rank and V
// A malformed spec, a negative local rank or count is INVALID_ARGUMENT.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace retort::worker {

// The device `spec` names, as "cpu" or "cuda:N" (see above).
StatusOr<std::string> ResolveDevice(const std::string& spec, int local_rank,
                                    int visible_cuda_devices);

// The CUDA device index of a resolved device ("cuda:N" -> N); -1 for "cpu" or anything else.
int CudaIndex(const std::string& resolved_device);

// What a training worker reports to the coordinator as its devices (--devices), given the device
// it resolved: `devices_flag` empty means that device; otherwise the flag (a comma-separated
// list, empty items ignored) must name exactly that one device, else INVALID_ARGUMENT naming
// both (a manifest saying cuda:0 for a worker that trains on cuda:1).
StatusOr<std::string> ReportedDevices(const std::string& devices_flag,
                                      const std::string& resolved_device);

// `retort-worker --print-device`: what the device flags resolve to.
struct DeviceQuery {
  std::string spec = "auto";  // --device
  std::string devices_flag;   // --devices ("" = the resolved device)
  int local_rank = 0;         // --local-rank (single query)
  int visible_cuda_devices = 0;
  int table_ranks = 0;  // > 0: resolve local ranks 0 .. table_ranks-1 instead of local_rank
  bool json = false;
};
struct DeviceReport {
  std::string out;    // for stdout
  std::string err;    // for stderr
  int exit_code = 0;  // 0 every rank resolved, 2 otherwise
};
// Text: the device ("cuda:0\n"), or for a table one "local rank R: DEVICE" or
// "local rank R: error: MESSAGE" line per rank; a single query's error goes to `err`.
// JSON (one object on stdout, errors included, for a single query too): {"device_spec",
// "devices_flag", "visible_cuda_devices", "ok", "ranks": [{"local_rank", "device"} or
// {"local_rank", "error"}, ...]}.
DeviceReport PrintDevice(const DeviceQuery& query);

}  // namespace retort::worker
