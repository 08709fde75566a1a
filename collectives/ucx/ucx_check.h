// UCX_CHECK: wraps a ucs_status_t-returning UCX call; on failure returns a Status naming what
// was being done, file:line and UCX's own message.
#pragma once

#include <ucs/type/status.h>

#include <string>

#include "common/status.h"

namespace retort::collectives::ucx {

// Peer and transport failures map to UNAVAILABLE, timeouts to DEADLINE_EXCEEDED, the rest to
// INTERNAL.
Status UcxError(ucs_status_t status, const std::string& what, const char* file, int line);

}  // namespace retort::collectives::ucx

#define UCX_CHECK(expr, what)                                                                   \
  do {                                                                                          \
    ucs_status_t ucx_check_status_ = (expr);                                                    \
    if (ucx_check_status_ != UCS_OK) {                                                          \
      return ::retort::collectives::ucx::UcxError(ucx_check_status_, what, __FILE__, __LINE__); \
    }                                                                                           \
  } while (0)
