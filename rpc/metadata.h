// gRPC metadata keys that the coordinator's services and their clients both use (lower case, as
// gRPC requires).
#pragma once

namespace retort::rpc {

// A bearer token: "authorization: Bearer TOKEN" (client_channel.h AddTokenMetadata; checked by
// coordinator/authorizer.h).
inline constexpr char kAuthorizationMetadata[] = "authorization";
inline constexpr char kBearerPrefix[] = "Bearer ";

// The member secret Join handed out, carried by every later call made for that member
// (coordinator/member_secret.h).
inline constexpr char kMemberSecretMetadata[] = "retort-member-secret";

}  // namespace retort::rpc
