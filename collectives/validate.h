// Argument checks shared by every Communicator implementation: each returns
// INVALID_ARGUMENT naming the operation and what was wrong.
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
Status ValidateAllToAllV(int size, ConstBuffer input, const std::vector<size_t>& send_counts,
                         MutableBuffer output, const std::vector<size_t>& recv_counts);

}  // namespace retort::collectives
