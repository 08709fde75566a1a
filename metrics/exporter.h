// MetricsExporter: serves Prometheus metrics over HTTP (text exposition format 0.0.4, GET
// /metrics) from one prometheus-cpp registry plus any extra collectables (e.g. gauges read from
// live state at scrape time).
//
// The HTTP side is our own small server on one thread with a default-sized stack, not
// prometheus-cpp's civetweb exposer: civetweb starts its threads with a fixed 100 KiB stack,
// which glibc refuses in a process whose libraries need more static TLS than that (a worker
// linked with LibTorch's CUDA libraries), so scrapes would fail there.
//
// Threading: Start() and the destructor on one thread; scrapes are answered on the exporter's
// thread, one at a time, and call Collect() on every collectable, which must be thread-safe.
// Ownership: owns the registry, the socket and the thread; extra collectables are shared.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace prometheus {
class Collectable;
class Registry;
}  // namespace prometheus

namespace retort::metrics {

class MetricsExporter {
 public:
  // Listens on `listen` ("host:port"; port 0 picks a free one). INVALID_ARGUMENT naming the
  // value when it is not host:port; UNAVAILABLE when it cannot bind.
  static StatusOr<std::unique_ptr<MetricsExporter>> Start(const std::string& listen);
  // Stops answering (within ~200 ms) and closes the socket.
  ~MetricsExporter();

  prometheus::Registry& registry() { return *registry_; }
  // Adds a collectable to every later scrape. Kept alive by the exporter.
  void Add(std::shared_ptr<prometheus::Collectable> collectable);
  // The bound port.
  int port() const { return port_; }
  // The exposition text a scrape gets now (for tests and tools).
  std::string Render() const;

 private:
  MetricsExporter() = default;
  void Serve();
  void Answer(int fd) const;

  std::shared_ptr<prometheus::Registry> registry_;
  mutable Mutex mu_;
  std::vector<std::shared_ptr<prometheus::Collectable>> extra_ RETORT_GUARDED_BY(mu_);
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// Checks a --metrics-listen value ("host:port", port 0-65535); the error names the flag and value.
Status ValidateListenAddress(const std::string& flag, const std::string& listen);

}  // namespace retort::metrics
