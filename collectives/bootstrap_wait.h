// Waits of a communicator's start-up that give up as soon as the communicator is obsolete.
// Bootstrap waits for peers (their store keys, a non-blocking NCCL initialization); besides its
// deadline each wait polls a cancellation check (in a worker: "a newer generation was
// published"), so that a stale start-up ends at once instead of at its deadline. Backends wrap
// their own calls (store->Get, ncclCommGetAsyncError) in these loops; the loops know nothing
// of UCX, NCCL or CUDA, so they are tested on the CPU against fakes.
//
// Threading: every function blocks the calling thread; `cancelled` and the polled function run
// on that thread, between sleeps of at most the poll interval.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "collectives/bootstrap_store.h"
#include "common/deadline.h"
#include "common/status.h"

namespace retort::collectives {

// How often a bootstrap wait polls its cancellation check.
inline constexpr std::chrono::milliseconds kBootstrapPollInterval{20};

// store->Get(key) until `deadline`; with a cancellation check (may be empty: never cancelled)
// the wait runs in slices of `poll` and returns `cancelled_error()` as soon as `cancelled()`
// holds (checked before every slice). Other errors of the store are returned as they are.
StatusOr<std::string> GetUnlessCancelled(BootstrapStore* store, const std::string& key,
                                         Deadline deadline, const std::function<bool()>& cancelled,
                                         const std::function<Status()>& cancelled_error,
                                         std::chrono::milliseconds poll = kBootstrapPollInterval);

// Calls `poll` until it returns true (done: OK), an error (returned), `deadline` (DEADLINE_EXCEEDED
// "WHAT: timed out") or `cancelled()` (may be empty; `cancelled_error()` is returned), sleeping
// `interval` between calls. `poll` is called at least once.
Status PollUntilDone(const std::function<StatusOr<bool>()>& poll, Deadline deadline,
                     const std::function<bool()>& cancelled,
                     const std::function<Status()>& cancelled_error, const std::string& what,
                     std::chrono::microseconds interval = std::chrono::microseconds(100));

}  // namespace retort::collectives
