// Histogram bucket boundaries shared by retort's metrics (seconds), so dashboards can compare
// coordinator and worker latencies bucket by bucket.
#pragma once

#include <vector>

namespace retort::metrics {

// Step phases: 100 us to 60 s, about x2.5 apart (a phase can be anywhere from a cached teacher
// forward to a stalled loader).
const std::vector<double>& StepPhaseBuckets();
// RPC handling: 50 us to 10 s.
const std::vector<double>& RpcLatencyBuckets();

}  // namespace retort::metrics
