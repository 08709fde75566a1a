// Factory of a hierarchical communicator whose levels are all UCX (CPU runs, tests, and
// clusters without GPUs). GPU runs pass an NCCL intra-node communicator to
// HierarchicalCommunicator::Create instead.
#pragma once

#include <memory>

#include "collectives/hierarchical.h"
#include "collectives/ucx/ucx_communicator.h"

namespace retort::collectives::ucx {

// Creates, in this order, the intra-node, inter-node and global UCX communicators (store
// keys "g<generation>/hier/intra<node>", ".../inter<local index>", ".../global"), then
// composes them. Every rank of the world must call it.
StatusOr<std::unique_ptr<Communicator>> CreateHierarchicalUcxCommunicator(
    BootstrapStore* store, int rank, int size, uint64_t generation, const NodeLayout& layout,
    const UcxCommunicatorOptions& options = {});

}  // namespace retort::collectives::ucx
