#include "metrics/exporter.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/host_port.h"

namespace retort::metrics {
namespace {

constexpr int kPollMs = 200;         // how soon the thread notices the destructor
constexpr int kRequestTimeoutS = 2;  // a client that sends nothing is dropped after this
constexpr size_t kMaxRequestBytes = 8192;

void SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

std::string Response(const char* status, const char* type, const std::string& body) {
  return std::string("HTTP/1.1 ") + status + "\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
         body;
}

}  // namespace

Status ValidateListenAddress(const std::string& flag, const std::string& listen) {
  const HostPort parts = SplitHostPort(listen);
  const std::string bad = "--" + flag + ": '" + listen + "' is not host:port";
  if (parts.host.empty() || parts.port.empty()) return InvalidArgumentError(bad);
  const std::string& port = parts.port;
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return InvalidArgumentError(bad + " (port '" + port + "')");
  if (std::stoi(port) > 65535) return InvalidArgumentError(bad + " (port " + port + " > 65535)");
  return Status::Ok();
}

StatusOr<std::unique_ptr<MetricsExporter>> MetricsExporter::Start(const std::string& listen) {
  RETORT_RETURN_IF_ERROR(ValidateListenAddress("metrics-listen", listen));
  const HostPort parts = SplitHostPort(listen);
  const std::string& host = parts.host;
  const std::string& port = parts.port;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return InvalidArgumentError("--metrics-listen: cannot resolve '" + host +
                                "': " + ::gai_strerror(rc));
  std::unique_ptr<MetricsExporter> e(new MetricsExporter());
  std::string error = "no address";
  for (addrinfo* a = found; a && e->listen_fd_ < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 16) == 0) {
      e->listen_fd_ = fd;
    } else {
      error = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (e->listen_fd_ < 0)
    return UnavailableError("cannot serve metrics on " + listen + ": " + error);
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(e->listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  e->port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  e->registry_ = std::make_shared<prometheus::Registry>();
  e->thread_ = std::thread([raw = e.get()] { raw->Serve(); });
  return e;
}

MetricsExporter::~MetricsExporter() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void MetricsExporter::Add(std::shared_ptr<prometheus::Collectable> collectable) {
  MutexLock lock(mu_);
  extra_.push_back(std::move(collectable));
}

std::string MetricsExporter::Render() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::vector<std::shared_ptr<prometheus::Collectable>> extra;
  {
    MutexLock lock(mu_);
    extra = extra_;
  }
  for (const auto& c : extra) {
    auto more = c->Collect();
    families.insert(families.end(), more.begin(), more.end());
  }
  return prometheus::TextSerializer().Serialize(families);
}

void MetricsExporter::Serve() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, kPollMs) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Answer(fd);
    ::close(fd);
  }
}

void MetricsExporter::Answer(int fd) const {
  timeval tv{kRequestTimeoutS, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  std::string request;
  char buf[1024];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequestBytes) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    request.append(buf, static_cast<size_t>(n));
  }
  const std::string line = request.substr(0, request.find("\r\n"));
  if (line.rfind("GET ", 0) != 0) {
    SendAll(fd, Response("405 Method Not Allowed", "text/plain", "GET /metrics only\n"));
    return;
  }
  const std::string path = line.substr(4, line.find(' ', 4) - 4);
  if (path != "/metrics" && path.rfind("/metrics?", 0) != 0) {
    SendAll(fd, Response("404 Not Found", "text/plain", "metrics are at /metrics\n"));
    return;
  }
  SendAll(fd, Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", Render()));
}

}  // namespace retort::metrics
