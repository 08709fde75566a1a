// Conversions between retort::Status and grpc::Status (codes are numerically identical).
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace retort {

// The control plane's refusals of callers (authorizer.h, member secrets). UNAUTHENTICATED has
// no StatusCode name of its own: the codes mirror gRPC's numerically, and 16 is gRPC's.
inline Status UnauthenticatedError(std::string message) {
  return Status(static_cast<StatusCode>(grpc::StatusCode::UNAUTHENTICATED), std::move(message));
}
inline Status PermissionDeniedError(std::string message) {
  return Status(StatusCode::kPermissionDenied, std::move(message));
}

inline grpc::Status ToGrpcStatus(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), s.message());
}

inline Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return Status::Ok();
  return Status(static_cast<StatusCode>(s.error_code()), s.error_message());
}

}  // namespace retort
