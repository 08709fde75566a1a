// Which network interface of this host owns an address: the data plane binds only the interface
// of the worker's --data-address, never every interface. Std and POSIX only (getifaddrs).
#pragma once

#include <string>

#include "common/status.h"

namespace retort::collectives {

// The name of the interface that holds `address` ("127.0.0.1", "10.0.0.2:41000", "::1",
// "[fd00::2]:41000"; the port, if any, is ignored): "lo", "eth0". INVALID_ARGUMENT when
// `address` is not an IP literal, NOT_FOUND (naming the address) when no interface of this host
// holds it. Thread-safe.
StatusOr<std::string> InterfaceForAddress(const std::string& address);

}  // namespace retort::collectives
