// Factory of a hierarchical communicator over UCX: every level UCX (CPU runs, tests, clusters
// without GPUs), or, for device buffers, NCCL inside a node and UCX staged through pinned host
// memory between nodes (HierarchicalDeviceLevels).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "collectives/device_copier.h"
#include "collectives/hierarchical.h"
#include "collectives/staged.h"
#include "collectives/ucx/ucx_communicator.h"

namespace retort::collectives::ucx {

// What puts the hierarchy on device memory (GPU workers): the intra-node level from `intra`
// (NCCL among the node's GPUs) instead of UCX, the inter-node and global levels UCX staged
// through a copier each from `copier` (staged.h), and packing and the buffer between the
// levels in device memory from `scratch`.
struct HierarchicalDeviceLevels {
  std::function<StatusOr<std::unique_ptr<Communicator>>(BootstrapStore* store, int rank, int size,
                                                        uint64_t generation,
                                                        const std::string& key_prefix)>
      intra;
  std::function<StatusOr<std::unique_ptr<DeviceCopier>>()> copier;
  std::function<StatusOr<std::unique_ptr<DeviceScratch>>()> scratch;
  StagedCommunicatorOptions staging;
};

// Device levels with host memory standing in for the device (host_memory_device.h) and UCX,
// staged through a host copier, in NCCL's place: the GPU compositions on CPU machines (the
// worker's --emulate-device-data-plane, benchmarks).
HierarchicalDeviceLevels HostMemoryDeviceLevels(const UcxCommunicatorOptions& options);

// Creates, in this order, the intra-node, inter-node and global communicators (store keys
// "g<generation>/hier/intra<node>", ".../inter<local index>", ".../global"), UCX unless
// `device` says otherwise, then composes them. Every rank of the world must call it.
// `options.progress` is the composite's (and the global level's) progress mode; the two levels
// always run on the composite's executing thread.
StatusOr<std::unique_ptr<Communicator>> CreateHierarchicalUcxCommunicator(
    BootstrapStore* store, int rank, int size, uint64_t generation, const NodeLayout& layout,
    const UcxCommunicatorOptions& options = {}, const HierarchicalDeviceLevels* device = nullptr);

}  // namespace retort::collectives::ucx
