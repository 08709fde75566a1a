// Where the coordinator may listen without transport security: loopback only, unless the
// operator says --insecure-listen (and then it warns). Std only.
#pragma once

#include <string>

#include "common/status.h"

namespace retort::coordinator {

// True when a gRPC listen address ("host:port", "[v6]:port", "unix:PATH") can only be reached
// from this host: 127.0.0.0/8, ::1, "localhost" or a Unix socket. "0.0.0.0", "[::]", "*",
// ":7070" and every other host are not.
bool IsLoopbackListenAddress(const std::string& listen);

// OK when serving on `listen` is allowed: with TLS anywhere; without it only on loopback unless
// `insecure_listen`. The error (INVALID_ARGUMENT) names the address and the flags that allow it.
Status CheckListenPolicy(const std::string& listen, bool tls, bool insecure_listen);

}  // namespace retort::coordinator
