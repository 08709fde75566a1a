#include "collectives/ring.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>

#include "collectives/reduce.h"

namespace retort::collectives {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

// One step of a ring pipeline: the segment arriving from the left neighbour, where it lands,
// and what happens to it. After step s the segment's final bytes are at `out`, from where
// they are forwarded to the right neighbour in step s + 1.
struct RingStep {
  int segment = 0;
  char* recv = nullptr;         // landing zone of the segment (its start)
  const char* local = nullptr;  // non-null: out = (local + recv) * scale
  char* out = nullptr;          // where the segment is final after this step
  float scale = 1.0f;
};

struct RingPlan {
  std::vector<size_t> counts;  // elements per segment
  std::vector<size_t> offsets;
  DataType dtype = DataType::kFloat32;
  int first_segment = 0;             // sent in step 0 ...
  const char* first_send = nullptr;  // ... from here (its start)
  std::vector<RingStep> steps;
  // Local work that overlaps the first transfers: runs once every receive and the first
  // sends are posted, before the first wait.
  std::function<void()> after_posting;
  // Local work paced by the first step's arrivals: called on this thread with how many
  // bytes of step 0's segment have landed (in order, from its start) out of `total`; the
  // last call has landed == total, and calls after it must do nothing. Per piece where the
  // transport reports a receive's progress (Transport::SetLandedCallback); where it does not,
  // once with landed == total right after posting (like after_posting).
  std::function<void(size_t landed, size_t total)> first_step_landed;
};

// Runs a ring plan: posts every receive, sends step 0, then walks the steps in order and
// handles each chunk as it arrives (reduce, forward).
Status RunRing(const RingContext& ctx, const RingPlan& plan) {
  Transport& t = *ctx.transport;
  const int n = t.size();
  const int right = Mod(t.rank() + 1, n);
  const int left = Mod(t.rank() - 1, n);
  const size_t elem = DataTypeSize(plan.dtype);
  const size_t chunk_elems = std::max<size_t>(1, ctx.chunk_bytes / elem);
  size_t max_chunks = 0;
  for (size_t c : plan.counts)
    max_chunks = std::max(max_chunks, (c + chunk_elems - 1) / chunk_elems);
  auto chunks_of = [&](int segment) {
    return (plan.counts[segment] + chunk_elems - 1) / chunk_elems;
  };
  auto chunk_count = [&](int segment, size_t c) {
    return std::min(chunk_elems, plan.counts[segment] - c * chunk_elems);
  };
  auto tag = [&](size_t step, size_t c) {
    return MessageTag{false, ctx.sequence, static_cast<uint32_t>(step * max_chunks + c)};
  };

  Status status;
  std::vector<std::vector<Transport::RequestId>> recvs(plan.steps.size());
  bool first_step_reports_landing = true;
  for (size_t s = 0; s < plan.steps.size() && status.ok(); ++s) {
    const RingStep& step = plan.steps[s];
    for (size_t c = 0; c < chunks_of(step.segment); ++c) {
      auto id = t.PostRecv(left, tag(s, c), step.recv + c * chunk_elems * elem,
                           chunk_count(step.segment, c) * elem);
      if (!id.ok()) {
        status = id.status();
        break;
      }
      if (s == 0 && plan.first_step_landed) {
        const size_t start = c * chunk_elems * elem;
        const size_t total = plan.counts[step.segment] * elem;
        first_step_reports_landing &=
            t.SetLandedCallback(*id, [&plan, start, total](size_t landed) {
              plan.first_step_landed(start + landed, total);
            });
      }
      recvs[s].push_back(*id);
    }
  }
  for (size_t c = 0; status.ok() && c < chunks_of(plan.first_segment); ++c) {
    auto id = t.PostSend(right, tag(0, c), plan.first_send + c * chunk_elems * elem,
                         chunk_count(plan.first_segment, c) * elem);
    if (!id.ok()) status = id.status();
  }
  if (plan.after_posting) plan.after_posting();
  if (status.ok() && plan.first_step_landed && !first_step_reports_landing) {
    // Nothing will be reported while step 0 lands (e.g. over TCP): do the paced work now,
    // overlapping the transfers, as after_posting would.
    const size_t total = plan.counts[plan.steps[0].segment] * elem;
    plan.first_step_landed(total, total);
  }
  for (size_t s = 0; s < plan.steps.size() && status.ok(); ++s) {
    const RingStep& step = plan.steps[s];
    for (size_t c = 0; c < recvs[s].size() && status.ok(); ++c) {
      status = t.Wait(recvs[s][c], ctx.control);
      if (!status.ok()) break;
      const size_t at = c * chunk_elems * elem;
      const size_t count = chunk_count(step.segment, c);
      if (step.local != nullptr) {
        ReduceTo(step.out + at, step.local + at, step.recv + at, count, plan.dtype, step.scale);
      }
      if (s == 0 && plan.first_step_landed) {
        plan.first_step_landed(at + count * elem, plan.counts[step.segment] * elem);
      }
      if (s + 1 < plan.steps.size()) {
        auto id = t.PostSend(right, tag(s + 1, c), step.out + at, count * elem);
        if (!id.ok()) status = id.status();
      }
    }
  }
  return t.FinishOperation(status, ctx.control);
}

// Appends the reduce-scatter steps of a ring over `data_in` (segments `counts`), the final
// segment (this rank's) landing at `final_out`. `staging` must hold every segment but the
// two this rank sends first and keeps.
void AppendReduceScatterSteps(int rank, int n, const char* data_in, char* final_out, ReduceOp op,
                              char* staging, RingPlan* plan) {
  const size_t elem = DataTypeSize(plan->dtype);
  plan->first_segment = Mod(rank - 1, n);
  plan->first_send = data_in + plan->offsets[plan->first_segment] * elem;
  size_t staged = 0;
  for (int s = 0; s < n - 1; ++s) {
    RingStep step;
    step.segment = Mod(rank - 2 - s, n);
    step.recv = staging + staged;
    staged += plan->counts[step.segment] * elem;
    step.local = data_in + plan->offsets[step.segment] * elem;
    const bool last = s == n - 2;
    step.out = last ? final_out : step.recv;
    step.scale = last && op == ReduceOp::kAverage ? 1.0f / static_cast<float>(n) : 1.0f;
    plan->steps.push_back(step);
  }
}

size_t StagingBytes(int rank, int n, const std::vector<size_t>& counts, DataType dtype) {
  size_t total = 0;
  for (int s = 0; s < n - 1; ++s) total += counts[Mod(rank - 2 - s, n)];
  return total * DataTypeSize(dtype);
}

// Staging memory of the reduce-scatter phase: the communicator's reusable scratch buffer
// (grow-only, so steady-state operations neither allocate nor page-fault), or a fresh one.
char* Staging(const RingContext& ctx, size_t bytes, std::unique_ptr<char[]>* fallback) {
  bytes = std::max<size_t>(bytes, 1);
  if (ctx.scratch == nullptr) {
    fallback->reset(new char[bytes]);
    return fallback->get();
  }
  if (ctx.scratch->size() < bytes) ctx.scratch->resize(bytes);
  return ctx.scratch->data();
}

void CopyOrScale(void* dst, const void* src, size_t count, DataType dtype, float scale) {
  if (scale != 1.0f) {
    ScaleInto(dst, src, count, dtype, scale);
  } else if (dst != src && count > 0) {
    // In 128 KiB pieces (as OpenMPI's datatype copy does): one large memmove switches to
    // non-temporal stores past glibc's threshold (a fraction of the L3), which here made the
    // all-gather's local copy of a 32 MiB segment cost as much as the peer's single-copy read.
    // Pieces stay on the cached path. Overlapping ranges take one memmove.
    constexpr size_t kPiece = size_t{128} << 10;
    const size_t bytes = count * DataTypeSize(dtype);
    char* d = static_cast<char*>(dst);
    const char* s = static_cast<const char*>(src);
    if (d < s + bytes && s < d + bytes) {
      std::memmove(d, s, bytes);
      return;
    }
    for (size_t at = 0; at < bytes; at += kPiece)
      std::memcpy(d + at, s + at, std::min(kPiece, bytes - at));
  }
}

}  // namespace

Status RingReduceScatterV(const RingContext& ctx, ConstBuffer input, MutableBuffer output,
                          const std::vector<size_t>& counts, ReduceOp op) {
  const int n = ctx.transport->size();
  const int rank = ctx.transport->rank();
  const size_t elem = DataTypeSize(input.dtype);
  const std::vector<size_t> offsets = Offsets(counts);
  if (n == 1) {
    CopyOrScale(output.data, static_cast<const char*>(input.data) + offsets[0] * elem, counts[0],
                input.dtype, 1.0f);
    return Status::Ok();
  }
  RingPlan plan;
  plan.counts = counts;
  plan.offsets = offsets;
  plan.dtype = input.dtype;
  std::unique_ptr<char[]> owned;
  char* staging = Staging(ctx, StagingBytes(rank, n, counts, input.dtype), &owned);
  AppendReduceScatterSteps(rank, n, static_cast<const char*>(input.data),
                           static_cast<char*>(output.data), op, staging, &plan);
  return RunRing(ctx, plan);
}

Status RingAllGatherV(const RingContext& ctx, ConstBuffer input, MutableBuffer output,
                      const std::vector<size_t>& counts) {
  const int n = ctx.transport->size();
  const int rank = ctx.transport->rank();
  const size_t elem = DataTypeSize(input.dtype);
  const std::vector<size_t> offsets = Offsets(counts);
  char* out = static_cast<char*>(output.data);
  auto copy_own_segment = [&] {
    CopyOrScale(out + offsets[rank] * elem, input.data, counts[rank], input.dtype, 1.0f);
  };
  if (n == 1) {
    copy_own_segment();
    return Status::Ok();
  }

  RingPlan plan;
  plan.counts = counts;
  plan.offsets = offsets;
  plan.dtype = input.dtype;
  plan.first_segment = rank;
  // This rank's segment goes out straight from the input (which stays unchanged and is
  // likely still cached). With more than two ranks the local copy into the output runs once
  // everything is posted, overlapping the peers' transfers.
  plan.first_send = static_cast<const char*>(input.data);
  // Two ranks: a direct exchange with nothing to forward, so chunks would only add messages
  // (each large one is a rendezvous); each segment goes whole, straight into the peer's
  // output. The local copy is paced by the peer's segment landing (per 1 MiB piece of a
  // single-copy read): each piece of the input is copied while the peer's read of the same
  // piece has just passed through the cache (bench/collectives/RESULTS.md).
  RingContext whole = ctx;
  size_t own_copied = 0;  // elements of this rank's segment copied so far
  // (Both ranks must chunk alike: decided from the counts alone.)
  if (n == 2) whole.chunk_bytes = std::max(ctx.chunk_bytes, std::max(counts[0], counts[1]) * elem);
  if (n == 2 && counts[1 - rank] > 0) {
    plan.first_step_landed = [&, rank](size_t landed, size_t total) {
      const size_t own = counts[rank];
      const size_t upto =
          landed >= total
              ? own
              : static_cast<size_t>(static_cast<unsigned __int128>(own) * landed / total);
      if (upto <= own_copied) return;
      CopyOrScale(out + (offsets[rank] + own_copied) * elem,
                  static_cast<const char*>(input.data) + own_copied * elem, upto - own_copied,
                  input.dtype, 1.0f);
      own_copied = upto;
    };
  } else {
    plan.after_posting = copy_own_segment;
  }
  for (int s = 0; s < n - 1; ++s) {
    RingStep step;
    step.segment = Mod(rank - 1 - s, n);
    step.recv = out + offsets[step.segment] * elem;
    step.out = step.recv;
    plan.steps.push_back(step);
  }
  return RunRing(whole, plan);
}

Status RingAllReduce(const RingContext& ctx, MutableBuffer data, ReduceOp op) {
  const int n = ctx.transport->size();
  const int rank = ctx.transport->rank();
  if (n == 1) {
    CopyOrScale(data.data, data.data, data.count, data.dtype, 1.0f);
    return Status::Ok();
  }
  const size_t elem = DataTypeSize(data.dtype);
  RingPlan plan;
  plan.counts = EvenCounts(data.count, n);
  plan.offsets = Offsets(plan.counts);
  plan.dtype = data.dtype;
  char* base = static_cast<char*>(data.data);
  std::unique_ptr<char[]> owned;
  char* staging = Staging(ctx, StagingBytes(rank, n, plan.counts, data.dtype), &owned);
  AppendReduceScatterSteps(rank, n, base, base + plan.offsets[rank] * elem, op, staging, &plan);
  for (int s = 0; s < n - 1; ++s) {  // all-gather phase, continuing the same pipeline
    RingStep step;
    step.segment = Mod(rank - 1 - s, n);
    step.recv = base + plan.offsets[step.segment] * elem;
    step.out = step.recv;
    plan.steps.push_back(step);
  }
  return RunRing(ctx, plan);
}

Status ChainBroadcast(const RingContext& ctx, MutableBuffer data, int root) {
  Transport& t = *ctx.transport;
  const int n = t.size();
  if (n == 1 || data.count == 0) return Status::Ok();
  const int position = Mod(t.rank() - root, n);
  const int prev = Mod(t.rank() - 1, n);
  const int next = Mod(t.rank() + 1, n);
  const bool forwards = position < n - 1;
  const size_t bytes = data.bytes();
  const size_t chunk = std::max<size_t>(DataTypeSize(data.dtype), ctx.chunk_bytes);
  char* base = static_cast<char*>(data.data);
  const size_t chunks = (bytes + chunk - 1) / chunk;
  Status status;
  std::vector<Transport::RequestId> recvs;
  for (size_t c = 0; position > 0 && c < chunks && status.ok(); ++c) {
    auto id = t.PostRecv(prev, MessageTag{false, ctx.sequence, static_cast<uint32_t>(c)},
                         base + c * chunk, std::min(chunk, bytes - c * chunk));
    if (!id.ok())
      status = id.status();
    else
      recvs.push_back(*id);
  }
  for (size_t c = 0; c < chunks && status.ok(); ++c) {
    if (position > 0) status = t.Wait(recvs[c], ctx.control);
    if (status.ok() && forwards) {
      auto id = t.PostSend(next, MessageTag{false, ctx.sequence, static_cast<uint32_t>(c)},
                           base + c * chunk, std::min(chunk, bytes - c * chunk));
      if (!id.ok()) status = id.status();
    }
  }
  return t.FinishOperation(status, ctx.control);
}

Status DisseminationBarrier(const RingContext& ctx) {
  Transport& t = *ctx.transport;
  const int n = t.size();
  Status status;
  char send_byte = 0;
  char recv_byte = 0;
  uint32_t round = 0;
  for (int k = 1; k < n && status.ok(); k *= 2, ++round) {
    MessageTag tag{false, ctx.sequence, round};
    auto recv = t.PostRecv(Mod(t.rank() - k, n), tag, &recv_byte, 1);
    if (!recv.ok()) {
      status = recv.status();
      break;
    }
    auto send = t.PostSend(Mod(t.rank() + k, n), tag, &send_byte, 1);
    if (!send.ok()) {
      status = send.status();
      break;
    }
    status = t.Wait(*recv, ctx.control);
    if (status.ok()) status = t.Wait(*send, ctx.control);
  }
  return t.FinishOperation(status, ctx.control);
}

Status DirectAllToAllV(const RingContext& ctx, ConstBuffer input,
                       const std::vector<size_t>& send_counts, MutableBuffer output,
                       const std::vector<size_t>& recv_counts) {
  Transport& t = *ctx.transport;
  const int n = t.size();
  const int rank = t.rank();
  const size_t elem = DataTypeSize(input.dtype);
  const std::vector<size_t> send_offsets = Offsets(send_counts);
  const std::vector<size_t> recv_offsets = Offsets(recv_counts);
  const char* in = static_cast<const char*>(input.data);
  char* out = static_cast<char*>(output.data);
  if (recv_counts[rank] > 0) {
    std::memcpy(out + recv_offsets[rank] * elem, in + send_offsets[rank] * elem,
                recv_counts[rank] * elem);
  }
  Status status;
  std::vector<Transport::RequestId> requests;
  const MessageTag tag{false, ctx.sequence, 0};
  // Every receive is posted before any send (from the nearest peer out), so no send waits on
  // a receive this rank has not posted yet.
  auto keep = [&](StatusOr<Transport::RequestId> id) {
    if (!id.ok())
      status = id.status();
    else
      requests.push_back(*id);
  };
  for (int i = 1; i < n && status.ok(); ++i) {
    const int peer = Mod(rank - i, n);
    if (recv_counts[peer] > 0)
      keep(t.PostRecv(peer, tag, out + recv_offsets[peer] * elem, recv_counts[peer] * elem));
  }
  for (int i = 1; i < n && status.ok(); ++i) {
    const int peer = Mod(rank + i, n);
    if (send_counts[peer] > 0)
      keep(t.PostSend(peer, tag, in + send_offsets[peer] * elem, send_counts[peer] * elem));
  }
  for (size_t i = 0; i < requests.size() && status.ok(); ++i) {
    status = t.Wait(requests[i], ctx.control);
  }
  return t.FinishOperation(status, ctx.control);
}

}  // namespace retort::collectives
