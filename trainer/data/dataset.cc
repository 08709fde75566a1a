#include "trainer/data/dataset.h"

namespace retort::trainer::data {

Status Dataset::GetOnDevice(int64_t index, uint64_t augmentation_seed, float* out, int64_t* label,
                            DeviceDecoder& decoder, std::vector<float>* host_scratch) const {
  const size_t floats = static_cast<size_t>(shape().numel());
  if (host_scratch->size() < floats) host_scratch->resize(floats);
  RETORT_RETURN_IF_ERROR(Get(index, augmentation_seed, host_scratch->data(), label));
  return decoder.Upload(host_scratch->data(), floats, out).WithContext(SampleName(index));
}

void Dataset::GetChunkOnDevice(const std::vector<DeviceSample>& samples, DeviceDecoder& decoder,
                               std::vector<float>* host_scratch,
                               std::vector<Status>* statuses) const {
  statuses->clear();
  statuses->reserve(samples.size());
  for (const DeviceSample& s : samples) {
    statuses->push_back(
        GetOnDevice(s.index, s.augmentation_seed, s.out, s.label, decoder, host_scratch));
  }
}

}  // namespace retort::trainer::data
