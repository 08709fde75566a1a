#include "worker/data_plane.h"

#include "collectives/cuda_data_plane.h"
#include "collectives/routed.h"
#include "collectives/staged.h"
#include "collectives/ucx/ucx_hierarchical.h"
#include "worker/worker_device.h"

namespace retort::worker {
namespace {

collectives::CudaCommunicatorOptions NcclOptions(
    int cuda, const collectives::ucx::UcxCommunicatorOptions& ucx) {
  collectives::CudaCommunicatorOptions o;
  o.device = cuda;
  o.default_timeout = ucx.default_timeout;
  o.bootstrap_timeout = ucx.bootstrap_timeout;
  o.cancelled = ucx.cancelled;
  return o;
}

// The device side of a GPU worker's data plane: NCCL among a node's GPUs, the CUDA copier and
// device scratch of `cuda`.
collectives::ucx::HierarchicalDeviceLevels CudaDevice(
    int cuda, const collectives::ucx::UcxCommunicatorOptions& ucx) {
  collectives::ucx::HierarchicalDeviceLevels device;
  device.intra = [cuda, ucx](collectives::BootstrapStore* s, int r, int n, uint64_t number,
                             const std::string& prefix) {
    collectives::CudaCommunicatorOptions no = NcclOptions(cuda, ucx);
    no.key_prefix = prefix;
    return collectives::CreateNcclCommunicator(s, r, n, number, no);
  };
  device.copier = [cuda] { return collectives::CreateCudaCopier(cuda); };
  device.scratch = [cuda] { return collectives::CreateCudaScratch(cuda); };
  return device;
}

bool OnOneNode(const v1::Generation& g) {
  return g.nodes_size() == 1 && g.nodes(0).ranks_size() == g.members_size();
}

StatusOr<std::unique_ptr<collectives::Communicator>> HostDataPlane(
    collectives::BootstrapStore* store, const v1::Generation& g, int rank,
    const collectives::ucx::UcxCommunicatorOptions& options) {
  if (auto layout = HierarchicalLayout(g)) {
    return collectives::ucx::CreateHierarchicalUcxCommunicator(store, rank, g.members_size(),
                                                               g.number(), *layout, options);
  }
  return collectives::ucx::CreateUcxCommunicator(store, rank, g.members_size(), g.number(),
                                                 options);
}

}  // namespace

std::optional<collectives::NodeLayout> HierarchicalLayout(const v1::Generation& g) {
  if (g.nodes_size() < 2) return std::nullopt;
  const int per_node = g.nodes(0).ranks_size();
  if (per_node < 2) return std::nullopt;
  collectives::NodeLayout layout;
  layout.node_of_rank.assign(g.members_size(), 0);
  for (int n = 0; n < g.nodes_size(); ++n) {
    if (g.nodes(n).ranks_size() != per_node) return std::nullopt;
    for (int r : g.nodes(n).ranks()) layout.node_of_rank[r] = n;
  }
  return layout;
}

StatusOr<DataPlane> CreateDataPlane(collectives::BootstrapStore* store, const v1::Generation& g,
                                    int rank, const DataPlaneOptions& options) {
  DataPlane plane;
  const int cuda = CudaIndex(options.device);
  const bool emulate = options.emulate_device && cuda < 0;
  if ((cuda < 0 && !emulate) || g.members_size() == 1) {
    RETORT_ASSIGN_OR_RETURN(plane.comm, HostDataPlane(store, g, rank, options.ucx));
    return plane;
  }
  if (!emulate && !collectives::BuildHasCudaDataPlane()) {
    return FailedPreconditionError(
        "training on " + options.device + " with " + std::to_string(g.members_size()) +
        " workers needs the CUDA data plane (NCCL, device staging), which this build lacks "
        "(built without the CUDA toolkit or NCCL); rebuild with CUDA, run one worker per job, "
        "or use --device cpu");
  }
  const collectives::ucx::HierarchicalDeviceLevels device =
      emulate ? collectives::ucx::HostMemoryDeviceLevels(options.ucx)
              : CudaDevice(cuda, options.ucx);
  plane.trainer_memory = collectives::MemoryKind::kCudaDevice;
  if (!emulate) {
    RETORT_ASSIGN_OR_RETURN(plane.events, collectives::CreateCudaStreamEvents(cuda));
  }
  const auto kDevice = collectives::MemoryKind::kCudaDevice;
  if (OnOneNode(g)) {
    // The node's communicator (NCCL) for device buffers, flat UCX for host buffers.
    RETORT_ASSIGN_OR_RETURN(auto node, device.intra(store, rank, g.members_size(), g.number(),
                                                    "g" + std::to_string(g.number()) + "/node"));
    RETORT_ASSIGN_OR_RETURN(auto host, collectives::ucx::CreateUcxCommunicator(
                                           store, rank, g.members_size(), g.number(), options.ucx));
    RETORT_ASSIGN_OR_RETURN(plane.comm, collectives::RoutedCommunicator::Create(
                                            std::move(node), std::move(host), kDevice));
    return plane;
  }
  if (auto layout = HierarchicalLayout(g)) {
    // NCCL inside each node, UCX staged through pinned memory between nodes; host buffers
    // take a flat UCX communicator of their own.
    RETORT_ASSIGN_OR_RETURN(auto hierarchy, collectives::ucx::CreateHierarchicalUcxCommunicator(
                                                store, rank, g.members_size(), g.number(), *layout,
                                                options.ucx, &device));
    RETORT_ASSIGN_OR_RETURN(auto host, collectives::ucx::CreateUcxCommunicator(
                                           store, rank, g.members_size(), g.number(), options.ucx));
    RETORT_ASSIGN_OR_RETURN(plane.comm, collectives::RoutedCommunicator::Create(
                                            std::move(hierarchy), std::move(host), kDevice));
    return plane;
  }
  // Nodes of unequal size: every rank stages its device buffers through one flat UCX ring.
  RETORT_ASSIGN_OR_RETURN(auto copier, device.copier());
  RETORT_ASSIGN_OR_RETURN(auto host, collectives::ucx::CreateUcxCommunicator(
                                         store, rank, g.members_size(), g.number(), options.ucx));
  RETORT_ASSIGN_OR_RETURN(
      plane.comm, collectives::StagedCommunicator::Create(std::move(host), std::move(copier)));
  return plane;
}

}  // namespace retort::worker
