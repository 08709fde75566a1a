// Helpers for the collectives tests: deterministic per-rank inputs, the simple reference
// results they are compared against, and a thread-per-rank runner over an InMemoryStore.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/bootstrap_store.h"
#include "collectives/communicator.h"
#include "collectives/reduce.h"

namespace retort::collectives::testing {

// Small integers, exact in every dtype and in sums of up to 4 ranks.
inline float InputValue(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 13) % 17) - 8);
}

// A typed byte buffer holding `count` elements of `dtype`.
class TypedBuffer {
 public:
  TypedBuffer(DataType dtype, size_t count)
      : dtype_(dtype), count_(count), bytes_(std::max<size_t>(1, count * DataTypeSize(dtype))) {}
  void Set(size_t i, float v) {
    switch (dtype_) {
      case DataType::kFloat32:
        std::memcpy(&bytes_[i * 4], &v, 4);
        return;
      case DataType::kBFloat16:
        Store16(i, FloatToBFloat16(v));
        return;
      case DataType::kFloat16:
        Store16(i, FloatToHalf(v));
        return;
    }
  }
  float Get(size_t i) const {
    switch (dtype_) {
      case DataType::kFloat32: {
        float v;
        std::memcpy(&v, &bytes_[i * 4], 4);
        return v;
      }
      case DataType::kBFloat16:
        return BFloat16ToFloat(Load16(i));
      case DataType::kFloat16:
        return HalfToFloat(Load16(i));
    }
    return 0;
  }
  void* data() { return bytes_.data(); }
  char* at(size_t element) { return bytes_.data() + element * DataTypeSize(dtype_); }
  size_t count() const { return count_; }
  MutableBuffer mutable_buffer() { return MutableBuffer{bytes_.data(), count_, dtype_}; }
  ConstBuffer const_buffer() const { return ConstBuffer{bytes_.data(), count_, dtype_}; }

 private:
  void Store16(size_t i, uint16_t v) { std::memcpy(&bytes_[i * 2], &v, 2); }
  uint16_t Load16(size_t i) const {
    uint16_t v;
    std::memcpy(&v, &bytes_[i * 2], 2);
    return v;
  }
  DataType dtype_;
  size_t count_;
  std::vector<char> bytes_;
};

inline TypedBuffer MakeInput(int rank, DataType dtype, size_t count, size_t first_index = 0) {
  TypedBuffer b(dtype, count);
  for (size_t i = 0; i < count; ++i) b.Set(i, InputValue(rank, first_index + i));
  return b;
}

// Reference: the reduction of element i (global index) over `world` ranks.
inline float ReferenceReduce(int world, size_t i, ReduceOp op) {
  float sum = 0;
  for (int r = 0; r < world; ++r) sum += InputValue(r, i);
  return op == ReduceOp::kAverage ? sum / static_cast<float>(world) : sum;
}

inline float Tolerance(DataType dtype, float expected) {
  switch (dtype) {
    case DataType::kFloat32:
      return 1e-5f * std::max(1.0f, std::fabs(expected));
    case DataType::kBFloat16:
      return 1e-2f * std::max(1.0f, std::fabs(expected));
    case DataType::kFloat16:
      return 2e-3f * std::max(1.0f, std::fabs(expected));
  }
  return 0;
}

// Checks a reduced range; sums are exact (integers), averages within the dtype's rounding.
inline ::testing::AssertionResult MatchesReduction(const TypedBuffer& got, size_t first_index,
                                                   int world, ReduceOp op, DataType dtype) {
  for (size_t i = 0; i < got.count(); ++i) {
    const float want = ReferenceReduce(world, first_index + i, op);
    const float tol = op == ReduceOp::kSum ? 0.0f : Tolerance(dtype, want);
    if (std::fabs(got.Get(i) - want) > tol) {
      return ::testing::AssertionFailure()
             << "element " << i << " (global " << first_index + i << "): got " << got.Get(i)
             << " want " << want << " dtype " << DataTypeName(dtype) << " op " << ReduceOpName(op);
    }
  }
  return ::testing::AssertionSuccess();
}

using CommunicatorFactory = std::function<StatusOr<std::unique_ptr<Communicator>>(
    BootstrapStore* store, int rank, int size, uint64_t generation)>;

// Runs `body` on `world` threads, each with its own communicator from `factory`.
inline void RunThreadRanks(int world, const CommunicatorFactory& factory,
                           const std::function<void(Communicator&)>& body,
                           uint64_t generation = 7) {
  InMemoryStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto comm = factory(&store, r, world, generation);
      ASSERT_TRUE(comm.ok()) << "rank " << r << ": " << comm.status();
      body(**comm);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace retort::collectives::testing
