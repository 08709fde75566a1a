#include "coordinator/listen_policy.h"

#include <arpa/inet.h>

namespace retort::coordinator {

bool IsLoopbackListenAddress(const std::string& listen) {
  if (listen.rfind("unix:", 0) == 0 || listen.rfind("unix-abstract:", 0) == 0) return true;
  std::string host;
  if (!listen.empty() && listen.front() == '[') {
    const size_t close = listen.find(']');
    if (close == std::string::npos) return false;
    host = listen.substr(1, close - 1);
  } else {
    const size_t colon = listen.rfind(':');
    host = colon == std::string::npos ? listen : listen.substr(0, colon);
  }
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
