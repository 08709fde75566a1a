// Size caps per RPC, checked by the gRPC adapters (services.cc) before a request reaches the
// Coordinator: each is far above what a well-behaved worker or operator sends, and far below the
// server-wide kMaxRequestBytes (server.h) that gRPC enforces while receiving. A request above
// its cap is RESOURCE_EXHAUSTED and changes nothing.
#pragma once

#include <cstddef>

namespace retort::coordinator {

inline constexpr size_t kMaxJoinRequestBytes = 64 << 10;
inline constexpr size_t kMaxHeartbeatRequestBytes = 16 << 10;
inline constexpr size_t kMaxLeaveRequestBytes = 16 << 10;
inline constexpr size_t kMaxPeerFailureReportBytes = 16 << 10;
// A KvPut's value is limited by CoordinatorOptions::max_kv_value_bytes (1 MiB); this caps the
// whole request around the largest value allowed.
inline constexpr size_t kMaxKvPutRequestBytes = (1 << 20) + (4 << 10);
inline constexpr size_t kMaxSmallRequestBytes = 4 << 10;  // KvGet, checkpoint begin/get, watch
inline constexpr size_t kMaxAckCheckpointRequestBytes = 1 << 20;
inline constexpr size_t kMaxControlRequestBytes = 4 << 10;
// Event streams (retortctl watch) one client host may hold open at once.
inline constexpr int kMaxEventStreamsPerHost = 16;

}  // namespace retort::coordinator
