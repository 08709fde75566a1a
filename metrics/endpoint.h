#pragma once

// One component's Prometheus endpoint: the exporter (HTTP server and registry) and the
// component's metrics object registered in it (WorkerMetrics, CoordinatorMetrics). Destroying
// the endpoint stops serving before the metrics go, so no scrape reads them half destroyed.
// Thread-safety: as Metrics and MetricsExporter are; Start and destruction on one thread.

#include <memory>
#include <string>

#include "common/args.h"
#include "common/logging.h"
#include "common/status.h"
#include "metrics/exporter.h"

namespace retort::metrics {

template <typename Metrics>
class Endpoint {
 public:
  // Serves /metrics on `listen` (host:port; INVALID_ARGUMENT naming it, UNAVAILABLE on bind).
  static StatusOr<std::unique_ptr<Endpoint>> Start(const std::string& listen) {
    std::unique_ptr<Endpoint> e(new Endpoint());
    RETORT_ASSIGN_OR_RETURN(e->exporter_, MetricsExporter::Start(listen));
    e->metrics_ = std::make_unique<Metrics>(e->exporter_->registry());
    return e;
  }
  // As Start for a --metrics-listen value: nullptr when it is empty (metrics off); otherwise
  // the bound port is logged as `component`'s.
  static StatusOr<std::unique_ptr<Endpoint>> StartIfListening(const std::string& listen,
                                                              const char* component) {
    if (listen.empty()) return std::unique_ptr<Endpoint>();
    RETORT_ASSIGN_OR_RETURN(std::unique_ptr<Endpoint> e, Start(listen));
    LOG_INFO(component) << "metrics on port " << e->port() << " (/metrics)";
    return e;
  }
  ~Endpoint() { exporter_.reset(); }

  Metrics* metrics() const { return metrics_.get(); }
  MetricsExporter& exporter() const { return *exporter_; }
  int port() const { return exporter_->port(); }

 private:
  Endpoint() = default;
  std::unique_ptr<MetricsExporter> exporter_;
  std::unique_ptr<Metrics> metrics_;
};

// --metrics-listen, the flag every binary that serves metrics takes (see StartIfListening).
inline void AddMetricsListenFlag(ArgParser& args, std::string* listen) {
  args.AddString("metrics-listen", listen,
                 "serve Prometheus metrics at http://HOST:PORT/metrics (empty = off)");
}

}  // namespace retort::metrics
