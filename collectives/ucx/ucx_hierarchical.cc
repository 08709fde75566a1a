#include "collectives/ucx/ucx_hierarchical.h"

#include "collectives/host_memory_device.h"

namespace retort::collectives::ucx {

HierarchicalDeviceLevels HostMemoryDeviceLevels(const UcxCommunicatorOptions& options) {
  HierarchicalDeviceLevels device;
  device.copier = []() -> StatusOr<std::unique_ptr<DeviceCopier>> {
    return std::unique_ptr<DeviceCopier>(std::make_unique<HostMemoryCopier>());
  };
  device.scratch = []() -> StatusOr<std::unique_ptr<DeviceScratch>> {
    return std::unique_ptr<DeviceScratch>(std::make_unique<HostMemoryScratch>());
  };
  device.intra = [options, copier = device.copier](
                     BootstrapStore* store, int rank, int size, uint64_t generation,
                     const std::string& prefix) -> StatusOr<std::unique_ptr<Communicator>> {
    UcxCommunicatorOptions level = options;
    level.key_prefix = prefix;
    RETORT_ASSIGN_OR_RETURN(auto node, CreateUcxCommunicator(store, rank, size, generation, level));
    RETORT_ASSIGN_OR_RETURN(auto staging, copier());
    RETORT_ASSIGN_OR_RETURN(auto staged,
                            StagedCommunicator::Create(std::move(node), std::move(staging)));
    return std::unique_ptr<Communicator>(std::move(staged));
  };
  return device;
}

StatusOr<std::unique_ptr<Communicator>> CreateHierarchicalUcxCommunicator(
    BootstrapStore* store, int rank, int size, uint64_t generation, const NodeLayout& layout,
    const UcxCommunicatorOptions& options, const HierarchicalDeviceLevels* device) {
  if (static_cast<int>(layout.node_of_rank.size()) != size) {
    return InvalidArgumentError("hierarchical: layout has " +
                                std::to_string(layout.node_of_rank.size()) +
                                " ranks, world size is " + std::to_string(size));
  }
  RETORT_ASSIGN_OR_RETURN(NodePosition pos, LocateRank(layout, rank));
  const std::string base =
      options.key_prefix.empty() ? "g" + std::to_string(generation) + "/hier" : options.key_prefix;
  UcxCommunicatorOptions level = options;
  // The levels are driven by the composite's executor (Wait on its thread): no threads of
  // their own, no hand-offs.
  level.progress = ProgressMode::kCallerThread;
  // A UCX level, staged through a copier of its own when the hierarchy is on device memory.
  auto staged_if_device =
      [&](std::unique_ptr<Communicator> ucx) -> StatusOr<std::unique_ptr<Communicator>> {
    if (device == nullptr) return ucx;
    RETORT_ASSIGN_OR_RETURN(auto copier, device->copier());
    RETORT_ASSIGN_OR_RETURN(auto staged, StagedCommunicator::Create(
                                             std::move(ucx), std::move(copier), device->staging));
    return std::unique_ptr<Communicator>(std::move(staged));
  };
  level.key_prefix = base + "/intra" + std::to_string(pos.node);
  std::unique_ptr<Communicator> intra;
  if (device != nullptr) {
    RETORT_ASSIGN_OR_RETURN(
        intra, device->intra(store, pos.local_index, pos.local_size, generation, level.key_prefix));
  } else {
    RETORT_ASSIGN_OR_RETURN(
        intra, CreateUcxCommunicator(store, pos.local_index, pos.local_size, generation, level));
  }
  level.key_prefix = base + "/inter" + std::to_string(pos.local_index);
  RETORT_ASSIGN_OR_RETURN(auto inter_ucx,
                          CreateUcxCommunicator(store, pos.node, pos.num_nodes, generation, level));
  RETORT_ASSIGN_OR_RETURN(auto inter, staged_if_device(std::move(inter_ucx)));
  level.key_prefix = base + "/global";
  level.progress = options.progress;
  RETORT_ASSIGN_OR_RETURN(auto global_ucx,
                          CreateUcxCommunicator(store, rank, size, generation, level));
  RETORT_ASSIGN_OR_RETURN(auto global, staged_if_device(std::move(global_ucx)));
  std::unique_ptr<DeviceScratch> scratch;
  if (device != nullptr) {
    RETORT_ASSIGN_OR_RETURN(scratch, device->scratch());
  }
  RETORT_ASSIGN_OR_RETURN(
      auto composed,
      HierarchicalCommunicator::Create(layout, rank, generation, std::move(intra), std::move(inter),
                                       std::move(global), options.default_timeout, options.progress,
                                       std::move(scratch)));
  return std::unique_ptr<Communicator>(std::move(composed));
}

}  // namespace retort::collectives::ucx
