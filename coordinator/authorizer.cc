#include "coordinator/authorizer.h"

#include <sys/stat.h>

#include "common/constant_time.h"
#include "common/credential_files.h"
#include "common/file_util.h"
#include "rpc/grpc_status.h"
#include "rpc/metadata.h"

namespace retort::coordinator {
namespace {

int64_t MtimeNs(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

std::string Subject(const grpc::ServerContextBase& ctx) {
  auto auth = ctx.auth_context();
  if (!auth) return "";
  auto values = auth->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME);
  return values.empty() ? "" : std::string(values.front().data(), values.front().size());
}

}  // namespace

const char* RoleName(Role role) { return role == Role::kWorker ? "worker" : "operator"; }

std::optional<Role> RoleFromSubject(const std::string& subject) {
  // RFC 2253 form, as gRPC reports it: "CN=w0,OU=worker,O=retort" (commas inside values are
  // escaped as "\,", which never precedes "OU=").
  std::optional<Role> role;
  size_t pos = 0;
  while (pos < subject.size()) {
    size_t end = pos;
    while (end < subject.size() && !(subject[end] == ',' && (end == 0 || subject[end - 1] != '\\')))
      ++end;
    const std::string part = TrimWhitespace(subject.substr(pos, end - pos));
    if (part.rfind("OU=", 0) == 0) {
      const std::string ou = part.substr(3);
      std::optional<Role> named;
      if (ou == "worker") named = Role::kWorker;
      if (ou == "operator") named = Role::kOperator;
      if (named) {
        if (role && *role != *named) return std::nullopt;  // both: ambiguous
        role = named;
      }
    }
    pos = end + 1;
  }
  return role;
}

Authorizer::Authorizer(AuthOptions options) : options_(std::move(options)) {}

StatusOr<std::unique_ptr<Authorizer>> Authorizer::Create(AuthOptions options) {
  std::unique_ptr<Authorizer> a(new Authorizer(options));
  MutexLock lock(a->mu_);  // not shared yet; taken for the analysis
  for (auto [path, file] : {std::pair{options.worker_token_file, &a->worker_token_},
                            std::pair{options.operator_token_file, &a->operator_token_}}) {
    if (path.empty()) continue;
    RETORT_ASSIGN_OR_RETURN(file->token, ReadTokenFile(path));
    file->path = path;
    file->mtime_ns = MtimeNs(path);
    a->has_tokens_ = true;
  }
  if (!a->worker_token_.token.empty() && a->worker_token_.token == a->operator_token_.token)
    return InvalidArgumentError("the worker and operator token files hold the same token");
  return a;
}

void Authorizer::RefreshLocked(TokenFile* file) {
  if (file->path.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  if (now < file->next_check) return;
  file->next_check = now + std::chrono::seconds(1);
  const int64_t mtime = MtimeNs(file->path);
  if (mtime == file->mtime_ns) return;
  auto token = ReadTokenFile(file->path);
  if (!token.ok()) return;  // keep the last good token while the file is being replaced
  file->token = *token;
  file->mtime_ns = mtime;
}

std::optional<Role> Authorizer::CertificateRole(const grpc::ServerContextBase& ctx) const {
  if (!options_.client_certificates) return std::nullopt;
  // gRPC verified the chain against the CA before the call started.
  return RoleFromSubject(Subject(ctx));
}

std::optional<Role> Authorizer::TokenRole(const grpc::ServerContextBase& ctx) {
  if (!has_tokens_) return std::nullopt;
  const auto& md = ctx.client_metadata();
  auto it = md.find(rpc::kAuthorizationMetadata);
  if (it == md.end()) return std::nullopt;
  const std::string value(it->second.data(), it->second.size());
  const std::string_view bearer = rpc::kBearerPrefix;
  if (value.rfind(bearer, 0) != 0) return std::nullopt;
  const std::string presented = value.substr(bearer.size());
  MutexLock lock(mu_);
  RefreshLocked(&worker_token_);
  RefreshLocked(&operator_token_);
  // Both comparisons always run: the time taken does not say which token matched.
  const bool worker =
      !worker_token_.token.empty() && ConstantTimeEquals(presented, worker_token_.token);
  const bool op =
      !operator_token_.token.empty() && ConstantTimeEquals(presented, operator_token_.token);
  if (worker) return Role::kWorker;
  if (op) return Role::kOperator;
  return std::nullopt;
}

Status Authorizer::Authorize(const grpc::ServerContextBase& ctx, Role role) {
  if (!enforcing()) return Status::Ok();
  std::optional<Role> cert = CertificateRole(ctx);
  std::optional<Role> token = TokenRole(ctx);
  if (cert == role || token == role) return Status::Ok();
  if (!cert && !token)
    return UnauthenticatedError(std::string("this call needs the ") + RoleName(role) +
                                " role: present a client certificate whose subject has OU=" +
                                RoleName(role) + ", or a bearer token");
  return PermissionDeniedError(std::string("the caller is ") + Describe(ctx) + "; only a " +
                               RoleName(role) + " may call this");
}

std::string Authorizer::Describe(const grpc::ServerContextBase& ctx) {
  std::string out;
  if (std::optional<Role> cert = CertificateRole(ctx))
    out = std::string(RoleName(*cert)) + " cert '" + Subject(ctx) + "'";
  else if (options_.client_certificates)
    out = "cert '" + Subject(ctx) + "' without a role";
  if (std::optional<Role> token = TokenRole(ctx))
    out += (out.empty() ? "" : " + ") + std::string(RoleName(*token)) + " token";
  return out.empty() ? "no identity" : out;
}

}  // namespace retort::coordinator
