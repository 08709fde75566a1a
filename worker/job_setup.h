// Turns the job spec (retort.v1.JobSpec) into the trainer's pieces: model specs, datasets,
// loader and step options. Pure construction; no threads, no I/O beyond opening datasets.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "models/model_spec.h"
#include "retort/v1/retort.pb.h"
#include "trainer/data/batch.h"
#include "trainer/data/batch_mixing.h"
#include "trainer/data/color_jitter.h"
#include "trainer/data/dataset.h"
#include "trainer/data/loader.h"
#include "trainer/data/random_erasing.h"
#include "trainer/kd_step.h"
#include "trainer/models/model.h"

namespace retort::worker {

// True when the job distils from a teacher; false for plain supervised training of the student
// (no teacher in the spec), which is how a teacher itself is trained.
bool HasTeacher(const v1::JobSpec& job);
// The job spec's model as the trainer's plain struct (field for field; an exported package is
// not one: LoadExportedTeacher in exported_teacher.h loads it).
models::ModelSpec ToModelSpec(const v1::ModelSpec& model);
// Model FLOPs of one training sample of the job (trainer/model_flops.h): the student's forward
// and backward plus the teacher's forward; 0 when a model is not a built-in ViT preset.
double ModelFlopsPerSample(const v1::JobSpec& job);
// trainer::BuildModel of ToModelSpec(model): builds the model and loads weights_path when set.
// Built-ins are initialised from `seed`.
StatusOr<std::unique_ptr<trainer::Model>> BuildModel(const v1::ModelSpec& model, uint64_t seed);
// Opens the train (augmented as the spec says) or test split of the job's dataset.
StatusOr<std::shared_ptr<const trainer::data::Dataset>> OpenDataset(const v1::JobSpec& job,
                                                                    bool train);
// The loader of a worker that trains on `device` ("cpu" or "cuda:N"). `decode_device`:
// ResolveDecodeDevice's answer (-1: decode into host memory). On a CUDA device the host batches
// (and the labels of device-decoded ones) are pinned, so the step's non_blocking copy to the GPU
// is asynchronous; on the CPU they are not (pinning needs CUDA and would gain nothing). Its
// decode threads select the worker's CUDA device (LoaderOptions::cuda_device).
// Batches stay float32, normalised on the host: carrying uint8 to the GPU and normalising there
// (4x fewer bytes) would not be exact for image folders, whose samples are normalised before any
// rounding to a grey level (tests/trainer/data_uint8_carry_test.cc says by how much).
trainer::data::LoaderOptions MakeLoaderOptions(const v1::JobSpec& job, bool train,
                                               const std::string& device, int decode_device);
// Where dataset.decode puts the training loader's decoding on a worker that trains on `device`
// ("cpu" or "cuda:N"): the CUDA device index, or -1 for the CPU. Only image folders decode on
// the GPU (other datasets: -1). "auto" picks the GPU on a CUDA worker when the build has
// nvJPEG; "gpu" on a CPU worker, or without nvJPEG, is FAILED_PRECONDITION saying which.
StatusOr<int> ResolveDecodeDevice(const v1::JobSpec& job, const std::string& device);
trainer::KdStepOptions MakeKdStepOptions(const v1::JobSpec& job, int64_t total_steps);
// The spec's `mixing` (off when neither alpha is set); the training loader then splits steps
// into pairs (MakeLoaderOptions' split_unit 2).
trainer::data::MixingOptions MakeMixingOptions(const v1::JobSpec& job);
// The spec's dataset.augmentation.color_jitter (strength 0: off) with the dataset's
// normalisation (Fashion-MNIST's, or ImageNet's for image folders).
trainer::data::ColorJitterOptions MakeColorJitterOptions(const v1::JobSpec& job);
// The spec's dataset.augmentation.random_erase_* (probability 0: off).
trainer::data::RandomErasingOptions MakeRandomErasingOptions(const v1::JobSpec& job);
// Samples [begin, end) of `test` as evaluation batches of up to 500 (no augmentation).
StatusOr<std::vector<trainer::Batch>> ReadEvalBatches(const trainer::data::Dataset& test,
                                                      int64_t begin, int64_t end);
// Evaluates a teacher loaded from weights_path or exported_path on the first 512 samples of `test`
// and refuses it (FAILED_PRECONDITION naming the file and the figures) when its top-1 is below 1.5x
// chance, unless distillation.allow_untrained_teacher. OK without a teacher, weights or evaluation.
Status CheckTeacherBeatsChance(const v1::JobSpec& job, trainer::Model& teacher,
                               const trainer::data::Dataset& test);
// Optimizer steps the job runs: `steps`, or epochs x steps per epoch.
int64_t TotalSteps(const v1::JobSpec& job, int64_t steps_per_epoch);

}  // namespace retort::worker
