// Member secrets (member_secret.h; see coordinator.h for the threading contract).
#include "common/constant_time.h"
#include "coordinator/coordinator.h"
#include "rpc/grpc_status.h"

namespace retort::coordinator {

Status Coordinator::AuthenticateMember(const std::string& member_id,
                                       const std::string& secret) const {
  if (member_id.empty()) return Status::Ok();
  MutexLock lock(mu_);
  auto it = members_.find(member_id);
  if (it == members_.end()) return Status::Ok();  // the call answers NOT_FOUND itself
  if (secret.empty())
    return UnauthenticatedError("a call for member " + member_id +
                                " must carry its member secret (from Join)");
  if (ConstantTimeEquals(secret, it->second.secret)) return Status::Ok();
  for (const auto& [id, m] : members_)
    if (ConstantTimeEquals(secret, m.secret))
      return PermissionDeniedError("the caller is member " + id + ", not " + member_id);
  return UnauthenticatedError("wrong member secret for " + member_id +
                              " (a member's secret dies with the member)");
}

}  // namespace retort::coordinator
