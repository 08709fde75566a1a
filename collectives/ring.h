// Ring algorithms over a Transport, with chunked pipelining: every receive of the operation
// is posted up front, and each chunk is reduced (and forwarded) as soon as it arrives, so
// reduction overlaps the transfer of later chunks. Bandwidth-optimal: each rank sends
// (n-1)/n of the data per phase.
//
// All functions run on the communicator's executor thread, take validated arguments
// (validate.h) and return after every request finished (or was cancelled on error).
#pragma once

#include <vector>

#include "collectives/transport.h"
#include "collectives/types.h"

namespace retort::collectives {

struct RingContext {
  Transport* transport = nullptr;
  uint32_t sequence = 0;   // operation number, the same on every rank
  size_t chunk_bytes = 0;  // pipelining granularity
  WaitControl control;
  // Reusable staging memory owned by the communicator (grow-only); null: allocate per call.
  std::vector<char>* scratch = nullptr;
};

Status RingReduceScatterV(const RingContext& ctx, ConstBuffer input, MutableBuffer output,
                          const std::vector<size_t>& counts, ReduceOp op);
// With two ranks each segment travels as one message (nothing to forward, so no chunking).
Status RingAllGatherV(const RingContext& ctx, ConstBuffer input, MutableBuffer output,
                      const std::vector<size_t>& counts);
// Reduce-scatter then all-gather in one pipeline: a chunk of the reduced segment starts its
// all-gather as soon as it is final.
Status RingAllReduce(const RingContext& ctx, MutableBuffer data, ReduceOp op);
// Pipelined chain from root.
Status ChainBroadcast(const RingContext& ctx, MutableBuffer data, int root);
// Dissemination barrier (log2(n) rounds of empty messages).
Status DisseminationBarrier(const RingContext& ctx);
// Direct exchange: every receive posted, then every send.
Status DirectAllToAllV(const RingContext& ctx, ConstBuffer input,
                       const std::vector<size_t>& send_counts, MutableBuffer output,
                       const std::vector<size_t>& recv_counts);

}  // namespace retort::collectives
