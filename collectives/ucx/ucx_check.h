// UCX_CHECK: wraps a ucs_status_t-returning UCX call; on failure returns a Status naming what
// was being done, file:line and UCX's own message.
#pragma once

#include <ucs/type/status.h>

#include <string>

#include "collectives/native_check.h"
#include "common/status.h"

namespace retort::collectives::ucx {

// Peer and transport failures map to UNAVAILABLE, timeouts to DEADLINE_EXCEEDED, the rest to
// INTERNAL.
Status UcxError(ucs_status_t status, const std::string& what, const char* file, int line);
inline bool UcxFailed(ucs_status_t status) { return status != UCS_OK; }

}  // namespace retort::collectives::ucx

#define UCX_CHECK(expr, what)                                                    \
  RETORT_NATIVE_CHECK(ucs_status_t, expr, ::retort::collectives::ucx::UcxFailed, \
                      ::retort::collectives::ucx::UcxError, what)
