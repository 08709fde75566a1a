// HierarchicalCommunicator: composes an intra-node communicator (the ranks of this node) and
// an inter-node communicator (the ranks with this local index, one per node) into one
// communicator over all ranks, written only against the Communicator interface:
//  - reduce-scatter: intra reduce-scatter, then inter reduce-scatter among equal local ranks;
//  - all-gather: the mirror image (inter all-gather, then intra all-gather);
//  - all-reduce: intra reduce-scatter, inter all-reduce of this rank's part, intra all-gather;
//  - broadcast: inter broadcast among the root's local index, then intra broadcast;
//  - point-to-point and all-to-all-v go through `global`, a flat communicator over all ranks.
// The intra level works on segments grouped by local index (local index major, node minor):
// with ranks numbered that way (rank = local index x nodes + node) no packing copy is needed.
// With node-major numbering (all of node 0, then node 1, ...) on host memory, the intra level
// runs once per node's slice of the buffer instead (contiguous there; kMinNodeSliceBytes and
// up per slice): no copy, one intra sub-operation per node. Other layouts, device memory and
// smaller slices pack through a scratch buffer (one copy of the input before a
// reduce-scatter, of the output after an all-gather).
//
// Device buffers: every sub-operation gets the operation's ready event
// (CollectiveOptions::ready), and the packing copies are ordered after it on the scratch's
// stream (DeviceScratch), so a composite operation issued during backward waits for the
// gradients it reads, not for the backward kernels queued after it. Its Work completes on the
// host (no done event): Work::StreamWait on it waits on the host.
//
// Threading: composite operations run on this communicator's executor thread, which is the
// only caller of the three sub-communicators once created (they are owned).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "collectives/bootstrap_store.h"
#include "collectives/communicator.h"
#include "collectives/device_copier.h"
#include "collectives/executor.h"

namespace retort::collectives {

// Which node every global rank runs on. Every node must hold the same number of ranks;
// a rank's local index is its position among its node's ranks in global rank order.
struct NodeLayout {
  std::vector<int> node_of_rank;  // indexed by global rank; node ids 0..num_nodes-1
};

class HierarchicalCommunicator final : public Communicator {
 public:
  // Below this many bytes per node slice, the intra level packs instead (see above).
  static constexpr size_t kMinNodeSliceBytes = size_t{64} << 10;

  // `intra` must be ranked by local index, `inter` by node id; `global` by global rank.
  // With `device_scratch`, operations also take buffers of its memory kind (when all three
  // levels do): packing and the buffer between the levels then live in that memory.
  static StatusOr<std::unique_ptr<HierarchicalCommunicator>> Create(
      const NodeLayout& layout, int rank, uint64_t generation, std::unique_ptr<Communicator> intra,
      std::unique_ptr<Communicator> inter, std::unique_ptr<Communicator> global,
      std::chrono::milliseconds default_timeout,
      ProgressMode progress = ProgressMode::kBackgroundThread,
      std::unique_ptr<DeviceScratch> device_scratch = nullptr);
  ~HierarchicalCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(layout_.node_of_rank.size()); }
  uint64_t generation() const override { return generation_; }
  std::chrono::milliseconds default_timeout() const override { return default_timeout_; }
  std::string name() const override;
  // What all three levels take: host memory, and the device scratch's kind when there is one.
  bool AcceptsMemory(MemoryKind kind) const override;

  void Abort(const std::string& reason) override;
  // Failed peers of the global communicator (every pair is connected there).
  std::vector<int> FailedPeers() const override;

 protected:
  RETORT_COMMUNICATOR_OPERATIONS(, override);

 private:
  HierarchicalCommunicator() = default;
  using Step = std::function<Status(Work& work)>;
  WorkPtr Submit(std::string description, const CollectiveOptions& options, Step step);
  // Issues a sub-operation's remaining time budget and waits for it, aborting it when the
  // composite work is aborted.
  Status Await(Work& parent, const std::function<WorkPtr(const CollectiveOptions&)>& issue);
  // Global rank order -> (local index major, node minor) packed order, for segments `counts`.
  // Copies segment by segment: memcpy, or for device memory stream-ordered DeviceScratch
  // copies after the running operation's ready event, then one wait (bounded by `work`'s
  // deadline, ended by its abort).
  Status Pack(Work& work, const char* src, char* dst, const std::vector<size_t>& counts,
              size_t elem, bool unpack, MemoryKind memory) const;
  bool PackIsIdentity(const std::vector<size_t>& counts) const;
  // A node's slice of a buffer segmented by global rank `counts`: its ranks' counts by local
  // index, their sum, where the slice starts in the buffer and where this rank's part of it
  // lies between the levels (node order, as the inter level reads and writes it); elements.
  struct NodeSlice {
    std::vector<size_t> counts;
    size_t count = 0;
    size_t offset = 0;
    size_t between = 0;
  };
  // The slices the intra level runs over, once each, instead of over a packed copy: the
  // non-empty ones in node order (every rank of a node skips the same empty ones). Empty when
  // the packed path applies: not host memory, a node's ranks not consecutive in rank order, or
  // less than kMinNodeSliceBytes per slice (below that the extra sub-operations cost more than
  // the copy they save).
  std::vector<NodeSlice> NodeSlicesToRun(const std::vector<size_t>& counts, size_t elem,
                                         MemoryKind memory) const;
  // How global per-rank `counts` split over the two levels: intra[l] is the sum of the
  // counts of local index l over all nodes (what intra rank l holds between the levels),
  // inter[n] the count of this rank's local index on node n.
  struct LevelCounts {
    std::vector<size_t> intra;
    std::vector<size_t> inter;
  };
  LevelCounts SplitCounts(const std::vector<size_t>& counts) const;
  // Grow-only scratch buffers (0: packed layout, 1: the intra/inter intermediate) in host or
  // device memory, used on the executor thread only, so steady-state operations do not
  // allocate.
  StatusOr<char*> Scratch(int which, size_t bytes, MemoryKind memory);

  NodeLayout layout_;
  int rank_ = 0;
  uint64_t generation_ = 0;
  int num_nodes_ = 0;
  int local_size_ = 0;
  int node_ = 0;
  int local_index_ = 0;
  std::vector<std::vector<int>> rank_at_;          // [node][local index] -> global rank
  std::vector<int> local_index_of_;                // [global rank]
  bool nodes_consecutive_ = false;                 // every node's ranks consecutive
  std::vector<char> scratch_[2];                   // executor thread
  std::unique_ptr<DeviceScratch> device_scratch_;  // may be null
  std::shared_ptr<char> device_buffers_[2];        // executor thread
  size_t device_bytes_[2] = {0, 0};
  std::chrono::milliseconds default_timeout_{30000};
  std::unique_ptr<Communicator> intra_;
  std::unique_ptr<Communicator> inter_;
  std::unique_ptr<Communicator> global_;
  // The executor's abort flag: what the executor thread reads, never executor_ itself (the
  // destructor resets executor_ while that thread still runs).
  const std::atomic<bool>* broken_ = nullptr;
  // The ready event of the operation the executor is running (Submit sets it around the step):
  // every sub-operation and device copy of it is ordered after this event, recorded when the
  // caller issued the operation, never after the caller's stream as it is when the executor
  // gets to it. Executor thread only.
  ReadyEventPtr running_ready_;
  std::unique_ptr<OpExecutor> executor_;  // last: stops first
};

// Checks the layout and returns (node, local index, ranks per node, number of nodes) of `rank`.
struct NodePosition {
  int node = 0;
  int local_index = 0;
  int local_size = 0;
  int num_nodes = 0;
};
StatusOr<NodePosition> LocateRank(const NodeLayout& layout, int rank);

}  // namespace retort::collectives
