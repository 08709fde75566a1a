// The data plane of one generation, as the worker builds it from the generation's membership
// (node groups) and the device it trains on:
//  - CPU: UCX, hierarchical (intra-node, then inter-node) when every node holds the same number
//    (>= 2) of ranks, else flat.
//  - CUDA, one rank: flat UCX; no collective touches the gradients.
//  - CUDA, every rank on one node: NCCL for device buffers (the trainer's gradients and
//    parameters go straight through), UCX for host buffers (metrics, replicas, checkpoint
//    tables): collectives/routed.h.
//  - CUDA, the same number (>= 2) of ranks on each of several nodes: the hierarchy with NCCL
//    inside a node and UCX staged through pinned host memory between nodes (device buffers),
//    flat UCX for host buffers.
//  - CUDA, other layouts: flat UCX with device buffers staged through pinned host memory in
//    pipelined chunks (collectives/staged.h).
// A build without CUDA/NCCL refuses a multi-rank CUDA generation with FAILED_PRECONDITION.
// No torch here.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "collectives/bootstrap_store.h"
#include "collectives/communicator.h"
#include "collectives/hierarchical.h"
#include "collectives/ready_event.h"
#include "collectives/ucx/ucx_communicator.h"
#include "retort/v1/retort.pb.h"

namespace retort::worker {

struct DataPlane {
  std::unique_ptr<collectives::Communicator> comm;
  // Where the trainer's collective buffers may live: kCudaDevice when the data plane takes the
  // trainer's device tensors, else kHost (the trainer stages them).
  collectives::MemoryKind trainer_memory = collectives::MemoryKind::kHost;
  // CUDA with device buffers: the trainer's stream (ready events at issue, device-side waits),
  // for CommunicatorShardComm; null otherwise (host memory, or the emulated device).
  std::unique_ptr<collectives::DeviceEvents> events;
};

struct DataPlaneOptions {
  std::string device = "cpu";  // "cpu" or "cuda:N" (resolved)
  // On the CPU: build the GPU compositions anyway, with host memory standing in for the device
  // (collectives/host_memory_device.h) and UCX where NCCL would be. For tests of those
  // compositions in real jobs on machines without a GPU.
  bool emulate_device = false;
  collectives::ucx::UcxCommunicatorOptions ucx;
};

StatusOr<DataPlane> CreateDataPlane(collectives::BootstrapStore* store, const v1::Generation& g,
                                    int rank, const DataPlaneOptions& options);

// The node layout of `g` when every node holds the same number (>= 2) of ranks and there are
// at least two nodes; nullopt otherwise.
std::optional<collectives::NodeLayout> HierarchicalLayout(const v1::Generation& g);

}  // namespace retort::worker
