// How a client (worker, retortctl, retort-run) reaches the coordinator: a channel with
// keepalive and fast reconnects, over plain TCP or TLS that
// verifies the coordinator's certificate against a CA and, for mutual TLS, presents a client
// certificate. Certificates are re-read when their files change (gRPC's
// FileWatcherCertificateProvider), so they rotate without a restart; a bearer token, if any, is
// re-read from its file for every call (authorizer.h on the coordinator's side).
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace retort {
class ArgParser;
}

namespace retort::rpc {

struct ClientSecurity {
  // PEM files. tls_ca alone: TLS that verifies the coordinator. With tls_cert and tls_key as
  // well: mutual TLS. All empty: plain TCP.
  std::string tls_cert, tls_key, tls_ca;
  // A file holding a bearer token sent with every call; empty: none.
  std::string token_file;
  // How often certificate files are checked for changes.
  int64_t refresh_s = 5;

  bool tls() const { return !tls_ca.empty(); }
};

// INVALID_ARGUMENT naming the flag when the combination is incomplete (a key without its
// certificate, a certificate without a CA to check the coordinator with) or a file is
// unreadable.
Status ValidateClientSecurity(const ClientSecurity& security);

// Registers a client's security flags on `args`, bound to `security`: --tls-ca, --tls-cert,
// --tls-key, --tls-refresh-s and --token-file. `role` (worker or operator) is the one the
// certificate's subject OU and the token name, in the help.
void AddClientSecurityFlags(ArgParser& args, ClientSecurity* security, const std::string& role);

// Channel credentials for `security` (insecure when it has no TLS).
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const ClientSecurity& security);

// A channel to the coordinator at `address` (host:port) with keepalive, so that a dead
// coordinator is noticed in seconds, and fast reconnects after a coordinator restart.
std::shared_ptr<grpc::Channel> MakeCoordinatorChannel(const std::string& address,
                                                      const ClientSecurity& security = {});

// Adds "authorization: Bearer TOKEN" (metadata.h) to `ctx` when `security` names a token file
// (read now). A token file that cannot be read adds nothing: the call is then refused as
// unauthenticated.
void AddTokenMetadata(const ClientSecurity& security, grpc::ClientContext* ctx);

}  // namespace retort::rpc
