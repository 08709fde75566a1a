// Per-rank correctness checks shared by every backend's tests: each runs one collective on
// `comm` with deterministic inputs and compares the result with the simple reference.
#pragma once

#include "tests/collectives/collective_test_util.h"

namespace retort::collectives::testing {

inline Status WaitFor(const WorkPtr& work) { return work->Wait(Deadline::AfterMs(60000)); }

inline void CheckReduceScatterV(Communicator& comm, DataType dtype, ReduceOp op,
                                const std::vector<size_t>& counts, bool in_place = false) {
  const int r = comm.rank();
  const std::vector<size_t> offsets = Offsets(counts);
  TypedBuffer input = MakeInput(r, dtype, TotalCount(counts));
  TypedBuffer separate(dtype, counts[r]);
  MutableBuffer out =
      in_place ? MutableBuffer{input.at(offsets[r]), counts[r], dtype} : separate.mutable_buffer();
  Status s = WaitFor(comm.ReduceScatterV(input.const_buffer(), out, counts, op));
  ASSERT_TRUE(s.ok()) << "rank " << r << ": " << s;
  TypedBuffer got(dtype, counts[r]);
  if (counts[r] > 0) std::memcpy(got.data(), out.data, out.bytes());
  EXPECT_TRUE(MatchesReduction(got, offsets[r], comm.size(), op, dtype)) << "rank " << r;
}

inline void CheckAllGatherV(Communicator& comm, DataType dtype, const std::vector<size_t>& counts,
                            bool in_place = false) {
  const int r = comm.rank();
  const std::vector<size_t> offsets = Offsets(counts);
  TypedBuffer output(dtype, TotalCount(counts));
  TypedBuffer input = MakeInput(r, dtype, counts[r], offsets[r]);
  ConstBuffer in = input.const_buffer();
  if (in_place) {
    for (size_t i = 0; i < counts[r]; ++i) output.Set(offsets[r] + i, input.Get(i));
    in = ConstBuffer{output.at(offsets[r]), counts[r], dtype};
  }
  Status s = WaitFor(comm.AllGatherV(in, output.mutable_buffer(), counts));
  ASSERT_TRUE(s.ok()) << "rank " << r << ": " << s;
  for (int owner = 0; owner < comm.size(); ++owner) {
    for (size_t i = 0; i < counts[owner]; ++i) {
      const size_t g = offsets[owner] + i;
      ASSERT_EQ(output.Get(g), InputValue(owner, g)) << "rank " << r << " element " << g;
    }
  }
}

inline void CheckAllReduce(Communicator& comm, DataType dtype, ReduceOp op, size_t count) {
  TypedBuffer data = MakeInput(comm.rank(), dtype, count);
  Status s = WaitFor(comm.AllReduce(data.mutable_buffer(), op));
  ASSERT_TRUE(s.ok()) << "rank " << comm.rank() << ": " << s;
  EXPECT_TRUE(MatchesReduction(data, 0, comm.size(), op, dtype)) << "rank " << comm.rank();
}

inline void CheckBroadcast(Communicator& comm, DataType dtype, size_t count, int root) {
  TypedBuffer data =
      comm.rank() == root ? MakeInput(root, dtype, count) : TypedBuffer(dtype, count);
  Status s = WaitFor(comm.Broadcast(data.mutable_buffer(), root));
  ASSERT_TRUE(s.ok()) << "rank " << comm.rank() << ": " << s;
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(data.Get(i), InputValue(root, i)) << i;
}

// send_counts[p] on rank a == recv_counts[a] on rank p: counts are symmetric in (a, b).
inline size_t PairCount(int a, int b, size_t base) {
  return static_cast<size_t>((a + b) % 3) * base + (a == b ? 1 : 0);
}
inline float PairValue(int src, int dst, size_t i) {
  return static_cast<float>(src * 1000 + dst * 100 + static_cast<int>(i % 97));
}

inline void CheckAllToAllV(Communicator& comm, size_t base) {
  const int n = comm.size();
  const int r = comm.rank();
  std::vector<size_t> send_counts(n), recv_counts(n);
  for (int p = 0; p < n; ++p) {
    send_counts[p] = PairCount(r, p, base);
    recv_counts[p] = PairCount(p, r, base);
  }
  TypedBuffer input(DataType::kFloat32, TotalCount(send_counts));
  TypedBuffer output(DataType::kFloat32, TotalCount(recv_counts));
  const auto send_offsets = Offsets(send_counts);
  const auto recv_offsets = Offsets(recv_counts);
  for (int p = 0; p < n; ++p) {
    for (size_t i = 0; i < send_counts[p]; ++i) input.Set(send_offsets[p] + i, PairValue(r, p, i));
  }
  Status s = WaitFor(
      comm.AllToAllV(input.const_buffer(), send_counts, output.mutable_buffer(), recv_counts));
  ASSERT_TRUE(s.ok()) << "rank " << r << ": " << s;
  for (int p = 0; p < n; ++p) {
    for (size_t i = 0; i < recv_counts[p]; ++i) {
      ASSERT_EQ(output.Get(recv_offsets[p] + i), PairValue(p, r, i)) << "from " << p << " " << i;
    }
  }
}

// Every rank sends to its right neighbour and receives from its left, both issued before
// either is waited on (must not deadlock).
inline void CheckSendRecvRing(Communicator& comm, size_t count) {
  const int n = comm.size();
  const int r = comm.rank();
  if (n == 1) return;
  TypedBuffer out = MakeInput(r, DataType::kFloat32, count);
  TypedBuffer in(DataType::kFloat32, count);
  WorkPtr send = comm.Send(out.const_buffer(), (r + 1) % n, 5);
  WorkPtr recv = comm.Recv(in.mutable_buffer(), (r + n - 1) % n, 5);
  Status s = WaitFor(send);
  ASSERT_TRUE(s.ok()) << s;
  s = WaitFor(recv);
  ASSERT_TRUE(s.ok()) << s;
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(in.Get(i), InputValue((r + n - 1) % n, i)) << i;
}

// Uneven counts with zeros, as a ZeRO-1 bucket intersecting shard ranges produces.
inline std::vector<size_t> UnevenCounts(int n, size_t base) {
  std::vector<size_t> counts(n);
  for (int p = 0; p < n; ++p) counts[p] = p % 2 == 1 ? 0 : base + static_cast<size_t>(p) * 3 + 1;
  if (n == 2) counts[1] = base / 2;
  return counts;
}

}  // namespace retort::collectives::testing
