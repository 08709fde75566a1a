// Retrying a call that may fail only for a while: a coordinator that is restarting, a
// connection being re-established, a key another process has not written yet. Every retry
// loop in retort goes through RetryUntil, so they agree on what is worth repeating.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>
#include <type_traits>

#include "common/backoff.h"
#include "common/deadline.h"
#include "common/status.h"

namespace retort {

// The one set of codes worth repeating the same call for:
//  - UNAVAILABLE: the service could not be reached, is restarting, or said it cannot serve
//    now (and a value polled for is not there yet: the store adapters report that as
//    UNAVAILABLE too);
//  - DEADLINE_EXCEEDED: this attempt's own deadline passed without an answer;
//  - CANCELLED: the service cancelled the call (a gRPC server shutting down does that).
// Every other code is an answer, returned at once: e.g. ABORTED (stale generation),
// NOT_FOUND (unknown member: join again), INVALID_ARGUMENT, FAILED_PRECONDITION,
// RESOURCE_EXHAUSTED (a limit; only a caller that knows the limit is temporary, such as a
// full job admitting members later, adds it to its own predicate).
bool IsRetryable(StatusCode code);

// Waits `wait` between attempts; returns false to give up (the caller is shutting down).
using RetrySleep = std::function<bool(std::chrono::milliseconds wait)>;
// The default RetrySleep: std::this_thread::sleep_for, never gives up.
bool SleepFor(std::chrono::milliseconds wait);

namespace retry_internal {
inline const Status& StatusOf(const Status& s) { return s; }
template <typename T>
const Status& StatusOf(const StatusOr<T>& s) {
  return s.status();
}
}  // namespace retry_internal

// Calls `attempt` (returning Status or StatusOr<T>) until it succeeds, fails with a code
// `retryable` refuses, `deadline` has passed, or `sleep` gives up; returns the last result.
// Between attempts it sleeps backoff.Next(), cut to what is left of the deadline. At least
// one attempt is made, even with an expired deadline. A caller that wants a different error
// when time ran out checks `retryable(result.code())` on the result: only then did it give
// up on time (or on `sleep`).
// Threading: runs on the calling thread; `attempt` and `sleep` are called from it only.
template <typename Attempt>
auto RetryUntil(Deadline deadline, Backoff& backoff,
                const std::function<bool(StatusCode)>& retryable, Attempt&& attempt,
                const RetrySleep& sleep = SleepFor) -> std::invoke_result_t<Attempt&> {
  for (;;) {
    auto result = attempt();
    const Status& status = retry_internal::StatusOf(result);
    if (status.ok() || !retryable(status.code()) || deadline.Expired()) return result;
    std::chrono::milliseconds wait = backoff.Next();
    if (!deadline.IsNever()) {
      wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(deadline.Remaining()));
    }
    if (!sleep(wait)) return result;
  }
}

}  // namespace retort
