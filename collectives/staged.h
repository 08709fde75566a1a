// StagedCommunicator: device buffers over a host-memory communicator (UCX between nodes when
// its build cannot move device memory). Each collective on device buffers is cut into chunks
// of about `chunk_bytes`; chunk k+1 is copied device-to-host while chunk k is on the wire and
// chunk k-1 is copied back, through two pairs of staging buffers (pinned for CUDA):
//
//   copier: D2H(0) | D2H(1)          | H2D(0) D2H(2) | H2D(1) ...
//   inner:         | collective(0)   | collective(1) | ...
//
// Chunks of a reduce-scatter or all-gather are the k-th slices of every rank's segment, so
// each chunk is itself a (smaller) reduce-scatter/all-gather of the inner communicator;
// all-reduce and broadcast chunk the flat buffer. Send, Recv and all-to-all are staged whole;
// device Send/Recv are posted without blocking the executor, so both sides of an exchange can
// be in flight at once.
// Host buffers go straight to the inner communicator. An operation's input and output must be
// of the same kind.
//
// Ordering: the first copy of an operation is ordered after the operation's ready event
// (CollectiveOptions::ready, recorded by the caller when it issued the operation), or without
// one after the caller's stream as it is when the executor starts the operation
// (DeviceCopier::OrderAfter); the inner operations get the same ready event. The Work
// completes once the last chunk is back in device memory (host-confirmed: it has no done
// event, so Work::StreamWait on it waits on the host). Deadlines and aborts reach the copies
// (polled) and the inner operations (their remaining time; aborted with this one). Threading:
// operations run on this communicator's executor thread, the only user of the inner communicator
// and of the copier once created (both owned).
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/device_copier.h"
#include "collectives/executor.h"

namespace retort::collectives {

struct StagedCommunicatorOptions {
  // Pipelining granularity: an operation moves through staging in chunks of about this size.
  size_t chunk_bytes = size_t{4} << 20;
};

class StagedCommunicator final : public Communicator {
 public:
  // `inner` must take the copier's staging memory.
  static StatusOr<std::unique_ptr<StagedCommunicator>> Create(
      std::unique_ptr<Communicator> inner, std::unique_ptr<DeviceCopier> copier,
      const StagedCommunicatorOptions& options = {});
  ~StagedCommunicator() override;

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  uint64_t generation() const override { return inner_->generation(); }
  std::chrono::milliseconds default_timeout() const override { return inner_->default_timeout(); }
  std::string name() const override { return "staged(" + inner_->name() + ")"; }
  bool AcceptsMemory(MemoryKind kind) const override {
    return kind == copier_->device_kind() || inner_->AcceptsMemory(kind);
  }
  void Abort(const std::string& reason) override;
  std::vector<int> FailedPeers() const override { return inner_->FailedPeers(); }

 protected:
  RETORT_COMMUNICATOR_OPERATIONS(, override);

 private:
  // One chunk's copies and inner operation. `to_host`/`to_device`: (device, staging offset,
  // bytes) pieces; `run` issues the inner operation on staging `in`/`out`.
  struct Piece {
    char* device = nullptr;
    size_t staging_offset = 0;
    size_t bytes = 0;
  };
  struct Chunk {
    std::vector<Piece> to_host;    // gathered into staging `in`
    std::vector<Piece> to_device;  // scattered from staging `out`
    size_t in_bytes = 0;
    size_t out_bytes = 0;
    // The inner operation works in place in `in`; the copies back read `in` (no `out`).
    bool in_place = false;
    std::function<WorkPtr(char* in, char* out, const CollectiveOptions&)> run;
  };
  // A device Send/Recv posted to the inner communicator through staging of its own.
  struct InFlight {
    WorkPtr work;   // this communicator's
    WorkPtr inner;  // the inner communicator's
    std::shared_ptr<char> staging;
    char* land_in = nullptr;  // Recv: copied here once received
    size_t land_bytes = 0;
    ReadyEventPtr ready;  // Recv: the caller's ready event (the copy back waits for it)
  };
  WorkPtr SubmitPointToPoint(std::string description, const CollectiveOptions& options,
                             std::function<Status(InFlight&)> post);
  // Executor idle hook: completes in-flight point-to-point operations; true while some remain.
  bool PollInFlight();
  static CollectiveOptions RemainingOf(const Work& work);
  // The staging buffers of slot `slot` (0 or 1), grown to hold `in`/`out` bytes.
  Status EnsureSlot(int slot, size_t in_bytes, size_t out_bytes);
  // Chunk k of an operation over per-rank segments (counts): the k-th slice of every segment,
  // packed in rank order in staging, and this rank's own slice. segments_in: the segments are
  // `input` and go in, this rank's slice of `output` comes back (reduce-scatter); otherwise the
  // segments are `output` and come back, this rank's slice of `input` goes in (all-gather).
  // Fills `c`'s copies and sizes.
  struct SegmentSlices {
    std::vector<size_t> counts;  // slice k of every rank's segment
    size_t packed = 0;           // their sum
    size_t mine = 0;             // this rank's
  };
  SegmentSlices SliceSegments(const char* input, char* output, const std::vector<size_t>& counts,
                              size_t elem, size_t k, size_t parts, bool segments_in,
                              Chunk& c) const;
  // The chunks of an in-place operation on the flat buffer `data` (all-reduce, broadcast):
  // chunk k is its k-th slice, copied in when `copy_in` and back when `copy_back`, run through
  // `inner_op` on the slice's staging copy.
  using InnerOp = std::function<WorkPtr(MutableBuffer, const CollectiveOptions&)>;
  std::vector<Chunk> FlatChunks(MutableBuffer data, bool copy_in, bool copy_back,
                                InnerOp inner_op) const;
  // An in-place operation on `data` through `inner_op`: as it is for host buffers
  // (Passthrough), staged chunk by chunk (FlatChunks) for device buffers.
  WorkPtr InPlace(const char* name, MutableBuffer data, const CollectiveOptions& options,
                  bool copy_in, bool copy_back, InnerOp inner_op);
  // The inner communicator's operation over per-rank segments (`counts`).
  using SegmentOp = std::function<WorkPtr(ConstBuffer, MutableBuffer, const std::vector<size_t>&,
                                          const CollectiveOptions&)>;
  // An operation over per-rank segments through `inner_op` (segments_in as for SliceSegments):
  // as it is for host buffers (Passthrough), staged chunk by chunk for device buffers.
  WorkPtr Segmented(const char* name, ConstBuffer input, MutableBuffer output,
                    const std::vector<size_t>& counts, const CollectiveOptions& options,
                    bool segments_in, SegmentOp inner_op);
  // Runs `chunks` through staging, pipelined as described above.
  Status RunChunks(Work& work, std::vector<Chunk>& chunks);
  Status Await(Work& parent, const std::function<WorkPtr(const CollectiveOptions&)>& issue);
  // An operation the inner communicator runs as it is (host buffers), queued in order with the
  // staged ones on this communicator's executor.
  WorkPtr Passthrough(std::string description, const CollectiveOptions& options,
                      std::function<WorkPtr(const CollectiveOptions&)> issue);
  WorkPtr Submit(std::string description, const CollectiveOptions& options,
                 std::function<Status(Work&)> step);
  // How many chunks `bytes` take.
  size_t ChunkCount(size_t bytes) const;
  Status SameKind(MemoryKind a, MemoryKind b, const char* op) const;

  StagedCommunicator(std::unique_ptr<Communicator> inner, std::unique_ptr<DeviceCopier> copier,
                     const StagedCommunicatorOptions& options);

  std::unique_ptr<Communicator> inner_;
  std::unique_ptr<DeviceCopier> copier_;
  const StagedCommunicatorOptions options_;
  struct Slot {
    std::shared_ptr<char> in, out;
    size_t in_bytes = 0, out_bytes = 0;
  };
  Slot slots_[2];                  // executor thread only
  std::list<InFlight> in_flight_;  // executor thread only
  // The ready event of the operation the executor is running (Submit sets it around the step):
  // what its copies and sub-operations are ordered after. Executor thread only.
  ReadyEventPtr running_ready_;
  // The executor's abort flag: what the executor thread reads, never executor_ itself (the
  // destructor resets executor_ while that thread still runs).
  const std::atomic<bool>* broken_ = nullptr;
  std::unique_ptr<OpExecutor> executor_;  // last: its thread stops first
};

}  // namespace retort::collectives
