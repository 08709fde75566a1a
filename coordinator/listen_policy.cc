#include "coordinator/listen_policy.h"

#include <arpa/inet.h>

#include "common/host_port.h"

namespace retort::coordinator {

bool IsLoopbackListenAddress(const std::string& listen) {
  if (listen.rfind("unix:", 0) == 0 || listen.rfind("unix-abstract:", 0) == 0) return true;
  const std::string host = SplitHostPort(listen).host;
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1)
    return (ntohl(v4.s_addr) >> 24) == 127;  // 127.0.0.0/8
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

Status CheckListenPolicy(const std::string& listen, bool tls, bool insecure_listen) {
  if (tls || insecure_listen || IsLoopbackListenAddress(listen)) return Status::Ok();
  return InvalidArgumentError(
      "--listen=" + listen +
      " is reachable from other hosts, and without --tls-cert/--tls-key anyone who can reach it "
      "could join, steer or stop the job; give TLS, listen on 127.0.0.1, or say "
      "--insecure-listen to serve it unauthenticated anyway");
}

}  // namespace retort::coordinator
