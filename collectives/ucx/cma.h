// Cross-memory attach (CMA): single-copy transfers between processes of one host with
// process_vm_readv, the way MPI's shared-memory transports move large messages. UCX 1.13
// leaves its own CMA transport out of endpoints with peer-failure error handling, so without
// this every large message would cross a shared-memory FIFO in 8 KiB pieces, copied twice.
//
// Thread-safe (no state besides the probe word).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"

namespace retort::collectives::ucx {

// Who this process is, as published in the UCX address record: a peer may read our memory
// when it runs on the same boot of the same host, in the same PID namespace, and the kernel
// lets it (same user, ptrace policy): the last is checked by reading `probe_address`.
struct CmaIdentity {
  std::string boot_id;         // /proc/sys/kernel/random/boot_id; empty: CMA unusable here
  uint64_t pid_namespace = 0;  // inode of /proc/self/ns/pid
  pid_t pid = 0;
  uint64_t probe_address = 0;  // holds kCmaProbeValue for the lifetime of the process
};

constexpr uint64_t kCmaProbeValue = 0x72657472746f6d61ULL;

CmaIdentity LocalCmaIdentity();
// Lets processes of the same user read this process's memory where the Yama security module
// restricts that to ancestors (kernel.yama.ptrace_scope = 1, Ubuntu's default), as MPI
// libraries do for their single-copy transports: a process that may send through CMA calls it.
// Other users stay shut out (the kernel's same-user rule), as does everyone under scope 2 or
// 3, where CMA stays off and messages take the FIFO. Without Yama it changes nothing.
void AllowSameUserPeersToReadMemory();
// True when this process may read `peer`'s memory (same host boot and PID namespace, and a
// read of the peer's probe word returns kCmaProbeValue).
bool CanReadPeerMemory(const CmaIdentity& local, const CmaIdentity& peer);
// Copies `bytes` from `remote_address` in process `pid` to `local`. UNAVAILABLE when the
// process is gone, INTERNAL for other failures (bad address, permission).
// `on_piece`, when given, is called after every piece read with the bytes read so far.
Status CmaRead(pid_t pid, void* local, uint64_t remote_address, size_t bytes,
               const std::function<void(size_t)>* on_piece = nullptr);

}  // namespace retort::collectives::ucx
