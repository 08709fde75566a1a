#include "collectives/ucx/ucx_handles.h"

#include <ucm/api/ucm.h>

#include <cstdlib>
#include <sstream>

#include "collectives/types.h"
#include "collectives/ucx/ucx_check.h"
#include "common/logging.h"

namespace retort::collectives::ucx {

Status UcxError(ucs_status_t status, const std::string& what, const char* file, int line) {
  const std::string message = NativeErrorMessage(what, ucs_status_string(status), file, line);
  switch (status) {
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_IO_ERROR:
    // A shared-memory send to a peer that exited or died: its FIFO segments are gone (seen
    // when a large eager send to it is posted after the peer's process ended).
    case UCS_ERR_SHMEM_SEGMENT:
      return UnavailableError(message);
    case UCS_ERR_TIMED_OUT:
      return DeadlineExceededError(message);
    case UCS_ERR_CANCELED:
      return AbortedError(message);
    case UCS_ERR_MESSAGE_TRUNCATED:
      return InvalidArgumentError(message);
    default:
      return InternalError(message);
  }
}

bool TransportsNeedMemoryEvents(const std::string& transports) {
  if (transports.empty()) return true;
  std::stringstream list(transports);
  std::string t;
  while (std::getline(list, t, ',')) {
    if (!t.empty() && t[0] == '^') return true;  // "all but ...": UCX's choice of the rest
    for (const char* prefix : {"all", "rc", "ud", "dc", "ib", "mlx5", "cuda", "gdr", "rocm"})
      if (t.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

StatusOr<UcpContext> CreateUcpContext(const UcxContextOptions& options) {
  if (std::getenv("UCX_MEM_EVENTS") == nullptr && !TransportsNeedMemoryEvents(options.transports)) {
    // Before ucp_init installs any hook; the rest of UCM's settings stay as UCX read them.
    ucm_global_config_t ucm = ucm_global_opts;
    if (ucm.enable_events) {
      ucm.enable_events = 0;
      ucm_set_global_opts(&ucm);
    }
  }
  ucp_config_t* raw_config = nullptr;
  UCX_CHECK(ucp_config_read(nullptr, nullptr, &raw_config), "reading the UCX configuration");
  UcpConfig config(raw_config);
  if (!options.transports.empty()) {
    UCX_CHECK(ucp_config_modify(config.get(), "TLS", options.transports.c_str()),
              "setting UCX transports to '" + options.transports + "'");
  }
  if (!options.net_devices.empty()) {
    UCX_CHECK(ucp_config_modify(config.get(), "NET_DEVICES", options.net_devices.c_str()),
              "setting UCX network devices to '" + options.net_devices + "'");
  }
  if (options.shared_memory_error_handling) {
    // Shared-memory transports only take part in peer-failure error handling when asked;
    // without this every local peer would be reached over TCP loopback.
    for (const char* key : {"MM_ERROR_HANDLING"}) {
      UCX_CHECK(ucp_config_modify(config.get(), key, "y"), std::string("enabling ") + key);
    }
  }
  if (!options.keepalive_interval.empty()) {
    ucs_status_t s =
        ucp_config_modify(config.get(), "KEEPALIVE_INTERVAL", options.keepalive_interval.c_str());
    if (s != UCS_OK) {
      LOG_WARN("ucx") << "could not set KEEPALIVE_INTERVAL: " << ucs_status_string(s);
    }
  }
  if (std::getenv("UCX_PROTO_ENABLE") == nullptr) {
    UCX_CHECK(ucp_config_modify(config.get(), "PROTO_ENABLE", options.new_protocols ? "y" : "n"),
              "setting UCX's protocol selection (PROTO_ENABLE)");
  }
  if (options.eager_only && std::getenv("UCX_RNDV_THRESH") == nullptr) {
    UCX_CHECK(ucp_config_modify(config.get(), "RNDV_THRESH", "inf"),
              "turning UCX's rendezvous off (RNDV_THRESH=inf)");
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_AM;  // AM: acknowledgements of CMA reads
  params.mt_workers_shared = 0;
  if (options.estimated_num_eps > 0) {
    params.field_mask |= UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    params.estimated_num_eps = options.estimated_num_eps;
  }
  ucp_context_h context = nullptr;
  UCX_CHECK(ucp_init(&params, config.get(), &context), "initializing the UCP context");
  return UcpContext(context);
}

StatusOr<UcpWorker> CreateUcpWorker(ucp_context_h context) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucp_worker_h worker = nullptr;
  UCX_CHECK(ucp_worker_create(context, &params, &worker), "creating the UCP worker");
  return UcpWorker(worker);
}

StatusOr<std::string> WorkerAddress(ucp_worker_h worker) {
  ucp_address_t* address = nullptr;
  size_t length = 0;
  UCX_CHECK(ucp_worker_get_address(worker, &address, &length), "getting the worker address");
  std::string copy(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(worker, address);
  return copy;
}

}  // namespace retort::collectives::ucx
