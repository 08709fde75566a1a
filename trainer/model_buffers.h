// A model's buffers (BatchNorm running statistics, num_batches_tracked, ...) as one flat blob
// that travels over float32 collectives and into checkpoint files.
//
// Blob layout: the raw bytes of every buffer of Model::NamedBuffers(), in that order, each
// in its own dtype and contiguous, concatenated and zero-padded to a multiple of 4 bytes; it
// is carried as float32 words that are only ever copied, never added. Two models of the same
// architecture have the same blob size, so every rank knows the size without asking.
//
// Buffers across ranks follow PyTorch DDP's broadcast_buffers=True: every rank enters a
// forward with rank 0's buffers. KdStep broadcasts them at the end of each step, so at every
// step boundary all ranks hold the same buffers and any rank can save or restore them.
//
// Threading: the caller's thread; the model must not run a forward meanwhile.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "trainer/shard_comm.h"

namespace retort::trainer {

class Model;

// Blob size in float32 words (0 when the model has no buffers).
int64_t ModelBufferWords(Model& model);
// Copies the model's buffers into a blob of ModelBufferWords(model) words (CPU float32).
torch::Tensor PackModelBuffers(Model& model);
// Copies a blob back into the model's buffers (on whatever device they live). INVALID_ARGUMENT
// when `words` does not match the model's blob size.
Status UnpackModelBuffers(const float* blob, int64_t words, Model& model);
// Gives every rank rank 0's buffers (an AllGatherV in which only rank 0 contributes). A no-op
// for models without buffers. Every rank must call it at the same point.
Status BroadcastModelBuffers(Model& model, ShardComm& comm, Deadline deadline);

}  // namespace retort::trainer
