#include "metrics/buckets.h"

namespace retort::metrics {

const std::vector<double>& StepPhaseBuckets() {
  static const std::vector<double> b = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                        0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                        1,      2.5,     5,      10,    30,     60};
  return b;
}

const std::vector<double>& RpcLatencyBuckets() {
  static const std::vector<double> b = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                        0.005,   0.01,   0.025,   0.05,   0.1,   0.25,
                                        0.5,     1,      2.5,     10};
  return b;
}

}  // namespace retort::metrics
