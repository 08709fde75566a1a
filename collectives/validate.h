// Argument checks of the Communicator operations, run once by Communicator's public methods
// (communicator.cc) before a backend sees the arguments: each returns INVALID_ARGUMENT
// naming the operation and what was wrong.
#pragma once

#include <vector>

#include "collectives/types.h"

namespace retort::collectives {

Status ValidateReduceScatterV(int rank, int size, ConstBuffer input, MutableBuffer output,
                              const std::vector<size_t>& counts);
Status ValidateAllGatherV(int rank, int size, ConstBuffer input, MutableBuffer output,
                          const std::vector<size_t>& counts);
Status ValidateBroadcast(int size, MutableBuffer data, int root);
Status ValidatePeer(int rank, int size, int peer, const char* op);
// Send/Recv: a peer other than this rank, and a non-null buffer unless it is empty.
Status ValidatePointToPoint(int rank, int size, int peer, const void* data, size_t count,
                            const char* op);
// Equal-count forms: `total` (named total_name) must be size x `part` (named part_name).
Status ValidateEqualCounts(const char* op, const char* total_name, size_t total,
                           const char* part_name, size_t part, int size);
Status ValidateAllToAllV(int size, ConstBuffer input, const std::vector<size_t>& send_counts,
                         MutableBuffer output, const std::vector<size_t>& recv_counts);

}  // namespace retort::collectives
