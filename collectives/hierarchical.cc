#include "collectives/hierarchical.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace retort::collectives {

StatusOr<NodePosition> LocateRank(const NodeLayout& layout, int rank) {
  const int world = static_cast<int>(layout.node_of_rank.size());
  if (rank < 0 || rank >= world) {
    return InvalidArgumentError("node layout: rank " + std::to_string(rank) + " outside [0, " +
                                std::to_string(world) + ")");
  }
  std::map<int, int> ranks_per_node;
  NodePosition pos;
  for (int r = 0; r < world; ++r) {
    const int node = layout.node_of_rank[r];
    if (node < 0 || node >= world) {
      return InvalidArgumentError("node layout: rank " + std::to_string(r) + " has node id " +
                                  std::to_string(node) + " outside [0, " + std::to_string(world) +
                                  ")");
    }
    if (r == rank) {
      pos.node = node;
      pos.local_index = ranks_per_node[node];
    }
    ++ranks_per_node[node];
  }
  pos.num_nodes = static_cast<int>(ranks_per_node.size());
  pos.local_size = ranks_per_node.begin()->second;
  for (const auto& [node, count] : ranks_per_node) {
    if (count != pos.local_size) {
      return InvalidArgumentError(
          "node layout: node " + std::to_string(node) + " has " + std::to_string(count) +
          " ranks, node " + std::to_string(ranks_per_node.begin()->first) + " has " +
          std::to_string(pos.local_size) + ": every node must hold the same number of ranks");
    }
  }
  if (ranks_per_node.rbegin()->first != pos.num_nodes - 1) {
    return InvalidArgumentError("node layout: node ids must be 0.." +
                                std::to_string(pos.num_nodes - 1));
  }
  return pos;
}

StatusOr<std::unique_ptr<HierarchicalCommunicator>> HierarchicalCommunicator::Create(
    const NodeLayout& layout, int rank, uint64_t generation, std::unique_ptr<Communicator> intra,
    std::unique_ptr<Communicator> inter, std::unique_ptr<Communicator> global,
    std::chrono::milliseconds default_timeout, ProgressMode progress,
    std::unique_ptr<DeviceScratch> device_scratch) {
  RETORT_ASSIGN_OR_RETURN(NodePosition pos, LocateRank(layout, rank));
  if (!intra || !inter || !global) {
    return InvalidArgumentError("hierarchical: intra, inter and global communicators required");
  }
  if (intra->size() != pos.local_size || intra->rank() != pos.local_index) {
    return InvalidArgumentError(
        "hierarchical: intra communicator is rank " + std::to_string(intra->rank()) + " of " +
        std::to_string(intra->size()) + ", layout says local index " +
        std::to_string(pos.local_index) + " of " + std::to_string(pos.local_size));
  }
  if (inter->size() != pos.num_nodes || inter->rank() != pos.node) {
    return InvalidArgumentError("hierarchical: inter communicator is rank " +
                                std::to_string(inter->rank()) + " of " +
                                std::to_string(inter->size()) + ", layout says node " +
                                std::to_string(pos.node) + " of " + std::to_string(pos.num_nodes));
  }
  if (global->size() != static_cast<int>(layout.node_of_rank.size()) || global->rank() != rank) {
    return InvalidArgumentError("hierarchical: global communicator is not rank " +
                                std::to_string(rank) + " of " +
                                std::to_string(layout.node_of_rank.size()));
  }
  for (const Communicator* c : {intra.get(), inter.get(), global.get()}) {
    if (c->generation() != generation) {
      return FailedPreconditionError("hierarchical: " + c->name() + " communicator is generation " +
                                     std::to_string(c->generation()) + ", expected " +
                                     std::to_string(generation));
    }
  }
  std::unique_ptr<HierarchicalCommunicator> h(new HierarchicalCommunicator());
  h->layout_ = layout;
  h->rank_ = rank;
  h->generation_ = generation;
  h->num_nodes_ = pos.num_nodes;
  h->local_size_ = pos.local_size;
  h->node_ = pos.node;
  h->local_index_ = pos.local_index;
  h->default_timeout_ = default_timeout;
  h->rank_at_.assign(pos.num_nodes, std::vector<int>());
  h->local_index_of_.resize(layout.node_of_rank.size());
  for (size_t r = 0; r < layout.node_of_rank.size(); ++r) {
    auto& node_ranks = h->rank_at_[layout.node_of_rank[r]];
    h->local_index_of_[r] = static_cast<int>(node_ranks.size());
    node_ranks.push_back(static_cast<int>(r));
  }
  h->nodes_consecutive_ = true;
  for (const auto& node_ranks : h->rank_at_) {
    for (size_t l = 1; l < node_ranks.size(); ++l)
      h->nodes_consecutive_ &= node_ranks[l] == node_ranks[0] + static_cast<int>(l);
  }
  h->intra_ = std::move(intra);
  h->inter_ = std::move(inter);
  h->global_ = std::move(global);
  h->device_scratch_ = std::move(device_scratch);
  h->executor_ = std::make_unique<OpExecutor>(
      "hierarchical rank " + std::to_string(rank) + " gen " + std::to_string(generation), nullptr,
      progress);
  h->broken_ = h->executor_->aborted_flag();
  return h;
}

HierarchicalCommunicator::~HierarchicalCommunicator() { executor_.reset(); }

std::string HierarchicalCommunicator::name() const {
  return "hierarchical(" + intra_->name() + " x " + inter_->name() + ")";
}

WorkPtr HierarchicalCommunicator::Submit(std::string description, const CollectiveOptions& options,
                                         Step step) {
  return SubmitComposedStep(*executor_, std::move(description), options, default_timeout_,
                            &running_ready_, std::move(step));
}

Status HierarchicalCommunicator::Await(
    Work& parent, const std::function<WorkPtr(const CollectiveOptions&)>& issue) {
  return AwaitSubOperation(parent, *broken_, issue, running_ready_);
}

StatusOr<char*> HierarchicalCommunicator::Scratch(int which, size_t bytes, MemoryKind memory) {
  bytes = std::max<size_t>(bytes, 1);
  if (IsHostMemory(memory)) {
    std::vector<char>& buffer = scratch_[which];
    if (buffer.size() < bytes) buffer.resize(bytes);
    return buffer.data();
  }
  if (device_bytes_[which] < bytes) {
    device_buffers_[which].reset();
    RETORT_ASSIGN_OR_RETURN(device_buffers_[which], device_scratch_->Allocate(bytes));
    device_bytes_[which] = bytes;
  }
  return device_buffers_[which].get();
}

bool HierarchicalCommunicator::PackIsIdentity(const std::vector<size_t>& counts) const {
  // Packed order visits ranks local-index major, node minor; it is the identity when that
  // visit order of the non-empty segments is ascending global rank.
  std::vector<int> order;
  for (int l = 0; l < local_size_; ++l) {
    for (int n = 0; n < num_nodes_; ++n) {
      if (counts[rank_at_[n][l]] > 0) order.push_back(rank_at_[n][l]);
    }
  }
  return std::is_sorted(order.begin(), order.end());
}

Status HierarchicalCommunicator::Pack(Work& work, const char* src, char* dst,
                                      const std::vector<size_t>& counts, size_t elem, bool unpack,
                                      MemoryKind memory) const {
  const bool device = !IsHostMemory(memory);
  // Device memory: the copies are ordered after the operation's ready event (the caller's
  // buffer) on the scratch's stream, and waited for once, after the last segment.
  if (device) RETORT_RETURN_IF_ERROR(device_scratch_->OrderAfter(running_ready_.get()));
  const std::vector<size_t> offsets = Offsets(counts);
  size_t packed = 0;
  for (int l = 0; l < local_size_; ++l) {
    for (int n = 0; n < num_nodes_; ++n) {
      const int r = rank_at_[n][l];
      const size_t bytes = counts[r] * elem;
      if (bytes == 0) continue;
      char* to = unpack ? dst + offsets[r] * elem : dst + packed;
      const char* from = unpack ? src + packed : src + offsets[r] * elem;
      if (device) {
        RETORT_RETURN_IF_ERROR(device_scratch_->CopyAsync(to, from, bytes));
      } else {
        std::memcpy(to, from, bytes);
      }
      packed += bytes;
    }
  }
  if (!device) return Status::Ok();
  return device_scratch_->Wait(work.deadline(),
                               [&] { return work.abort_requested() || broken_->load(); });
}

std::vector<HierarchicalCommunicator::NodeSlice> HierarchicalCommunicator::NodeSlicesToRun(
    const std::vector<size_t>& counts, size_t elem, MemoryKind memory) const {
  if (!IsHostMemory(memory) || !nodes_consecutive_) return {};
  const std::vector<size_t> offsets = Offsets(counts);
  std::vector<NodeSlice> slices;
  size_t between = 0;
  for (int n = 0; n < num_nodes_; ++n) {
    NodeSlice slice;
    slice.counts.resize(local_size_);
    for (int l = 0; l < local_size_; ++l) {
      slice.counts[l] = counts[rank_at_[n][l]];
      slice.count += slice.counts[l];
    }
    if (slice.count == 0) continue;
    slice.offset = offsets[rank_at_[n][0]];
    slice.between = between;
    between += slice.counts[local_index_];
    slices.push_back(std::move(slice));
  }
  size_t total = 0;
  for (const NodeSlice& slice : slices) total += slice.count;
  if (total * elem < kMinNodeSliceBytes * slices.size()) return {};
  return slices;
}

HierarchicalCommunicator::LevelCounts HierarchicalCommunicator::SplitCounts(
    const std::vector<size_t>& counts) const {
  LevelCounts split{std::vector<size_t>(local_size_, 0), std::vector<size_t>(num_nodes_, 0)};
  for (int l = 0; l < local_size_; ++l) {
    for (int n = 0; n < num_nodes_; ++n) split.intra[l] += counts[rank_at_[n][l]];
  }
  for (int n = 0; n < num_nodes_; ++n) split.inter[n] = counts[rank_at_[n][local_index_]];
  return split;
}

WorkPtr HierarchicalCommunicator::DoReduceScatterV(ConstBuffer input, MutableBuffer output,
                                                   const std::vector<size_t>& counts, ReduceOp op,
                                                   const CollectiveOptions& options) {
  return Submit("reduce_scatter", options, [=, this](Work& work) -> Status {
    const size_t elem = DataTypeSize(input.dtype);
    const LevelCounts split = SplitCounts(counts);
    const bool identity = PackIsIdentity(counts);
    const std::vector<NodeSlice> slices =
        identity ? std::vector<NodeSlice>() : NodeSlicesToRun(counts, elem, input.memory);
    if (!slices.empty()) {
      // One intra reduce-scatter per node's slice of the input, each writing this rank's part
      // of it to its place between the levels.
      RETORT_ASSIGN_OR_RETURN(char* between,
                              Scratch(1, split.intra[local_index_] * elem, input.memory));
      for (const NodeSlice& slice : slices) {
        ConstBuffer in{static_cast<const char*>(input.data) + slice.offset * elem, slice.count,
                       input.dtype, input.memory};
        MutableBuffer out{between + slice.between * elem, slice.counts[local_index_], input.dtype,
                          input.memory};
        RETORT_RETURN_IF_ERROR(Await(work, [&](const CollectiveOptions& o) {
          return intra_->ReduceScatterV(in, out, slice.counts, op, o);
        }));
      }
      ConstBuffer inter_in{between, split.intra[local_index_], input.dtype, input.memory};
      return Await(work, [&](const CollectiveOptions& o) {
        return inter_->ReduceScatterV(inter_in, output, split.inter, op, o);
      });
    }
    ConstBuffer intra_in = input;
    if (!identity) {
      RETORT_ASSIGN_OR_RETURN(char* packed, Scratch(0, input.bytes(), input.memory));
      RETORT_RETURN_IF_ERROR(Pack(work, static_cast<const char*>(input.data), packed, counts, elem,
                                  false, input.memory));
      intra_in.data = packed;
    }
    RETORT_ASSIGN_OR_RETURN(char* between,
                            Scratch(1, split.intra[local_index_] * elem, input.memory));
    MutableBuffer intra_out{between, split.intra[local_index_], input.dtype, input.memory};
    RETORT_RETURN_IF_ERROR(Await(work, [&](const CollectiveOptions& o) {
      return intra_->ReduceScatterV(intra_in, intra_out, split.intra, op, o);
    }));
    return Await(work, [&](const CollectiveOptions& o) {
      return inter_->ReduceScatterV(intra_out.AsConst(), output, split.inter, op, o);
    });
  });
}

WorkPtr HierarchicalCommunicator::DoAllGatherV(ConstBuffer input, MutableBuffer output,
                                               const std::vector<size_t>& counts,
                                               const CollectiveOptions& options) {
  return Submit("all_gather", options, [=, this](Work& work) -> Status {
    const size_t elem = DataTypeSize(input.dtype);
    const LevelCounts split = SplitCounts(counts);
    RETORT_ASSIGN_OR_RETURN(char* between,
                            Scratch(1, split.intra[local_index_] * elem, input.memory));
    MutableBuffer inter_out{between, split.intra[local_index_], input.dtype, input.memory};
    // The input may live inside `output` (in place); the inter all-gather reads it before
    // anything is written to `output`, so it can be used directly.
    ConstBuffer inter_in = input;
    RETORT_RETURN_IF_ERROR(Await(work, [&](const CollectiveOptions& o) {
      return inter_->AllGatherV(inter_in, inter_out, split.inter, o);
    }));
    const bool identity = PackIsIdentity(counts);
    const std::vector<NodeSlice> slices =
        identity ? std::vector<NodeSlice>() : NodeSlicesToRun(counts, elem, output.memory);
    if (!slices.empty()) {
      // One intra all-gather per node's slice of the output, each from this rank's part of it
      // between the levels: no unpacking copy.
      for (const NodeSlice& slice : slices) {
        ConstBuffer in{between + slice.between * elem, slice.counts[local_index_], input.dtype,
                       output.memory};
        MutableBuffer out{static_cast<char*>(output.data) + slice.offset * elem, slice.count,
                          output.dtype, output.memory};
        RETORT_RETURN_IF_ERROR(Await(work, [&](const CollectiveOptions& o) {
          return intra_->AllGatherV(in, out, slice.counts, o);
        }));
      }
      return Status::Ok();
    }
    char* packed = nullptr;
    if (!identity) {
      RETORT_ASSIGN_OR_RETURN(packed, Scratch(0, output.bytes(), output.memory));
    }
    MutableBuffer intra_out = output;
    if (!identity) intra_out.data = packed;
    RETORT_RETURN_IF_ERROR(Await(work, [&](const CollectiveOptions& o) {
      return intra_->AllGatherV(inter_out.AsConst(), intra_out, split.intra, o);
    }));
    if (identity) return Status::Ok();
    return Pack(work, packed, static_cast<char*>(output.data), counts, elem, true, output.memory);
  });
}

WorkPtr HierarchicalCommunicator::DoAllReduce(MutableBuffer data, ReduceOp op,
                                              const CollectiveOptions& options) {
  return Submit("all_reduce", options, [=, this](Work& work) -> Status {
    const size_t elem = DataTypeSize(data.dtype);
    const std::vector<size_t> counts = EvenCounts(data.count, local_size_);
    const size_t offset = Offsets(counts)[local_index_];
    MutableBuffer mine{static_cast<char*>(data.data) + offset * elem, counts[local_index_],
                       data.dtype, data.memory};
    RETORT_RETURN_IF_ERROR(Await(work, [&](const CollectiveOptions& o) {
      return intra_->ReduceScatterV(data.AsConst(), mine, counts, op, o);
    }));
    RETORT_RETURN_IF_ERROR(
        Await(work, [&](const CollectiveOptions& o) { return inter_->AllReduce(mine, op, o); }));
    return Await(work, [&](const CollectiveOptions& o) {
      return intra_->AllGatherV(mine.AsConst(), data, counts, o);
    });
  });
}

WorkPtr HierarchicalCommunicator::DoBroadcast(MutableBuffer data, int root,
                                              const CollectiveOptions& options) {
  return Submit("broadcast", options, [=, this](Work& work) -> Status {
    const int root_node = layout_.node_of_rank[root];
    const int root_local = local_index_of_[root];
    if (local_index_ == root_local) {
      RETORT_RETURN_IF_ERROR(Await(
          work, [&](const CollectiveOptions& o) { return inter_->Broadcast(data, root_node, o); }));
    }
    return Await(
        work, [&](const CollectiveOptions& o) { return intra_->Broadcast(data, root_local, o); });
  });
}

WorkPtr HierarchicalCommunicator::DoBarrier(const CollectiveOptions& options) {
  return Submit("barrier", options, [=, this](Work& work) -> Status {
    RETORT_RETURN_IF_ERROR(
        Await(work, [&](const CollectiveOptions& o) { return intra_->Barrier(o); }));
    RETORT_RETURN_IF_ERROR(
        Await(work, [&](const CollectiveOptions& o) { return inter_->Barrier(o); }));
    return Await(work, [&](const CollectiveOptions& o) { return intra_->Barrier(o); });
  });
}

// Point-to-point and all-to-all go straight to the flat communicator; they are ordered with
// respect to each other, not with respect to the composite collectives.
WorkPtr HierarchicalCommunicator::DoSend(ConstBuffer data, int peer, uint32_t tag,
                                         const CollectiveOptions& options) {
  return global_->Send(data, peer, tag, options);
}

WorkPtr HierarchicalCommunicator::DoRecv(MutableBuffer data, int peer, uint32_t tag,
                                         const CollectiveOptions& options) {
  return global_->Recv(data, peer, tag, options);
}

WorkPtr HierarchicalCommunicator::DoAllToAllV(ConstBuffer input,
                                              const std::vector<size_t>& send_counts,
                                              MutableBuffer output,
                                              const std::vector<size_t>& recv_counts,
                                              const CollectiveOptions& options) {
  return global_->AllToAllV(input, send_counts, output, recv_counts, options);
}

bool HierarchicalCommunicator::AcceptsMemory(MemoryKind kind) const {
  const bool scratch = IsHostMemory(kind) || (device_scratch_ && device_scratch_->kind() == kind);
  return scratch && intra_->AcceptsMemory(kind) && inter_->AcceptsMemory(kind) &&
         global_->AcceptsMemory(kind);
}

std::vector<int> HierarchicalCommunicator::FailedPeers() const {
  std::vector<bool> failed(layout_.node_of_rank.size(), false);
  for (int r : global_->FailedPeers()) failed[r] = true;
  for (int i : intra_->FailedPeers()) failed[rank_at_[node_][i]] = true;
  for (int n : inter_->FailedPeers()) failed[rank_at_[n][local_index_]] = true;
  std::vector<int> ranks;
  for (size_t r = 0; r < failed.size(); ++r)
    if (failed[r]) ranks.push_back(static_cast<int>(r));
  return ranks;
}

void HierarchicalCommunicator::Abort(const std::string& reason) {
  executor_->Abort(reason);
  intra_->Abort(reason);
  inter_->Abort(reason);
  global_->Abort(reason);
}

}  // namespace retort::collectives
