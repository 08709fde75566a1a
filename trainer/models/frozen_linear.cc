#include "trainer/models/frozen_linear.h"

#include <ATen/ATen.h>

#if RETORT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace retort::trainer {

#if RETORT_HAVE_DNNL

namespace {

const dnnl::engine& CpuEngine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

}  // namespace

struct FrozenLinear::Kernel {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
  dnnl::memory packed_weight;  // in the layout pd chose (format_tag::any)
  dnnl::memory::desc src_md, bias_md, dst_md;
  size_t scratch_bytes = 0;
};

bool FrozenLinear::UsesOneDnn() { return true; }

namespace {

// Inference tensors have no version counter (and cannot change outside inference mode).
int64_t VersionOf(const at::Tensor& t) { return t.is_inference() ? 0 : t._version(); }

}  // namespace

std::shared_ptr<FrozenLinear::Kernel> FrozenLinear::KernelFor(int64_t rows, bool with_residual) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t weight_version = VersionOf(weight_), bias_version = VersionOf(bias_);
  if (packed_weight_data_ != weight_.data_ptr() || packed_bias_data_ != bias_.data_ptr() ||
      packed_weight_version_ != weight_version || packed_bias_version_ != bias_version) {
    kernels_.clear();
    packed_weight_data_ = weight_.data_ptr();
    packed_bias_data_ = bias_.data_ptr();
    packed_weight_version_ = weight_version;
    packed_bias_version_ = bias_version;
  }
  auto key = std::make_pair(rows, with_residual);
  if (auto it = kernels_.find(key); it != kernels_.end()) return it->second;
  // Row counts come from batch sizes (training parts, evaluation batches): a handful. Bound
  // the cache anyway so an unusual caller cannot grow it without limit.
  if (kernels_.size() >= 16) kernels_.clear();

  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const int64_t n = weight_.size(0), k = weight_.size(1);
  auto kernel = std::make_shared<Kernel>();
  kernel->src_md = dnnl::memory::desc({rows, k}, dt::f32, tag::ab);
  kernel->bias_md = dnnl::memory::desc({1, n}, dt::f32, tag::ab);
  kernel->dst_md = dnnl::memory::desc({rows, n}, dt::f32, tag::ab);
  dnnl::post_ops ops;
  if (activation_ == Activation::kGeluErf)
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
  if (with_residual) ops.append_sum(1.f);  // dst = act(x W^T + b) + dst
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // concurrent callers
  auto weight_any = dnnl::memory::desc({k, n}, dt::f32, tag::any);
  kernel->pd = dnnl::matmul::primitive_desc(
      dnnl::matmul::desc(kernel->src_md, weight_any, kernel->bias_md, kernel->dst_md), attr,
      CpuEngine());
  kernel->primitive = dnnl::matmul(kernel->pd);
  kernel->scratch_bytes = kernel->pd.scratchpad_desc().get_size();
  // W is [N, K] row-major: as the K x N operand that is layout "ba".
  dnnl::memory plain({{k, n}, dt::f32, tag::ba}, CpuEngine(), weight_.data_ptr());
  kernel->packed_weight = dnnl::memory(kernel->pd.weights_desc(), CpuEngine());
  dnnl::stream stream(CpuEngine());
  dnnl::reorder(plain, kernel->packed_weight).execute(stream, plain, kernel->packed_weight);
  stream.wait();
  kernels_.emplace(key, kernel);
  return kernel;
}

at::Tensor FrozenLinear::Multiply(const at::Tensor& x, at::Tensor* residual) {
  const int64_t rows = x.size(0), n = weight_.size(0);
  at::Tensor out = residual ? *residual : at::empty({rows, n}, x.options());
  if (rows == 0) return out;
  std::shared_ptr<Kernel> kernel = KernelFor(rows, residual != nullptr);
  at::Tensor scratch =
      at::empty({static_cast<int64_t>(kernel->scratch_bytes)}, x.options().dtype(at::kByte));
  const dnnl::engine& engine = CpuEngine();
  dnnl::memory src(kernel->src_md, engine, x.data_ptr());
  dnnl::memory bias(kernel->bias_md, engine, bias_.data_ptr());
  dnnl::memory dst(kernel->dst_md, engine, out.data_ptr());
  dnnl::memory pad(kernel->pd.scratchpad_desc(), engine, scratch.data_ptr());
  dnnl::stream stream(engine);
  kernel->primitive.execute(stream, {{DNNL_ARG_SRC, src},
                                     {DNNL_ARG_WEIGHTS, kernel->packed_weight},
                                     {DNNL_ARG_BIAS, bias},
                                     {DNNL_ARG_DST, dst},
                                     {DNNL_ARG_SCRATCHPAD, pad}});
  stream.wait();
  return out;
}

#else  // !RETORT_HAVE_DNNL

bool FrozenLinear::UsesOneDnn() { return false; }

at::Tensor FrozenLinear::Multiply(const at::Tensor& x, at::Tensor* residual) {
  at::Tensor y = at::addmm(bias_, x, weight_.t());
  if (activation_ == Activation::kGeluErf) y = at::gelu(y);
  if (!residual) return y;
  residual->add_(y);
  return *residual;
}

#endif  // RETORT_HAVE_DNNL

FrozenLinear::FrozenLinear(at::Tensor weight, at::Tensor bias, Activation activation)
    : weight_(std::move(weight)), bias_(std::move(bias)), activation_(activation) {
  TORCH_CHECK(weight_.dim() == 2 && bias_.dim() == 1 && bias_.size(0) == weight_.size(0),
              "FrozenLinear: weight ", weight_.sizes(), " and bias ", bias_.sizes(),
              " do not form a linear layer");
  TORCH_CHECK(weight_.is_contiguous() && bias_.is_contiguous(),
              "FrozenLinear: weight and bias must be contiguous");
}

FrozenLinear::~FrozenLinear() = default;

at::Tensor FrozenLinear::Forward(const at::Tensor& x, at::Tensor* residual) {
  TORCH_CHECK(x.dim() == 2 && x.size(1) == weight_.size(1), "FrozenLinear: input ", x.sizes(),
              " does not match weight ", weight_.sizes());
  TORCH_CHECK(x.is_cpu() && x.scalar_type() == at::kFloat, "FrozenLinear: needs fp32 CPU input");
  const int64_t rows = x.size(0), n = weight_.size(0);
  TORCH_CHECK(!residual || (residual->sizes() == at::IntArrayRef({rows, n}) &&
                            residual->is_contiguous() && residual->scalar_type() == at::kFloat),
              "FrozenLinear: residual must be a contiguous fp32 [", rows, ", ", n, "] tensor");
  return Multiply(x.contiguous(), residual);
}

}  // namespace retort::trainer
