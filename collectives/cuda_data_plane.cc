#include "collectives/cuda_data_plane.h"

#if RETORT_COLLECTIVES_HAVE_NCCL
#include "collectives/nccl/cuda_copier.h"
#include "collectives/nccl/cuda_events.h"
#include "collectives/nccl/nccl_communicator.h"
#endif

namespace retort::collectives {

#if RETORT_COLLECTIVES_HAVE_NCCL

bool BuildHasCudaDataPlane() { return true; }

StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    BootstrapStore* store, int rank, int size, uint64_t generation,
    const CudaCommunicatorOptions& options) {
  nccl::NcclCommunicatorOptions o;
  static_cast<CudaCommunicatorOptions&>(o) = options;
  RETORT_ASSIGN_OR_RETURN(auto comm,
                          nccl::NcclCommunicator::Create(store, rank, size, generation, o));
  return std::unique_ptr<Communicator>(std::move(comm));
}

StatusOr<std::unique_ptr<DeviceCopier>> CreateCudaCopier(int device) {
  RETORT_ASSIGN_OR_RETURN(auto copier, nccl::CudaCopier::Create(device, nullptr));
  return std::unique_ptr<DeviceCopier>(std::move(copier));
}

StatusOr<std::unique_ptr<DeviceScratch>> CreateCudaScratch(int device) {
  RETORT_ASSIGN_OR_RETURN(auto scratch, nccl::CudaScratch::Create(device));
  return std::unique_ptr<DeviceScratch>(std::move(scratch));
}

StatusOr<std::unique_ptr<DeviceEvents>> CreateCudaStreamEvents(int device) {
  if (nccl::CudaDeviceCount() == 0)
    return FailedPreconditionError("cuda stream events: no CUDA device visible");
  return std::unique_ptr<DeviceEvents>(std::make_unique<nccl::CudaStreamEvents>(device, nullptr));
}

#else

namespace {
Status NoCuda(const char* what) {
  return FailedPreconditionError(std::string(what) +
                                 ": this build has no CUDA data plane (built without the CUDA "
                                 "toolkit or NCCL; see README, Building)");
}
}  // namespace

bool BuildHasCudaDataPlane() { return false; }

StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(BootstrapStore*, int, int, uint64_t,
                                                               const CudaCommunicatorOptions&) {
  return NoCuda("nccl communicator");
}

StatusOr<std::unique_ptr<DeviceCopier>> CreateCudaCopier(int) { return NoCuda("cuda copier"); }

StatusOr<std::unique_ptr<DeviceScratch>> CreateCudaScratch(int) { return NoCuda("cuda scratch"); }

StatusOr<std::unique_ptr<DeviceEvents>> CreateCudaStreamEvents(int) {
  return NoCuda("cuda stream events");
}

#endif

}  // namespace retort::collectives
