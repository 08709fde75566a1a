#include "collectives/staged.h"

#include <algorithm>
#include <string>
#include <utility>

namespace retort::collectives {
namespace {

// How long a failed operation waits for the copies it already issued (they may still read or
// write the caller's device buffers and the staging memory).
constexpr int64_t kDrainMs = 5000;

// The k-th of `parts` slices of `count` elements: [count*k/parts, count*(k+1)/parts).
size_t SliceBegin(size_t count, size_t k, size_t parts) { return count * k / parts; }
size_t SliceSize(size_t count, size_t k, size_t parts) {
  return SliceBegin(count, k + 1, parts) - SliceBegin(count, k, parts);
}

}  // namespace

StatusOr<std::unique_ptr<StagedCommunicator>> StagedCommunicator::Create(
    std::unique_ptr<Communicator> inner, std::unique_ptr<DeviceCopier> copier,
    const StagedCommunicatorOptions& options) {
  if (inner == nullptr || copier == nullptr)
    return InvalidArgumentError("staged: needs an inner communicator and a copier");
  if (!inner->AcceptsMemory(copier->staging_kind())) {
    return InvalidArgumentError("staged: the " + inner->name() + " communicator does not take " +
                                MemoryKindName(copier->staging_kind()) +
                                " memory, which the copier stages through");
  }
  if (options.chunk_bytes == 0) return InvalidArgumentError("staged: chunk_bytes must be > 0");
  return std::unique_ptr<StagedCommunicator>(
      new StagedCommunicator(std::move(inner), std::move(copier), options));
}

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> inner,
                                       std::unique_ptr<DeviceCopier> copier,
                                       const StagedCommunicatorOptions& options)
    : inner_(std::move(inner)),
      copier_(std::move(copier)),
      options_(options),
      executor_(std::make_unique<OpExecutor>("staged", [this] { return PollInFlight(); })) {
  broken_ = executor_->aborted_flag();
}

StagedCommunicator::~StagedCommunicator() {
  executor_.reset();
  // Point-to-point operations still in flight: the inner communicator must let go of their
  // staging buffers before those are freed, and their waiters get an answer.
  for (InFlight& f : in_flight_) {
    if (f.inner != nullptr) {
      f.inner->Abort();
      (void)f.inner->Wait(Deadline::AfterMs(kDrainMs));
    }
    f.work->Complete(AbortedError(f.work->description() +
                                  ": the communicator was destroyed while it was in flight"));
  }
}

void StagedCommunicator::Abort(const std::string& reason) {
  executor_->Abort(reason);
  inner_->Abort(reason);
}

size_t StagedCommunicator::ChunkCount(size_t bytes) const {
  return std::max<size_t>(1, (bytes + options_.chunk_bytes - 1) / options_.chunk_bytes);
}

Status StagedCommunicator::SameKind(MemoryKind a, MemoryKind b, const char* op) const {
  if ((a == copier_->device_kind()) == (b == copier_->device_kind())) return Status::Ok();
  return InvalidArgumentError(std::string(op) + ": input is " + MemoryKindName(a) +
                              " memory and output " + MemoryKindName(b) + " memory; the " + name() +
                              " communicator needs both of one kind");
}

WorkPtr StagedCommunicator::Submit(std::string description, const CollectiveOptions& options,
                                   std::function<Status(Work&)> step) {
  return SubmitComposedStep(*executor_, std::move(description), options, default_timeout(),
                            &running_ready_, std::move(step));
}

WorkPtr StagedCommunicator::Passthrough(std::string description, const CollectiveOptions& options,
                                        std::function<WorkPtr(const CollectiveOptions&)> issue) {
  return Submit(std::move(description), options,
                [this, issue = std::move(issue)](Work& work) { return Await(work, issue); });
}

Status StagedCommunicator::Await(Work& parent,
                                 const std::function<WorkPtr(const CollectiveOptions&)>& issue) {
  return AwaitSubOperation(parent, *broken_, issue, running_ready_);
}

Status StagedCommunicator::EnsureSlot(int slot, size_t in_bytes, size_t out_bytes) {
  Slot& s = slots_[slot];
  if (s.in == nullptr || s.in_bytes < in_bytes) {
    s.in.reset();
    RETORT_ASSIGN_OR_RETURN(s.in, copier_->AllocateStaging(std::max<size_t>(in_bytes, 1)));
    s.in_bytes = std::max<size_t>(in_bytes, 1);
  }
  if (s.out == nullptr || s.out_bytes < out_bytes) {
    s.out.reset();
    RETORT_ASSIGN_OR_RETURN(s.out, copier_->AllocateStaging(std::max<size_t>(out_bytes, 1)));
    s.out_bytes = std::max<size_t>(out_bytes, 1);
  }
  return Status::Ok();
}

Status StagedCommunicator::RunChunks(Work& work, std::vector<Chunk>& chunks) {
  const std::function<bool()> aborted = [&] { return work.abort_requested() || broken_->load(); };
  // Sized before the first copy: no copy of this operation is in flight while a slot grows,
  // and the previous operation waited for all of its copies.
  size_t in_bytes = 0, out_bytes = 0;
  for (const Chunk& c : chunks) {
    in_bytes = std::max(in_bytes, c.in_bytes);
    out_bytes = std::max(out_bytes, c.out_bytes);
  }
  for (int slot = 0; slot < std::min<int>(2, static_cast<int>(chunks.size())); ++slot)
    RETORT_RETURN_IF_ERROR(EnsureSlot(slot, in_bytes, out_bytes));

  auto issue_to_host = [&](size_t k) -> StatusOr<DeviceCopier::Mark> {
    char* in = slots_[k % 2].in.get();
    for (const Piece& p : chunks[k].to_host)
      RETORT_RETURN_IF_ERROR(copier_->CopyToHost(in + p.staging_offset, p.device, p.bytes));
    return copier_->MarkIssued();
  };
  auto run = [&]() -> Status {
    RETORT_RETURN_IF_ERROR(copier_->OrderAfter(running_ready_.get()));
    std::vector<DeviceCopier::Mark> staged_in(chunks.size());
    RETORT_ASSIGN_OR_RETURN(staged_in[0], issue_to_host(0));
    for (size_t k = 0; k < chunks.size(); ++k) {
      // Chunk k's input is in staging; in-order copies mean the copies back of chunk k-2, which
      // read this slot (and are issued before chunk k's copies in), are done too.
      RETORT_RETURN_IF_ERROR(copier_->Wait(staged_in[k], work.deadline(), aborted));
      if (k + 1 < chunks.size()) {
        RETORT_ASSIGN_OR_RETURN(staged_in[k + 1], issue_to_host(k + 1));
      }
      Slot& slot = slots_[k % 2];
      Chunk& c = chunks[k];
      RETORT_RETURN_IF_ERROR(Await(work, [&](const CollectiveOptions& o) {
        return c.run(slot.in.get(), slot.out.get(), o);
      }));
      char* result = c.in_place ? slot.in.get() : slot.out.get();
      for (const Piece& p : c.to_device)
        RETORT_RETURN_IF_ERROR(copier_->CopyToDevice(p.device, result + p.staging_offset, p.bytes));
    }
    RETORT_ASSIGN_OR_RETURN(DeviceCopier::Mark done, copier_->MarkIssued());
    return copier_->Wait(done, work.deadline(), aborted);
  };
  Status status = run();
  if (!status.ok()) {
    // Copies already issued may still touch the caller's buffers and the staging memory: they
    // must finish before the Work completes.
    auto mark = copier_->MarkIssued();
    if (mark.ok()) {
      Status drained = copier_->Wait(*mark, Deadline::AfterMs(kDrainMs), {});
      if (!drained.ok() && drained.message() != status.message())
        status = status.WithContext("staged (copies did not drain: " + drained.ToString() + ")");
    }
  }
  return status;
}

StagedCommunicator::SegmentSlices StagedCommunicator::SliceSegments(
    const char* input, char* output, const std::vector<size_t>& counts, size_t elem, size_t k,
    size_t parts, bool segments_in, Chunk& c) const {
  SegmentSlices slices;
  slices.counts.resize(counts.size());
  const std::vector<size_t> offsets = Offsets(counts);
  const int me = rank();
  // The per-rank segments are the reduce-scatter's input or the all-gather's output.
  char* segments = segments_in ? const_cast<char*>(input) : output;
  for (size_t r = 0; r < counts.size(); ++r) {
    const size_t n = SliceSize(counts[r], k, parts);
    slices.counts[r] = n;
    if (n == 0) continue;
    const Piece piece{segments + (offsets[r] + SliceBegin(counts[r], k, parts)) * elem,
                      slices.packed * elem, n * elem};
    (segments_in ? c.to_host : c.to_device).push_back(piece);
    slices.packed += n;
  }
  // This rank's own slice: the reduce-scatter's output, or the all-gather's input.
  slices.mine = slices.counts[me];
  char* own = segments_in ? output : const_cast<char*>(input);
  if (slices.mine > 0) {
    const Piece piece{own + SliceBegin(counts[me], k, parts) * elem, 0, slices.mine * elem};
    (segments_in ? c.to_device : c.to_host).push_back(piece);
  }
  c.in_bytes = (segments_in ? slices.packed : slices.mine) * elem;
  c.out_bytes = (segments_in ? slices.mine : slices.packed) * elem;
  return slices;
}

WorkPtr StagedCommunicator::Segmented(const char* name, ConstBuffer input, MutableBuffer output,
                                      const std::vector<size_t>& counts,
                                      const CollectiveOptions& options, bool segments_in,
                                      SegmentOp inner_op) {
  if (Status s = SameKind(input.memory, output.memory, name); !s.ok())
    return CompletedWork(name, s);
  if (input.memory != copier_->device_kind()) {
    return Passthrough(name, options, [=](const CollectiveOptions& o) {
      return inner_op(input, output, counts, o);
    });
  }
  return Submit(std::string(name) + " (staged)", options, [=, this](Work& work) {
    const DataType dtype = segments_in ? input.dtype : output.dtype;
    const size_t parts = ChunkCount(segments_in ? input.bytes() : output.bytes());
    const MemoryKind staging = copier_->staging_kind();
    std::vector<Chunk> chunks(parts);
    for (size_t k = 0; k < parts; ++k) {
      Chunk& c = chunks[k];
      const SegmentSlices slices =
          SliceSegments(static_cast<const char*>(input.data), static_cast<char*>(output.data),
                        counts, DataTypeSize(dtype), k, parts, segments_in, c);
      const size_t in_count = segments_in ? slices.packed : slices.mine;
      const size_t out_count = segments_in ? slices.mine : slices.packed;
      c.run = [inner_op, slices, in_count, out_count, dtype, staging](char* in, char* out,
                                                                      const CollectiveOptions& o) {
        return inner_op({in, in_count, dtype, staging}, {out, out_count, dtype, staging},
                        slices.counts, o);
      };
    }
    return RunChunks(work, chunks);
  });
}

WorkPtr StagedCommunicator::DoReduceScatterV(ConstBuffer input, MutableBuffer output,
                                             const std::vector<size_t>& counts, ReduceOp op,
                                             const CollectiveOptions& options) {
  // Chunk k: every rank's slice k in, this rank's reduced slice k back.
  return Segmented(
      "reduce_scatter", input, output, counts, options, /*segments_in=*/true,
      [this, op](ConstBuffer in, MutableBuffer out, const std::vector<size_t>& c,
                 const CollectiveOptions& o) { return inner_->ReduceScatterV(in, out, c, op, o); });
}

WorkPtr StagedCommunicator::DoAllGatherV(ConstBuffer input, MutableBuffer output,
                                         const std::vector<size_t>& counts,
                                         const CollectiveOptions& options) {
  // Chunk k: this rank's slice k in, every rank's slice k back.
  return Segmented(
      "all_gather", input, output, counts, options, /*segments_in=*/false,
      [this](ConstBuffer in, MutableBuffer out, const std::vector<size_t>& c,
             const CollectiveOptions& o) { return inner_->AllGatherV(in, out, c, o); });
}

std::vector<StagedCommunicator::Chunk> StagedCommunicator::FlatChunks(MutableBuffer data,
                                                                      bool copy_in, bool copy_back,
                                                                      InnerOp inner_op) const {
  const size_t elem = DataTypeSize(data.dtype);
  const size_t parts = ChunkCount(data.bytes());
  const MemoryKind staging = copier_->staging_kind();
  std::vector<Chunk> chunks(parts);
  for (size_t k = 0; k < parts; ++k) {
    Chunk& c = chunks[k];
    const size_t n = SliceSize(data.count, k, parts);
    char* device = static_cast<char*>(data.data) + SliceBegin(data.count, k, parts) * elem;
    c.in_bytes = n * elem;
    c.in_place = true;
    if (n > 0 && copy_in) c.to_host.push_back({device, 0, n * elem});
    if (n > 0 && copy_back) c.to_device.push_back({device, 0, n * elem});
    c.run = [inner_op, n, dtype = data.dtype, staging](char* in, char*,
                                                       const CollectiveOptions& o) {
      return inner_op(MutableBuffer{in, n, dtype, staging}, o);
    };
  }
  return chunks;
}

WorkPtr StagedCommunicator::InPlace(const char* name, MutableBuffer data,
                                    const CollectiveOptions& options, bool copy_in, bool copy_back,
                                    InnerOp inner_op) {
  if (data.memory != copier_->device_kind()) {
    return Passthrough(name, options,
                       [data, inner_op](const CollectiveOptions& o) { return inner_op(data, o); });
  }
  return Submit(std::string(name) + " (staged)", options, [=, this](Work& work) {
    std::vector<Chunk> chunks = FlatChunks(data, copy_in, copy_back, inner_op);
    return RunChunks(work, chunks);
  });
}

WorkPtr StagedCommunicator::DoAllReduce(MutableBuffer data, ReduceOp op,
                                        const CollectiveOptions& options) {
  return InPlace("all_reduce", data, options, /*copy_in=*/true, /*copy_back=*/true,
                 [this, op](MutableBuffer slice, const CollectiveOptions& o) {
                   return inner_->AllReduce(slice, op, o);
                 });
}

WorkPtr StagedCommunicator::DoBroadcast(MutableBuffer data, int root,
                                        const CollectiveOptions& options) {
  return InPlace("broadcast", data, options, /*copy_in=*/rank() == root,
                 /*copy_back=*/rank() != root,
                 [this, root](MutableBuffer slice, const CollectiveOptions& o) {
                   return inner_->Broadcast(slice, root, o);
                 });
}

WorkPtr StagedCommunicator::DoBarrier(const CollectiveOptions& options) {
  return Passthrough("barrier", options,
                     [=, this](const CollectiveOptions& o) { return inner_->Barrier(o); });
}

// Host buffers go straight to the inner communicator (its point-to-point is matched by peer
// and tag, not ordered with the collectives). Device buffers are posted from the executor
// without blocking it, so a Send and the Recv issued after it can both be in flight (a rank
// that waited for its Send before posting its Recv would deadlock with its peer); the idle
// hook completes them (PollInFlight).
WorkPtr StagedCommunicator::DoSend(ConstBuffer data, int peer, uint32_t tag,
                                   const CollectiveOptions& options) {
  if (data.memory != copier_->device_kind()) return inner_->Send(data, peer, tag, options);
  return SubmitPointToPoint("send (staged)", options, [=, this](InFlight& f) -> Status {
    RETORT_ASSIGN_OR_RETURN(f.staging, copier_->AllocateStaging(std::max<size_t>(data.bytes(), 1)));
    RETORT_RETURN_IF_ERROR(copier_->OrderAfter(options.ready.get()));
    if (data.count > 0)
      RETORT_RETURN_IF_ERROR(copier_->CopyToHost(f.staging.get(), data.data, data.bytes()));
    RETORT_ASSIGN_OR_RETURN(DeviceCopier::Mark staged, copier_->MarkIssued());
    RETORT_RETURN_IF_ERROR(copier_->Wait(
        staged, f.work->deadline(), [&] { return f.work->abort_requested() || broken_->load(); }));
    f.inner = inner_->Send({f.staging.get(), data.count, data.dtype, copier_->staging_kind()}, peer,
                           tag, RemainingOf(*f.work));
    return Status::Ok();
  });
}

WorkPtr StagedCommunicator::DoRecv(MutableBuffer data, int peer, uint32_t tag,
                                   const CollectiveOptions& options) {
  if (data.memory != copier_->device_kind()) return inner_->Recv(data, peer, tag, options);
  return SubmitPointToPoint("recv (staged)", options, [=, this](InFlight& f) -> Status {
    RETORT_ASSIGN_OR_RETURN(f.staging, copier_->AllocateStaging(std::max<size_t>(data.bytes(), 1)));
    f.land_in = static_cast<char*>(data.data);
    f.ready = options.ready;
    f.land_bytes = data.bytes();
    f.inner = inner_->Recv({f.staging.get(), data.count, data.dtype, copier_->staging_kind()}, peer,
                           tag, RemainingOf(*f.work));
    return Status::Ok();
  });
}

CollectiveOptions StagedCommunicator::RemainingOf(const Work& work) {
  CollectiveOptions o;
  o.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(work.deadline().Remaining());
  return o;
}

WorkPtr StagedCommunicator::SubmitPointToPoint(std::string description,
                                               const CollectiveOptions& options,
                                               std::function<Status(InFlight&)> post) {
  const auto timeout = options.timeout.value_or(default_timeout());
  return executor_->SubmitDeferred(std::move(description), Deadline::After(timeout),
                                   [this, post = std::move(post)](const WorkPtr& work) -> Status {
                                     InFlight f;
                                     f.work = work;
                                     RETORT_RETURN_IF_ERROR(post(f));
                                     in_flight_.push_back(std::move(f));
                                     return Status::Ok();
                                   });
}

bool StagedCommunicator::PollInFlight() {
  if (in_flight_.empty()) return false;
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    InFlight& f = *it;
    if (f.work->abort_requested() || broken_->load()) f.inner->Abort();
    // Wait drives an inner communicator whose progress is the caller's.
    Status status = f.inner->Wait(Deadline::AfterMs(1));
    if (!f.inner->IsCompleted()) {
      ++it;
      continue;
    }
    if (status.ok() && f.land_in != nullptr && f.land_bytes > 0) {
      // After what the caller queued on that buffer before the receive: it may still read it.
      status = copier_->OrderAfter(f.ready.get());
      if (status.ok()) status = copier_->CopyToDevice(f.land_in, f.staging.get(), f.land_bytes);
      if (status.ok()) {
        auto mark = copier_->MarkIssued();
        status = mark.ok() ? copier_->Wait(*mark, f.work->deadline(), {}) : mark.status();
      }
    }
    f.work->Complete(status);
    it = in_flight_.erase(it);
  }
  return !in_flight_.empty();
}

WorkPtr StagedCommunicator::DoAllToAllV(ConstBuffer input, const std::vector<size_t>& send_counts,
                                        MutableBuffer output,
                                        const std::vector<size_t>& recv_counts,
                                        const CollectiveOptions& options) {
  if (Status s = SameKind(input.memory, output.memory, "all_to_all_v"); !s.ok())
    return CompletedWork("all_to_all_v", s);
  if (input.memory != copier_->device_kind()) {
    return Passthrough("all_to_all_v", options, [=, this](const CollectiveOptions& o) {
      return inner_->AllToAllV(input, send_counts, output, recv_counts, o);
    });
  }
  return Submit("all_to_all_v (staged)", options, [=, this](Work& work) {
    std::vector<Chunk> chunks(1);
    Chunk& c = chunks[0];
    c.in_bytes = input.bytes();
    c.out_bytes = output.bytes();
    if (input.count > 0)
      c.to_host.push_back(
          {const_cast<char*>(static_cast<const char*>(input.data)), 0, input.bytes()});
    if (output.count > 0)
      c.to_device.push_back({static_cast<char*>(output.data), 0, output.bytes()});
    c.run = [this, input, output, send_counts, recv_counts, staging = copier_->staging_kind()](
                char* in, char* out, const CollectiveOptions& o) {
      return inner_->AllToAllV({in, input.count, input.dtype, staging}, send_counts,
                               {out, output.count, output.dtype, staging}, recv_counts, o);
    };
    return RunChunks(work, chunks);
  });
}

}  // namespace retort::collectives
