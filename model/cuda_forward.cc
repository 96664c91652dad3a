#include "model/cuda_forward.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"
#include "kernels/launch_sizing.h"

namespace loom {
namespace {

using bf16 = __nv_bfloat16;
namespace kc = kernels::cuda;

}  // namespace

KvCacheSpec CudaForward::KvSpec(const ModelConfig& c, const ModelKvLayout& kv_layout,
                                int32_t block_size) {
  return {.num_layers = kv_layout.layers_per_page,
          .num_kv_heads = c.num_kv_heads,
          .head_dim = c.head_dim,
          .block_size = block_size,
          .dtype_bytes = static_cast<int32_t>(sizeof(bf16))};
}

int64_t CudaForward::KvBytesPerBlock(const ModelConfig& c, const ModelKvLayout& kv_layout,
                                     int32_t block_size) {
  return ::loom::KvBytesPerBlock(KvSpec(c, kv_layout, block_size));
}

int64_t CudaForward::ActivationBytes(const ModelConfig& c, const CudaForwardLimits& l) {
  const int64_t t = l.max_tokens, h = c.hidden_size, attn = int64_t{c.num_heads} * c.head_dim;
  const int64_t qkv = int64_t{c.num_heads + 2 * c.num_kv_heads} * c.head_dim;
  const int64_t bf16_elems =
      t * ((c.sandwich_norms ? 4 : 3) * h + qkv + attn + 3 * int64_t{c.intermediate_size}) +
      int64_t{l.max_seqs} * h;
  const int64_t rows = kernels::SplitKWorkspaceRows(l.max_seqs, l.max_model_len) * c.num_heads;
  const int64_t f32_elems = int64_t{l.max_seqs} * c.vocab_size + rows * (c.head_dim + 2);
  return bf16_elems * 2 + f32_elems * 4 + (int64_t{32} << 20);  // + GEMM workspace
}

CudaForward::CudaForward(const ModelConfig& config, const ModelKvLayout& kv_layout,
                         const CudaWeights& weights, const CudaForwardLimits& limits)
    : config_(config), kv_layout_(kv_layout), weights_(weights), limits_(limits) {}

absl::StatusOr<std::unique_ptr<CudaForward>> CudaForward::Create(const ModelConfig& config,
                                                                 const ModelKvLayout& kv_layout,
                                                                 const CudaWeights& weights,
                                                                 const CudaForwardLimits& limits) {
  std::unique_ptr<CudaForward> f(new CudaForward(config, kv_layout, weights, limits));
  LOOM_RETURN_IF_ERROR(f->Allocate());
  LOOM_RETURN_IF_ERROR(f->gemm_.Init());
  return f;
}

template <typename T>
absl::Status CudaForward::Alloc(T*& out, int64_t elems) {
  void* p = nullptr;
  const int64_t bytes = std::max<int64_t>(elems, 1) * static_cast<int64_t>(sizeof(T));
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes of device memory for activations"));
  }
  allocations_.push_back(p);
  out = static_cast<T*>(p);
  return absl::OkStatus();
}

absl::Status CudaForward::Allocate() {
  const ModelConfig& c = config_;
  const int64_t t = limits_.max_tokens, h = c.hidden_size;
  const int64_t attn = int64_t{c.num_heads} * c.head_dim;
  const int64_t qkv = int64_t{c.num_heads + 2 * c.num_kv_heads} * c.head_dim;
  LOOM_RETURN_IF_ERROR(Alloc(residual_, t * h));
  LOOM_RETURN_IF_ERROR(Alloc(normed_, t * h));
  LOOM_RETURN_IF_ERROR(Alloc(x_, t * h));
  if (c.sandwich_norms) LOOM_RETURN_IF_ERROR(Alloc(post_normed_, t * h));
  LOOM_RETURN_IF_ERROR(Alloc(qkv_, t * qkv));
  LOOM_RETURN_IF_ERROR(Alloc(attn_, t * attn));
  LOOM_RETURN_IF_ERROR(Alloc(gate_up_, t * 2 * c.intermediate_size));
  LOOM_RETURN_IF_ERROR(Alloc(act_, t * c.intermediate_size));
  LOOM_RETURN_IF_ERROR(Alloc(gathered_, int64_t{limits_.max_seqs} * h));
  LOOM_RETURN_IF_ERROR(Alloc(logits_, int64_t{limits_.max_seqs} * c.vocab_size));
  // Indexed [token][head][max_partitions] with tokens < b and max_partitions
  // <= NumPartitions(max_model_len, p(b)) for a decode of b sequences.
  workspace_rows_ = kernels::SplitKWorkspaceRows(limits_.max_seqs, limits_.max_model_len);
  const int64_t rows = workspace_rows_ * c.num_heads;
  LOOM_RETURN_IF_ERROR(Alloc(partial_out_, rows * c.head_dim));
  LOOM_RETURN_IF_ERROR(Alloc(partial_max_, rows));
  LOOM_RETURN_IF_ERROR(Alloc(partial_sum_, rows));
  for (const bool sliding : {false, true}) {
    const std::vector<float> inv_freq = RopeInverseFrequencies(c, sliding);
    float*& dst = sliding ? inv_freq_local_ : inv_freq_;
    LOOM_RETURN_IF_ERROR(Alloc(dst, static_cast<int64_t>(inv_freq.size())));
    LOOM_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(dst, inv_freq.data(), inv_freq.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  return Alloc(kv_pool_,
               KvBytesPerBlock(c, kv_layout_, limits_.block_size) / 2 * limits_.num_blocks);
}

CudaForward::~CudaForward() {
  for (void* p : allocations_) cudaFree(p);
}

absl::Status CudaForward::RunAttention(const CudaLayerWeights& w, int32_t layer,
                                       kernels::PagedKv<bf16>& kv, const CudaStepInputs& in,
                                       cudaStream_t stream) {
  const ModelConfig& c = config_;
  const int32_t t = in.num_tokens, h = c.hidden_size, hd = c.head_dim;
  const int32_t q_width = c.num_heads * hd, kv_width = c.num_kv_heads * hd;
  const int32_t qkv_width = q_width + 2 * kv_width;
  const bool sliding = IsSlidingLayer(c, layer);
  LOOM_RETURN_IF_ERROR(
      kc::Matmul({normed_, w.qkv, w.qkv_bias, qkv_, t, qkv_width, h, h, qkv_width}, gemm_, stream));
  if (w.q_norm != nullptr) {
    LOOM_RETURN_IF_ERROR(kc::HeadRmsNorm<bf16>(
        {qkv_, w.q_norm, qkv_width, t, c.num_heads, hd, c.rms_norm_eps}, stream));
    LOOM_RETURN_IF_ERROR(kc::HeadRmsNorm<bf16>(
        {qkv_ + q_width, w.k_norm, qkv_width, t, c.num_kv_heads, hd, c.rms_norm_eps}, stream));
  }
  kv.sliding_window = sliding ? c.sliding_window : 0;

  kernels::RopeKvWriteParams<bf16> rope;
  rope.q = qkv_;
  rope.k = qkv_ + q_width;
  rope.v = qkv_ + q_width + kv_width;
  rope.q_stride = rope.k_stride = rope.v_stride = qkv_width;
  rope.num_heads = c.num_heads;
  rope.inv_freq = sliding ? inv_freq_local_ : inv_freq_;
  rope.kv = kv;
  LOOM_RETURN_IF_ERROR(kc::RopeKvWrite(rope, stream));

  kernels::PagedAttentionParams<bf16> ap;
  ap.q = qkv_;
  ap.out = attn_;
  ap.q_stride = qkv_width;
  ap.out_stride = q_width;
  ap.num_heads = c.num_heads;
  ap.scale = AttentionScale(c);
  ap.kv = kv;
  if (in.partition_size > 0) {
    ap.partition_size = in.partition_size;
    ap.max_partitions = in.max_partitions;
    ap.partial_out = partial_out_;
    ap.partial_max = partial_max_;
    ap.partial_sum = partial_sum_;
  }
  if (limits_.attention_kernel == kc::AttentionKernel::kV2 && kc::AttentionV2Applies(ap)) {
    LOOM_CUDA_RETURN_IF_ERROR(kc::PagedAttentionV2(ap, stream));
    return absl::OkStatus();
  }
  return kc::PagedAttention(ap, stream);
}

absl::Status CudaForward::RunLayer(const CudaLayerWeights& w, int32_t layer,
                                   kernels::PagedKv<bf16>& kv, const CudaStepInputs& in,
                                   const bf16*& pending, cudaStream_t stream) {
  const ModelConfig& c = config_;
  const int32_t t = in.num_tokens, h = c.hidden_size, inter = c.intermediate_size;
  const int32_t q_width = c.num_heads * c.head_dim;
  LOOM_RETURN_IF_ERROR(
      kc::RmsNorm<bf16>({pending, residual_, w.input_norm, normed_, t, h, c.rms_norm_eps}, stream));
  LOOM_RETURN_IF_ERROR(RunAttention(w, layer, kv, in, stream));
  LOOM_RETURN_IF_ERROR(
      kc::Matmul({attn_, w.o, nullptr, x_, t, h, q_width, q_width, h}, gemm_, stream));
  // Sandwich norms: the attention (then the MLP) output is normed before it
  // joins the residual.
  const bf16* attn_out = x_;
  if (w.post_attn_norm != nullptr) {
    LOOM_RETURN_IF_ERROR(kc::RmsNorm<bf16>(
        {nullptr, x_, w.post_attn_norm, post_normed_, t, h, c.rms_norm_eps}, stream));
    attn_out = post_normed_;
  }
  LOOM_RETURN_IF_ERROR(
      kc::RmsNorm<bf16>({attn_out, residual_, w.mlp_norm, normed_, t, h, c.rms_norm_eps}, stream));
  LOOM_RETURN_IF_ERROR(kc::Matmul(
      {normed_, w.gate_up, nullptr, gate_up_, t, 2 * inter, h, h, 2 * inter}, gemm_, stream));
  const kernels::SiluMulParams<bf16> act{gate_up_, gate_up_ + inter, act_, t,
                                         inter,    2 * inter,        inter};
  LOOM_RETURN_IF_ERROR(c.hidden_activation == Activation::kGeluTanh
                           ? kc::GeluTanhMul<bf16>(act, stream)
                           : kc::SiluMul<bf16>(act, stream));
  LOOM_RETURN_IF_ERROR(
      kc::Matmul({act_, w.down, nullptr, x_, t, h, inter, inter, h}, gemm_, stream));
  pending = x_;
  if (w.post_mlp_norm != nullptr) {
    LOOM_RETURN_IF_ERROR(kc::RmsNorm<bf16>(
        {nullptr, x_, w.post_mlp_norm, post_normed_, t, h, c.rms_norm_eps}, stream));
    pending = post_normed_;
  }
  return absl::OkStatus();
}

absl::Status CudaForward::Run(const CudaStepInputs& in, cudaStream_t stream) {
  const ModelConfig& c = config_;
  const int32_t t = in.num_tokens, h = c.hidden_size;
  const int32_t max_width = kernels::BlockTableWidth(limits_.max_model_len, limits_.block_size);
  if (t > limits_.max_tokens || in.num_seqs > limits_.max_seqs ||
      in.num_sample_rows > limits_.max_seqs || in.block_table_width > max_width ||
      int64_t{in.num_seqs} * in.max_partitions > workspace_rows_) {
    return absl::InvalidArgumentError(
        absl::StrCat("step of ", t, " tokens, ", in.num_seqs, " seqs, ", in.num_sample_rows,
                     " sampled rows, ", in.block_table_width, " block columns, ", in.max_partitions,
                     " partitions exceeds the forward pass's limits"));
  }
  LOOM_RETURN_IF_ERROR(kc::Embedding<bf16>(
      {in.token_ids, weights_.embed(), residual_, t, h, c.vocab_size, c.embedding_scale}, stream));

  kernels::PagedKv<bf16> kv;
  kv.num_blocks = limits_.num_blocks;
  kv.num_kv_heads = c.num_kv_heads;
  kv.block_size = limits_.block_size;
  kv.head_dim = c.head_dim;
  kv.max_blocks_per_seq = in.block_table_width;
  kv.block_stride = in.num_entries;
  kv.query_start = in.query_start;
  kv.num_seqs = in.num_seqs;
  kv.positions = in.positions;
  kv.num_tokens = t;
  const int64_t layer_kv_elems = KvBytesPerBlock(c, kv_layout_, limits_.block_size) / 2 /
                                 kv_layout_.layers_per_page / 2 * limits_.num_blocks;

  const bf16* pending = nullptr;  // the down projection to add into the residual
  for (int32_t layer = 0; layer < c.num_layers; ++layer) {
    // The layer's buffer, through the block tables and slots of its entry.
    const int32_t entry = kv_layout_.entry[layer];
    kv.k_cache = kv_pool_ + 2 * kv_layout_.buffer[layer] * layer_kv_elems;
    kv.v_cache = kv.k_cache + layer_kv_elems;
    kv.block_tables = in.block_tables + entry;
    kv.slot_mapping = in.slot_mapping + static_cast<int64_t>(entry) * in.slot_pitch;
    LOOM_RETURN_IF_ERROR(RunLayer(weights_.layers()[layer], layer, kv, in, pending, stream));
  }
  LOOM_RETURN_IF_ERROR(kc::RmsNorm<bf16>(
      {pending, residual_, weights_.final_norm(), normed_, t, h, c.rms_norm_eps}, stream));
  // Gather the sampled rows with the embedding kernel (the rows are its "vocabulary").
  LOOM_RETURN_IF_ERROR(
      kc::Embedding<bf16>({in.sample_rows, normed_, gathered_, in.num_sample_rows, h, t}, stream));
  return gemm_.Run(stream, gathered_, weights_.lm_head(), logits_, in.num_sample_rows, c.vocab_size,
                   h, cuda::GemmOut::kFloat32);
}

}  // namespace loom
