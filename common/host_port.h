// Splitting a network address into host and port: the one reading of "host:port" for listen
// flags and addresses. (collectives/net_interface.cc's HostPart reads it the same way and can
// use this.) Std only; pure functions, thread-safe.
#pragma once

#include <string>

namespace retort {

struct HostPort {
  std::string host;  // without IPv6 brackets
  std::string port;  // "" when the address has none
};

// "host", "host:port", "[v6]", "[v6]:port" -> host and port. A bare IPv6 literal (several
// colons, no brackets) is taken whole as the host. Never fails: checking the parts (an IP
// address, a port in range) is the caller's.
inline HostPort SplitHostPort(const std::string& address) {
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == std::string::npos) return {address, ""};
    const bool has_port = close + 1 < address.size() && address[close + 1] == ':';
    return {address.substr(1, close - 1), has_port ? address.substr(close + 2) : ""};
  }
  const size_t colon = address.find(':');
  if (colon == std::string::npos || address.find(':', colon + 1) != std::string::npos)
    return {address, ""};
  return {address.substr(0, colon), address.substr(colon + 1)};
}

}  // namespace retort
