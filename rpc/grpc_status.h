// Conversions between retort::Status and grpc::Status (codes are numerically identical).
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace retort {

static_assert(static_cast<int>(StatusCode::kUnauthenticated) ==
                      static_cast<int>(grpc::StatusCode::UNAUTHENTICATED) &&
                  static_cast<int>(StatusCode::kDataLoss) ==
                      static_cast<int>(grpc::StatusCode::DATA_LOSS),
              "StatusCode mirrors gRPC's numbering");

inline grpc::Status ToGrpcStatus(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), s.message());
}

inline Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return Status::Ok();
  return Status(static_cast<StatusCode>(s.error_code()), s.error_message());
}

}  // namespace retort
