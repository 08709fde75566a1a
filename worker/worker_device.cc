#include "worker/worker_device.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include <nlohmann/json.hpp>

namespace retort::worker {
namespace {

// The GPU of a worker that picks it by local rank ("auto" or "cuda" with visible > 0).
StatusOr<std::string> GpuOfLocalRank(const std::string& spec, int local_rank, int visible) {
  if (visible == 1) return std::string("cuda:0");
  if (local_rank < visible) return "cuda:" + std::to_string(local_rank);
  return FailedPreconditionError(
      "--device " + spec + " picks the GPU of local rank " + std::to_string(local_rank) +
      ", but this process sees " + std::to_string(visible) + " CUDA devices (cuda:0 to cuda:" +
      std::to_string(visible - 1) + "), none for local rank " + std::to_string(local_rank) +
      ". Give each worker one GPU (one per pod or per task), run local ranks 0 to " +
      std::to_string(visible - 1) + " on this node, or name the device (--device cuda:N)");
}

}  // namespace

int CudaIndex(const std::string& resolved_device) {
  if (resolved_device.rfind("cuda:", 0) != 0) return -1;
  try {
    return std::stoi(resolved_device.substr(5));
  } catch (...) {
    return -1;
  }
}

StatusOr<std::string> ResolveDevice(const std::string& spec, int local_rank,
                                    int visible_cuda_devices) {
  if (local_rank < 0)
    return InvalidArgumentError("local rank must be >= 0, got " + std::to_string(local_rank));
  if (visible_cuda_devices < 0)
    return InvalidArgumentError("visible CUDA devices must be >= 0, got " +
                                std::to_string(visible_cuda_devices));
  if (spec == "cpu") return std::string("cpu");
  if (spec == "auto" || spec.empty()) {
    if (visible_cuda_devices == 0) return std::string("cpu");
    return GpuOfLocalRank("auto", local_rank, visible_cuda_devices);
  }
  if (spec == "cuda") {
    if (visible_cuda_devices == 0)
      return FailedPreconditionError(
          "--device cuda asks for the GPU of local rank " + std::to_string(local_rank) +
          " but no CUDA device is visible to this process (CUDA_VISIBLE_DEVICES, driver, or a "
          "CPU-only build?)");
    return GpuOfLocalRank(spec, local_rank, visible_cuda_devices);
  }
  const std::string prefix = "cuda:";
  const std::string digits = spec.rfind(prefix, 0) == 0 ? spec.substr(prefix.size()) : "";
  if (digits.empty() || digits.size() > 4 ||
      !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
    return InvalidArgumentError("device '" + spec + "' is not auto, cpu, cuda or cuda:N");
  const int index = std::stoi(digits);
  const std::string name = "cuda:" + std::to_string(index);
  if (visible_cuda_devices == 0)
    return FailedPreconditionError("device " + name + " was asked for (--device " + spec +
                                   ") but no CUDA device is visible to this process "
                                   "(CUDA_VISIBLE_DEVICES, driver, or a CPU-only build?)");
  if (index >= visible_cuda_devices)
    return FailedPreconditionError(
        "device " + name + " does not exist: " + std::to_string(visible_cuda_devices) +
        " CUDA device(s) are visible (cuda:0 to cuda:" + std::to_string(visible_cuda_devices - 1) +
        ")");
  return name;
}

StatusOr<std::string> ReportedDevices(const std::string& devices_flag,
                                      const std::string& resolved_device) {
  if (devices_flag.empty()) return resolved_device;
  std::vector<std::string> named;
  std::stringstream ss(devices_flag);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) named.push_back(item);
  if (named.size() == 1 && named[0] == resolved_device) return resolved_device;
  return InvalidArgumentError("--devices=" + devices_flag + " but this worker trains on " +
                              resolved_device +
                              ": --devices must name exactly the device --device resolves to "
                              "(leave --devices out to report it)");
}

DeviceReport PrintDevice(const DeviceQuery& query) {
  DeviceReport report;
  const bool table = query.table_ranks > 0;
  const int first = table ? 0 : query.local_rank;
  const int last = table ? query.table_ranks - 1 : query.local_rank;
  nlohmann::json ranks = nlohmann::json::array();
  std::string text;
  bool ok = true;
  for (int rank = first; rank <= last; ++rank) {
    StatusOr<std::string> device = ResolveDevice(query.spec, rank, query.visible_cuda_devices);
    if (device.ok()) device = ReportedDevices(query.devices_flag, *device);
    nlohmann::json entry = {{"local_rank", rank}};
    if (device.ok()) {
      entry["device"] = *device;
      text += table ? "local rank " + std::to_string(rank) + ": " + *device + "\n" : *device + "\n";
    } else {
      ok = false;
      entry["error"] = device.status().message();
      if (table)
        text +=
            "local rank " + std::to_string(rank) + ": error: " + device.status().message() + "\n";
      else
        report.err = "retort-worker: " + device.status().message() + "\n";
    }
    ranks.push_back(std::move(entry));
  }
  report.exit_code = ok ? 0 : 2;
  if (query.json) {
    report.out = nlohmann::json{{"device_spec", query.spec},
                                {"devices_flag", query.devices_flag},
                                {"visible_cuda_devices", query.visible_cuda_devices},
                                {"ok", ok},
                                {"ranks", std::move(ranks)}}
                     .dump() +
                 "\n";
    report.err.clear();
  } else {
    report.out = std::move(text);
  }
  return report;
}

}  // namespace retort::worker
