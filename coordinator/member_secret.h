// Per-member secrets: Join hands one out, every later call for that member carries it in the
// gRPC metadata rpc::kMemberSecretMetadata (rpc/metadata.h), so one worker cannot heartbeat, leave,
// report failures or put keys for another. Std only.
#pragma once

#include <string>

namespace retort::coordinator {

// 32 random bytes from the OS (std::random_device: getrandom / /dev/urandom), as 64 hex digits.
std::string NewMemberSecret();

}  // namespace retort::coordinator
