// The trainer's building blocks on a CUDA device give what they give on the CPU: the KD loss
// and its gradient, and a built-in ViT's forward and backward. Skipped without a GPU.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstdlib>
#include <string>

#include "trainer/kd_loss.h"
#include "trainer/models/model.h"

namespace retort::trainer {
namespace {

// Runs without a GPU too: the CUDA build must load LibTorch's CUDA backend (the linker drops
// libraries nothing calls directly unless told not to; without it no GPU is ever seen).
TEST(TrainerCudaBuildTest, LibTorchCudaBackendIsLoaded) {
  for (const char* lib : {"libtorch_cuda.so", "libc10_cuda.so"}) {
    void* handle = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
    EXPECT_NE(handle, nullptr) << lib << " is not loaded in a CUDA build of the trainer";
    if (handle) dlclose(handle);
  }
}

class TrainerGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (torch::cuda::device_count() == 0) {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      GTEST_SKIP() << "no CUDA device visible to LibTorch (torch::cuda::device_count() == 0"
                   << (visible ? std::string(", CUDA_VISIBLE_DEVICES=") + visible : "") << ")";
    }
  }
  const torch::Device cuda_{torch::kCUDA, 0};
};

void ExpectClose(const torch::Tensor& gpu, const torch::Tensor& cpu, double rtol, double atol,
                 const std::string& what) {
  ASSERT_TRUE(gpu.is_cuda()) << what << " did not stay on the GPU";
  const auto back = gpu.to(torch::kCPU);
  EXPECT_TRUE(torch::allclose(back, cpu, rtol, atol))
      << what << ": max |gpu - cpu| = " << (back - cpu).abs().max().item<double>();
}

TEST_F(TrainerGpuTest, KdLossAndGradientMatchTheCpu) {
  torch::manual_seed(7);
  const auto student = torch::randn({64, 10});
  const auto teacher = torch::randn({64, 10});
  const auto labels = torch::randint(0, 10, {64}, torch::kLong);
  KdLossOptions options;

  auto s_cpu = student.clone().requires_grad_(true);
  auto cpu = KdLoss(s_cpu, teacher, labels, options);
  cpu.total.backward();

  auto s_gpu = student.to(cuda_).requires_grad_(true);
  auto gpu = KdLoss(s_gpu, teacher.to(cuda_), labels.to(cuda_), options);
  gpu.total.backward();

  ExpectClose(gpu.total.detach(), cpu.total.detach(), 1e-5, 1e-6, "loss");
  ExpectClose(gpu.kl, cpu.kl, 1e-5, 1e-6, "KL term");
  ExpectClose(gpu.ce, cpu.ce, 1e-5, 1e-6, "CE term");
  ExpectClose(s_gpu.grad(), s_cpu.grad(), 1e-4, 1e-6, "d loss / d student logits");
}

TEST_F(TrainerGpuTest, VitForwardAndBackwardMatchTheCpu) {
  auto cpu_model = BuildModel({.preset = "fm-student-p7"}, 11);
  ASSERT_TRUE(cpu_model.ok()) << cpu_model.status();
  auto gpu_model = BuildModel({.preset = "fm-student-p7"}, 11);
  ASSERT_TRUE(gpu_model.ok()) << gpu_model.status();
  (*gpu_model)->To(cuda_);
  (*cpu_model)->SetTraining(false);
  (*gpu_model)->SetTraining(false);

  torch::manual_seed(3);
  const auto images = torch::randn({8, 1, 28, 28});
  const auto cpu_logits = (*cpu_model)->Forward(images);
  const auto gpu_logits = (*gpu_model)->Forward(images.to(cuda_));
  ExpectClose(gpu_logits.detach(), cpu_logits.detach(), 1e-3, 1e-4, "logits");

  cpu_logits.sum().backward();
  gpu_logits.sum().backward();
  const auto cpu_params = (*cpu_model)->NamedParameters();
  const auto gpu_params = (*gpu_model)->NamedParameters();
  ASSERT_EQ(cpu_params.size(), gpu_params.size());
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    ASSERT_TRUE(gpu_params[i].second.grad().defined()) << gpu_params[i].first << " has no gradient";
    ExpectClose(gpu_params[i].second.grad(), cpu_params[i].second.grad(), 1e-3, 1e-4,
                "gradient of " + cpu_params[i].first);
  }
}

}  // namespace
}  // namespace retort::trainer
