// RAII owners of UCX handles. Move-only; destruction releases the handle. Endpoints are
// closed by UcxTransport, which must progress the worker while they close.
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <memory>
#include <string>

#include "collectives/ucx/cma_chooser.h"
#include "common/status.h"

namespace retort::collectives::ucx {

struct UcpConfigDeleter {
  void operator()(ucp_config_t* c) const { ucp_config_release(c); }
};
struct UcpContextDeleter {
  void operator()(ucp_context* c) const { ucp_cleanup(c); }
};
struct UcpWorkerDeleter {
  void operator()(ucp_worker* w) const { ucp_worker_destroy(w); }
};

using UcpConfig = std::unique_ptr<ucp_config_t, UcpConfigDeleter>;
using UcpContext = std::unique_ptr<ucp_context, UcpContextDeleter>;
using UcpWorker = std::unique_ptr<ucp_worker, UcpWorkerDeleter>;

// Tuning that reaches UCX through its own configuration (never through getenv here).
struct UcxContextOptions {
  // UCX_TLS-style transport list; empty: UCX's choice (or the UCX_TLS env). The default is
  // shared memory + CMA on one host and TCP between hosts (UCX's own choice measured several
  // times slower here); on InfiniBand clusters add "rc,ud" (or "dc").
  // Shared memory is System V, not posix: posix segments are attached through
  // /proc/<pid>/fd/<n> links, and every generation re-creates the UCX worker, so a peer's
  // endpoint from the previous generation can attach a descriptor number the owner has since
  // reused for another segment (a kill -9 test crashed a surviving neighbour in UCX 1.13's posix
  // attach, mm_posix.c "length > 0"). A System V id is not reused that way, and a stale attach
  // fails cleanly. Same bandwidth (bench/collectives/RESULTS.md).
  std::string transports = "sysv,cma,tcp,self";
  // UCX_NET_DEVICES-style list of the network interfaces the network transports (tcp, rc, ...)
  // bind and listen on, e.g. "lo" or "eth0"; empty: every interface. Workers set it to the
  // interface of their --data-address (net_interface.h).
  std::string net_devices;
  // Let the shared-memory transports (posix, sysv) join peer-failure error handling; off,
  // UCX reaches local peers over TCP loopback only (several times slower).
  bool shared_memory_error_handling = true;
  // How often UCX checks that peers are alive; short so a dead peer becomes an error fast.
  std::string keepalive_interval = "1s";
  size_t estimated_num_eps = 0;
  // Waits spin on ucp_worker_progress and yield the CPU only after this long without
  // progress (a yield on a busy host can cost a scheduler time slice). Negative: never yield.
  std::chrono::microseconds spin_before_yield{20};
  // After this long without progress, waits sleep briefly (sleep_quantum) between polls
  // instead of yielding: on an oversubscribed host the peer then gets the CPU time this rank
  // would burn. Negative: never sleep.
  std::chrono::microseconds spin_before_sleep{200};
  std::chrono::microseconds sleep_quantum{50};
  // Skip the spin and yield from the start of a wait while this thread's yields show other
  // waiters sharing its CPU (more ranks than CPUs; collectives/cpu_sharing.h).
  bool yield_early_when_cpu_shared = true;
  // Messages of at least this many bytes to a peer on the same host are read by the receiver
  // straight from the sender's memory (cma.h: one copy instead of two through the
  // shared-memory FIFO). Both ranks must allow it; the larger threshold of the two applies.
  // 0: never.
  size_t cma_min_bytes = size_t{64} << 10;
  // Which messages at or above the threshold a rank sends through CMA (cma_chooser.h):
  // measured per operation (the default), always, or never. The receiver takes either.
  CmaPolicy cma_policy = CmaPolicy::kAdaptive;
  // UCX's newer protocol selection (UCX_PROTO_ENABLE). Off: in UCX 1.13 it aborts the whole
  // process when a peer dies at the wrong moment (a send posted to a peer that just failed, or
  // large sends still queued to it, end in ucp_proto_request_abort on a protocol without an
  // abort: "stubs.c:102 Assertion `0' failed"; the multi-host whole-host kill test lost a
  // surviving worker that way in 3 of 14 runs, and with large messages through the
  // shared-memory FIFO every kill -9 test did). The environment's UCX_PROTO_ENABLE wins.
  bool new_protocols = false;
  // Send every message eagerly (UCX_RNDV_THRESH=inf). With the older protocols, UCX 1.13's
  // rendezvous over TCP serialises the two directions of a connection: a pairwise exchange
  // (a 2-rank ring step, the hierarchical inter-node level with 2 nodes) took as long as
  // sending both halves one after the other, 137 ms instead of 71 ms for 16 MiB over a
  // 1 Gbit/s link (bench/multihost/RESULTS.md); eager sends do not. Large messages between
  // processes of one host go through CMA regardless. The environment's UCX_RNDV_THRESH wins.
  bool eager_only = true;
};

// Whether UCX needs its memory hooks (UCX_MEM_EVENTS: it intercepts mmap, munmap, madvise and
// CUDA's allocations process-wide) for `transports` (UcxContextOptions::transports): only a
// registration cache of user memory does, i.e. RDMA transports (rc, ud, dc, ib, ...) and the
// CUDA-aware ones (cuda_copy, cuda_ipc, gdr_copy, rocm). Shared memory, CMA and TCP register
// nothing, and device buffers that cross nodes through the pinned staging pool (staged.h) stay
// allocated while UCX uses them. Empty or "all" (UCX's choice): true.
bool TransportsNeedMemoryEvents(const std::string& transports);

// Creates the UCP context. Where TransportsNeedMemoryEvents is false and the environment does
// not set UCX_MEM_EVENTS, UCX's memory hooks are turned off first (process-wide, before they
// are installed: the hooks cost every allocation of LibTorch's and CUDA's allocators a call,
// and under ThreadSanitizer crashed exiting threads).
StatusOr<UcpContext> CreateUcpContext(const UcxContextOptions& options);
StatusOr<UcpWorker> CreateUcpWorker(ucp_context_h context);
// The worker's address, copied into a string.
StatusOr<std::string> WorkerAddress(ucp_worker_h worker);

}  // namespace retort::collectives::ucx
