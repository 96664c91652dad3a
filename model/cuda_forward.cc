#include "model/cuda_forward.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace loom {
namespace {

using bf16 = __nv_bfloat16;
namespace kc = kernels::cuda;

int64_t MaxPartitionRows(const CudaForwardLimits& l) {
  int64_t rows = 0;
  for (int32_t b = 1; b <= l.max_seqs; ++b) {
    const int32_t p = kc::DecodePartitionSize(b);
    rows = std::max<int64_t>(rows, int64_t{b} * ((l.max_model_len + p - 1) / p));
  }
  return rows;
}

template <typename T>
T* Alloc(std::vector<void*>& owned, int64_t elems) {
  void* p = nullptr;
  LOOM_CUDA_CHECK(cudaMalloc(&p, std::max<int64_t>(elems, 1) * sizeof(T)));
  owned.push_back(p);
  return static_cast<T*>(p);
}

}  // namespace

int64_t CudaForward::KvBytesPerBlock(const ModelConfig& c, int32_t block_size) {
  return int64_t{2} * c.num_layers * c.num_kv_heads * block_size * c.head_dim * sizeof(bf16);
}

int64_t CudaForward::ActivationBytes(const ModelConfig& c, const CudaForwardLimits& l) {
  const int64_t t = l.max_tokens, h = c.hidden_size, attn = int64_t{c.num_heads} * c.head_dim;
  const int64_t qkv = int64_t{c.num_heads + 2 * c.num_kv_heads} * c.head_dim;
  const int64_t bf16_elems =
      t * (3 * h + qkv + attn + 3 * int64_t{c.intermediate_size}) + int64_t{l.max_seqs} * h;
  const int64_t rows = MaxPartitionRows(l) * c.num_heads;
  const int64_t f32_elems = int64_t{l.max_seqs} * c.vocab_size + rows * (c.head_dim + 2);
  return bf16_elems * 2 + f32_elems * 4 + (int64_t{32} << 20);  // + GEMM workspace
}

CudaForward::CudaForward(const ModelConfig& config, const CudaWeights& weights,
                         const CudaForwardLimits& limits)
    : config_(config), weights_(weights), limits_(limits) {
  const ModelConfig& c = config_;
  const int64_t t = limits.max_tokens, h = c.hidden_size;
  const int64_t attn = int64_t{c.num_heads} * c.head_dim;
  const int64_t qkv = int64_t{c.num_heads + 2 * c.num_kv_heads} * c.head_dim;
  max_blocks_per_seq_ = (limits.max_model_len + limits.block_size - 1) / limits.block_size;
  max_partitions_ = 0;
  for (int32_t b = 1; b <= limits.max_seqs; ++b) {
    const int32_t p = kc::DecodePartitionSize(b);
    max_partitions_ = std::max(max_partitions_, (limits.max_model_len + p - 1) / p);
  }
  residual_ = Alloc<bf16>(allocations_, t * h);
  normed_ = Alloc<bf16>(allocations_, t * h);
  x_ = Alloc<bf16>(allocations_, t * h);
  qkv_ = Alloc<bf16>(allocations_, t * qkv);
  attn_ = Alloc<bf16>(allocations_, t * attn);
  gate_up_ = Alloc<bf16>(allocations_, t * 2 * c.intermediate_size);
  act_ = Alloc<bf16>(allocations_, t * c.intermediate_size);
  gathered_ = Alloc<bf16>(allocations_, int64_t{limits.max_seqs} * h);
  logits_ = Alloc<float>(allocations_, int64_t{limits.max_seqs} * c.vocab_size);
  // The workspace is indexed [token, head, max_partitions_]; decode tokens <= max_seqs.
  const int64_t rows = int64_t{limits.max_seqs} * c.num_heads * max_partitions_;
  partial_out_ = Alloc<float>(allocations_, rows * c.head_dim);
  partial_max_ = Alloc<float>(allocations_, rows);
  partial_sum_ = Alloc<float>(allocations_, rows);
  const std::vector<float> inv_freq = RopeInverseFrequencies(c);
  inv_freq_ = Alloc<float>(allocations_, static_cast<int64_t>(inv_freq.size()));
  LOOM_CUDA_CHECK(cudaMemcpy(inv_freq_, inv_freq.data(), inv_freq.size() * sizeof(float),
                             cudaMemcpyHostToDevice));
  kv_pool_ =
      Alloc<bf16>(allocations_, KvBytesPerBlock(c, limits.block_size) / 2 * limits.num_blocks);
}

CudaForward::~CudaForward() {
  for (void* p : allocations_) cudaFree(p);
}

void CudaForward::Run(const CudaStepInputs& in, cudaStream_t stream) {
  const ModelConfig& c = config_;
  const int32_t t = in.num_tokens, h = c.hidden_size, inter = c.intermediate_size;
  const int32_t q_width = c.num_heads * c.head_dim, kv_width = c.num_kv_heads * c.head_dim;
  const int32_t qkv_width = q_width + 2 * kv_width;
  LOOM_CHECK_LE(t, limits_.max_tokens);
  LOOM_CHECK_LE(in.num_seqs, limits_.max_seqs);
  LOOM_CHECK_LE(in.num_sample_rows, limits_.max_seqs);

  kc::Embedding<bf16>({in.token_ids, weights_.embed(), residual_, t, h, c.vocab_size}, stream);

  kernels::PagedKv<bf16> kv;
  kv.num_blocks = limits_.num_blocks;
  kv.num_kv_heads = c.num_kv_heads;
  kv.block_size = limits_.block_size;
  kv.head_dim = c.head_dim;
  kv.block_tables = in.block_tables;
  kv.max_blocks_per_seq = max_blocks_per_seq_;
  kv.query_start = in.query_start;
  kv.num_seqs = in.num_seqs;
  kv.positions = in.positions;
  kv.slot_mapping = in.slot_mapping;
  kv.num_tokens = t;
  const int64_t layer_kv_elems =
      KvBytesPerBlock(c, limits_.block_size) / 2 / c.num_layers / 2 * limits_.num_blocks;

  const bf16* pending = nullptr;  // the down projection to add into the residual
  for (int32_t layer = 0; layer < c.num_layers; ++layer) {
    const CudaLayerWeights& w = weights_.layers()[layer];
    kv.k_cache = kv_pool_ + 2 * layer * layer_kv_elems;
    kv.v_cache = kv.k_cache + layer_kv_elems;

    kc::RmsNorm<bf16>({pending, residual_, w.input_norm, normed_, t, h, c.rms_norm_eps}, stream);
    kc::Matmul({normed_, w.qkv, w.qkv_bias, qkv_, t, qkv_width, h, h, qkv_width}, gemm_, stream);

    kernels::RopeKvWriteParams<bf16> rope;
    rope.q = qkv_;
    rope.k = qkv_ + q_width;
    rope.v = qkv_ + q_width + kv_width;
    rope.q_stride = rope.k_stride = rope.v_stride = qkv_width;
    rope.num_heads = c.num_heads;
    rope.inv_freq = inv_freq_;
    rope.kv = kv;
    kc::RopeKvWrite(rope, stream);

    kernels::PagedAttentionParams<bf16> ap;
    ap.q = qkv_;
    ap.out = attn_;
    ap.q_stride = qkv_width;
    ap.out_stride = q_width;
    ap.num_heads = c.num_heads;
    ap.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    ap.kv = kv;
    if (in.partition_size > 0) {
      ap.partition_size = in.partition_size;
      ap.max_partitions = (limits_.max_model_len + in.partition_size - 1) / in.partition_size;
      LOOM_CHECK_LE(ap.max_partitions, max_partitions_);
      ap.partial_out = partial_out_;
      ap.partial_max = partial_max_;
      ap.partial_sum = partial_sum_;
    }
    if (limits_.attention_kernel == kc::AttentionKernel::kV2 && kc::AttentionV2Applies(ap)) {
      LOOM_CUDA_CHECK(kc::PagedAttentionV2(ap, stream));
    } else {
      kc::PagedAttention(ap, stream);
    }

    kc::Matmul({attn_, w.o, nullptr, x_, t, h, q_width, q_width, h}, gemm_, stream);
    kc::RmsNorm<bf16>({x_, residual_, w.post_attn_norm, normed_, t, h, c.rms_norm_eps}, stream);
    kc::Matmul({normed_, w.gate_up, nullptr, gate_up_, t, 2 * inter, h, h, 2 * inter}, gemm_,
               stream);
    kc::SiluMul<bf16>({gate_up_, gate_up_ + inter, act_, t, inter, 2 * inter, inter}, stream);
    kc::Matmul({act_, w.down, nullptr, x_, t, h, inter, inter, h}, gemm_, stream);
    pending = x_;
  }
  kc::RmsNorm<bf16>({pending, residual_, weights_.final_norm(), normed_, t, h, c.rms_norm_eps},
                    stream);
  // Gather the sampled rows with the embedding kernel (the rows are its "vocabulary").
  kc::Embedding<bf16>({in.sample_rows, normed_, gathered_, in.num_sample_rows, h, t}, stream);
  gemm_.Run(stream, gathered_, weights_.lm_head(), logits_, in.num_sample_rows, c.vocab_size, h,
            cuda::GemmOut::kFloat32);
}

}  // namespace loom
