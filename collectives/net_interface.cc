#include "collectives/net_interface.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstring>
#include <memory>

namespace retort::collectives {
namespace {

// "host", "host:port", "[v6]", "[v6]:port" -> host. A bare IPv6 literal (several colons) is
// taken whole.
std::string HostPart(const std::string& address) {
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    return close == std::string::npos ? address : address.substr(1, close - 1);
  }
  const size_t colon = address.find(':');
  if (colon != std::string::npos && address.find(':', colon + 1) == std::string::npos)
    return address.substr(0, colon);
  return address;
}

struct IfaddrsDeleter {
  void operator()(ifaddrs* p) const { freeifaddrs(p); }
};

}  // namespace

StatusOr<std::string> InterfaceForAddress(const std::string& address) {
  const std::string host = HostPart(address);
  in_addr v4{};
  in6_addr v6{};
  const bool is_v4 = inet_pton(AF_INET, host.c_str(), &v4) == 1;
  const bool is_v6 = !is_v4 && inet_pton(AF_INET6, host.c_str(), &v6) == 1;
  if (!is_v4 && !is_v6)
    return InvalidArgumentError("data address '" + address +
                                "' is not an IP address (the data plane binds the interface that "
                                "holds it)");
  ifaddrs* raw = nullptr;
  if (getifaddrs(&raw) != 0)
    return InternalError(std::string("getifaddrs: ") + std::strerror(errno));
  std::unique_ptr<ifaddrs, IfaddrsDeleter> list(raw);
  for (const ifaddrs* it = raw; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_name == nullptr) continue;
    if (is_v4 && it->ifa_addr->sa_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(it->ifa_addr);
      if (sin->sin_addr.s_addr == v4.s_addr) return std::string(it->ifa_name);
    } else if (is_v6 && it->ifa_addr->sa_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
      if (std::memcmp(&sin6->sin6_addr, &v6, sizeof(v6)) == 0) return std::string(it->ifa_name);
    }
  }
  return NotFoundError("data address '" + address +
                       "' is not an address of any interface of "
                       "this host");
}

}  // namespace retort::collectives
