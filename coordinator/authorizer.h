// Who may call what on the coordinator. Two roles: workers may call WorkerService, operators
// ControlService. A caller proves its role by
//  - its TLS client certificate (mutual TLS, --tls-ca): the role is the certificate subject's
//    organizational unit, OU=worker or OU=operator (`retortctl certs` writes them so), or
//  - a bearer token (gRPC metadata "authorization: Bearer TOKEN"), compared in constant time
//    with the tokens in --worker-token-file / --operator-token-file (for TLS that terminates
//    elsewhere; a token over plain TCP can be read by anyone on the path).
// With neither configured every caller holds both roles: the insecure path, which the
// coordinator serves on loopback only (listen_policy.h).
//
// Thread-safe: Authorize and Describe may be called from any gRPC thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "common/mutex.h"
#include "common/status.h"

namespace retort::coordinator {

enum class Role { kWorker, kOperator };
const char* RoleName(Role role);

// The role a certificate subject names ("CN=w0,OU=worker,O=retort" -> worker); nullopt when it
// names none or several.
std::optional<Role> RoleFromSubject(const std::string& subject);

struct AuthOptions {
  // Client certificates are requested and verified against a CA (mutual TLS).
  bool client_certificates = false;
  // Files holding one bearer token each (surrounding whitespace ignored); empty: none. They are
  // re-read when they change, so tokens rotate without a restart.
  std::string worker_token_file;
  std::string operator_token_file;
};

class Authorizer {
 public:
  // Fails (INVALID_ARGUMENT, naming the file) when a token file cannot be read or is empty.
  static StatusOr<std::unique_ptr<Authorizer>> Create(AuthOptions options);

  // Whether callers must prove a role (client certificates or tokens configured).
  bool enforcing() const { return options_.client_certificates || has_tokens_; }
  // OK when the caller of `ctx` holds `role`; UNAUTHENTICATED when it proves no role,
  // PERMISSION_DENIED when it proves only the other one.
  Status Authorize(const grpc::ServerContextBase& ctx, Role role);
  // The caller's proven identity, for logs: "worker cert 'CN=w0,OU=worker,O=retort'",
  // "operator token", "no identity".
  std::string Describe(const grpc::ServerContextBase& ctx);

 private:
  // Held in members guarded by mu_.
  struct TokenFile {
    std::string path;
    std::string token;
    int64_t mtime_ns = 0;
    std::chrono::steady_clock::time_point next_check;
  };
  explicit Authorizer(AuthOptions options);
  // Re-reads `file` when it changed (at most once a second); keeps the old token on errors.
  void RefreshLocked(TokenFile* file) RETORT_REQUIRES(mu_);
  std::optional<Role> CertificateRole(const grpc::ServerContextBase& ctx) const;
  std::optional<Role> TokenRole(const grpc::ServerContextBase& ctx) RETORT_EXCLUDES(mu_);

  const AuthOptions options_;
  bool has_tokens_ = false;
  Mutex mu_;
  TokenFile worker_token_ RETORT_GUARDED_BY(mu_);
  TokenFile operator_token_ RETORT_GUARDED_BY(mu_);
};

}  // namespace retort::coordinator
