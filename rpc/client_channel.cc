#include "rpc/client_channel.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "common/args.h"
#include "common/credential_files.h"
#include "rpc/metadata.h"

namespace retort::rpc {

void AddClientSecurityFlags(ArgParser& args, ClientSecurity* security, const std::string& role) {
  args.AddString("tls-ca", &security->tls_ca,
                 "PEM CA that signed the coordinator's certificate: connect over TLS");
  args.AddString(
      "tls-cert", &security->tls_cert,
      "PEM client certificate (subject OU=" + role + ") for mutual TLS; re-read when it changes");
  args.AddString("tls-key", &security->tls_key, "PEM private key of --tls-cert");
  args.AddInt("tls-refresh-s", &security->refresh_s,
              "how often the certificate, key and CA files are checked for changes");
  args.AddString("token-file", &security->token_file,
                 "file holding the " + role + " role's bearer token, sent with every call");
}

Status ValidateClientSecurity(const ClientSecurity& s) {
  if (s.tls_cert.empty() != s.tls_key.empty())
    return InvalidArgumentError("--tls-cert and --tls-key go together");
  if (!s.tls_cert.empty() && s.tls_ca.empty())
    return InvalidArgumentError(
        "--tls-cert needs --tls-ca: the CA that signed the coordinator's certificate");
  if (s.refresh_s <= 0) return InvalidArgumentError("--tls-refresh-s must be > 0");
  RETORT_RETURN_IF_ERROR(CheckReadableFlagFile(s.tls_cert, "tls-cert"));
  RETORT_RETURN_IF_ERROR(CheckReadableFlagFile(s.tls_key, "tls-key"));
  RETORT_RETURN_IF_ERROR(CheckReadableFlagFile(s.tls_ca, "tls-ca"));
  if (!s.token_file.empty()) {
    auto token = ReadTokenFile(s.token_file);
    if (!token.ok()) return InvalidArgumentError("--token-file: " + token.status().message());
  }
  return Status::Ok();
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const ClientSecurity& s) {
  if (!s.tls()) return grpc::InsecureChannelCredentials();
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      s.tls_key, s.tls_cert, s.tls_ca, static_cast<unsigned int>(s.refresh_s));
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
  options.watch_root_certs();
  if (!s.tls_cert.empty()) options.watch_identity_key_cert_pairs();
  return grpc::experimental::TlsCredentials(options);
}

std::shared_ptr<grpc::Channel> MakeCoordinatorChannel(const std::string& address,
                                                      const ClientSecurity& security) {
  grpc::ChannelArguments args;
  // A ping sent just before a short link blip is answered once TCP retransmits, 1-3 s after
  // the link is back: a 2 s timeout closed such connections after the blip had healed, which
  // the coordinator took for a dead worker (its stream closed). 5 s rides out blips of ~2 s;
  // a dead coordinator host is still noticed within 7 s (a dead process at once: RST).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Reconnect quickly after a coordinator restart: a refused connection is tried again after
  // 100 ms, growing to 1 s.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // gRPC's name for the least time one connection attempt (TCP, TLS handshake, HTTP/2 SETTINGS)
  // gets before it is abandoned; the attempt's deadline is the later of this and the next
  // backoff. At 100 ms, attempts got at most ~1 s: a worker starting on a loaded node (its own
  // start-up work competing with gRPC's threads) timed out every mutual-TLS handshake and never
  // joined ("connection attempt timed out before receiving SETTINGS frame", CI, Nov 29).
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 3000);
  return grpc::CreateCustomChannel(address, MakeChannelCredentials(security), args);
}

void AddTokenMetadata(const ClientSecurity& s, grpc::ClientContext* ctx) {
  if (s.token_file.empty()) return;
  auto token = ReadTokenFile(s.token_file);
  if (token.ok()) ctx->AddMetadata(kAuthorizationMetadata, kBearerPrefix + *token);
}

}  // namespace retort::rpc
