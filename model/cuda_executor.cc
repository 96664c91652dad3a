#include "model/cuda_executor.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/sampling.h"
#include "model/cuda_forward.h"
#include "model/cuda_weights.h"

namespace loom {
namespace {

namespace kc = kernels::cuda;

size_t AlignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Offsets (in int32 elements) of the step inputs in the upload buffer. Pure
// decode steps always use the layout of max_num_seqs tokens, so that captured
// graphs see the same addresses at every replay.
struct InputLayout {
  size_t token_ids, positions, slots, query_start, sample_rows, block_tables, end;
  InputLayout(int32_t token_cap, int32_t seq_cap, int32_t seqs, int32_t max_blocks_per_seq) {
    token_ids = 0;
    positions = token_ids + token_cap;
    slots = positions + token_cap;
    query_start = slots + token_cap;
    sample_rows = query_start + seq_cap + 1;
    block_tables = AlignUp(sample_rows + seq_cap, 4);
    end = AlignUp(block_tables + size_t{static_cast<size_t>(seqs)} * max_blocks_per_seq, 4);
  }
};

}  // namespace

class CudaExecutorImpl {
 public:
  CudaExecutorImpl(const ModelConfig& config, int32_t max_model_len,
                   const CudaExecutorOptions& options)
      : config_(config), options_(options), max_model_len_(max_model_len) {}
  ~CudaExecutorImpl();

  absl::Status Init(const WeightStore* store);
  absl::StatusOr<StepResult> Execute(const StepPlan& plan);
  ExecutorGeometry Geometry() const {
    return {num_blocks_, options_.block_size, max_model_len_, "cuda", "bfloat16"};
  }
  void set_use_graphs(bool on) { use_graphs_ = on; }
  int64_t weight_bytes() const { return weights_->bytes(); }

 private:
  void CaptureGraphs();
  // Writes a pure-decode step of `batch` padded sequences (all idle) for capture.
  CudaStepInputs DecodeInputs(int32_t batch) const;
  int32_t GraphBatch(int32_t seqs) const;

  ModelConfig config_;
  CudaExecutorOptions options_;
  int32_t max_model_len_ = 0;
  int32_t max_blocks_per_seq_ = 0;
  int32_t num_blocks_ = 0;
  bool use_graphs_ = false;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<CudaWeights> weights_;
  std::unique_ptr<CudaForward> forward_;
  std::map<int32_t, cudaGraphExec_t> graphs_;  // by padded batch size

  // Upload: int32 inputs, then the sampling pack. Download: sampled outputs.
  size_t upload_bytes_ = 0;
  std::byte* host_in_ = nullptr;
  std::byte* dev_in_ = nullptr;
  std::byte* host_out_ = nullptr;
  std::byte* dev_out_ = nullptr;
  size_t out_bytes_ = 0;
  kc::SamplingBatchPack pack_;
};

CudaExecutorImpl::~CudaExecutorImpl() {
  for (auto& [batch, exec] : graphs_) cudaGraphExecDestroy(exec);
  forward_.reset();
  weights_.reset();
  cudaFreeHost(host_in_);
  cudaFreeHost(host_out_);
  cudaFree(dev_in_);
  cudaFree(dev_out_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status CudaExecutorImpl::Init(const WeightStore* store) {
  const ModelConfig& c = config_;
  if (c.head_dim != 16 && c.head_dim != 32 && c.head_dim != 64 && c.head_dim != 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("head_dim ", c.head_dim, " unsupported on CUDA"));
  }
  if (c.num_heads % c.num_kv_heads != 0 || c.num_heads / c.num_kv_heads > 8) {
    return absl::InvalidArgumentError("CUDA attention needs <= 8 query heads per kv head");
  }
  LOOM_CUDA_CHECK(cudaSetDevice(0));
  LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  absl::StatusOr<std::unique_ptr<CudaWeights>> w =
      store != nullptr ? CudaWeights::Load(c, *store) : CudaWeights::Dummy(c, options_.dummy_seed);
  if (!w.ok()) return w.status();
  weights_ = *std::move(w);

  CudaForwardLimits limits;
  limits.max_tokens = std::max(options_.max_num_batched_tokens, options_.max_num_seqs);
  limits.max_seqs = options_.max_num_seqs;
  limits.max_model_len = max_model_len_;
  limits.block_size = options_.block_size;
  limits.attention_kernel = options_.attention_kernel;
  max_blocks_per_seq_ = (max_model_len_ + options_.block_size - 1) / options_.block_size;

  // Upload buffer: the larger of the two layouts plus the sampling pack.
  const InputLayout mixed(limits.max_tokens, limits.max_seqs, limits.max_seqs, max_blocks_per_seq_);
  const size_t sampling_bytes =
      limits.max_seqs * sizeof(kc::SamplingRowGpu) +
      size_t{static_cast<size_t>(limits.max_seqs)} * max_model_len_ * sizeof(kc::PenaltyEntry) +
      (size_t{1} << 20);
  upload_bytes_ = mixed.end * 4 + sampling_bytes;
  const int32_t top = options_.max_top_logprobs;
  out_bytes_ = size_t{static_cast<size_t>(limits.max_seqs)} * (2 + 2 * top) * 4;
  LOOM_CUDA_CHECK(cudaMallocHost(&host_in_, upload_bytes_));
  LOOM_CUDA_CHECK(cudaMalloc(&dev_in_, upload_bytes_));
  LOOM_CUDA_CHECK(cudaMallocHost(&host_out_, out_bytes_));
  LOOM_CUDA_CHECK(cudaMalloc(&dev_out_, out_bytes_));

  size_t free_bytes = 0, total_bytes = 0;
  LOOM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const int64_t activations = CudaForward::ActivationBytes(c, limits);
  const int64_t per_block = CudaForward::KvBytesPerBlock(c, options_.block_size);
  const int64_t kv_bytes =
      options_.kv_cache_bytes > 0
          ? options_.kv_cache_bytes
          : static_cast<int64_t>((static_cast<double>(free_bytes) - activations) *
                                 options_.kv_cache_memory_fraction);
  int64_t blocks = kv_bytes / per_block;
  if (options_.max_num_blocks > 0) blocks = std::min<int64_t>(blocks, options_.max_num_blocks);
  if (blocks < max_blocks_per_seq_ + 1) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KV pool of ", blocks, " blocks cannot hold one sequence of ", max_model_len_,
                     " tokens (", free_bytes, " bytes free after weights)"));
  }
  num_blocks_ = static_cast<int32_t>(std::min<int64_t>(blocks, INT32_MAX));
  limits.num_blocks = num_blocks_;
  forward_ = std::make_unique<CudaForward>(c, *weights_, limits);
  use_graphs_ = !options_.enforce_eager;
  forward_->set_gemm_algorithms_timed(options_.gemm_algorithms_timed);
  if (use_graphs_) CaptureGraphs();
  forward_->set_gemm_algorithms_timed(0);  // shapes first seen while serving take the heuristic's
  return absl::OkStatus();
}

int32_t CudaExecutorImpl::GraphBatch(int32_t seqs) const {
  auto it = graphs_.lower_bound(seqs);
  return it == graphs_.end() ? 0 : it->first;
}

CudaStepInputs CudaExecutorImpl::DecodeInputs(int32_t batch) const {
  const int32_t cap = options_.max_num_seqs;
  const InputLayout l(cap, cap, batch, max_blocks_per_seq_);
  const auto* dev = reinterpret_cast<const int32_t*>(dev_in_);
  CudaStepInputs in;
  in.token_ids = dev + l.token_ids;
  in.positions = dev + l.positions;
  in.slot_mapping = dev + l.slots;
  in.query_start = dev + l.query_start;
  in.sample_rows = dev + l.sample_rows;
  in.block_tables = dev + l.block_tables;
  in.num_tokens = in.num_seqs = in.num_sample_rows = batch;
  in.partition_size = kc::DecodePartitionSize(batch);
  return in;
}

// Each graph is captured after one eager run of the same shape, so that
// cuBLASLt has chosen its algorithms and every kernel module is loaded.
void CudaExecutorImpl::CaptureGraphs() {
  const int32_t cap = options_.max_num_seqs;
  std::vector<int32_t> sizes;
  for (int32_t b = 1; b < cap; b *= 2) sizes.push_back(b);
  sizes.push_back(cap);
  // Idle sequences: token 0 at position 0 of the null block.
  const InputLayout l(cap, cap, cap, max_blocks_per_seq_);
  auto* h = reinterpret_cast<int32_t*>(host_in_);
  std::memset(host_in_, 0, l.end * 4);
  for (int32_t i = 0; i <= cap; ++i) h[l.query_start + i] = i;
  for (int32_t i = 0; i < cap; ++i) h[l.sample_rows + i] = i;
  LOOM_CUDA_CHECK(cudaMemcpyAsync(dev_in_, host_in_, l.end * 4, cudaMemcpyHostToDevice, stream_));
  for (int32_t b : sizes) {
    const CudaStepInputs in = DecodeInputs(b);
    forward_->Run(in, stream_);
    LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    cudaGraph_t graph;
    LOOM_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    forward_->Run(in, stream_);
    LOOM_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec;
    LOOM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    LOOM_CUDA_CHECK(cudaGraphDestroy(graph));
    graphs_[b] = exec;
  }
}

absl::StatusOr<StepResult> CudaExecutorImpl::Execute(const StepPlan& plan) {
  const int32_t num_seqs = static_cast<int32_t>(plan.seqs.size());
  const int32_t num_tokens = plan.num_scheduled_tokens;
  const int32_t bs = options_.block_size;
  if (num_seqs == 0) return StepResult{};
  if (num_seqs > options_.max_num_seqs ||
      num_tokens > std::max(options_.max_num_batched_tokens, options_.max_num_seqs)) {
    return absl::InvalidArgumentError(
        absl::StrCat("step of ", num_seqs, " seqs / ", num_tokens, " tokens exceeds the limits"));
  }
  bool decode_only = num_tokens == num_seqs;
  for (const ScheduledSeq& s : plan.seqs) {
    const int32_t end = s.num_computed_tokens + s.num_scheduled_tokens;
    if (end > max_model_len_ || static_cast<int64_t>(s.all_token_ids.size()) < end ||
        static_cast<int64_t>(s.block_table.size()) * bs < end) {
      return absl::InvalidArgumentError(absl::StrCat("seq ", s.seq_id, ": inconsistent slice"));
    }
    decode_only = decode_only && s.num_scheduled_tokens == 1 && s.sample;
  }
  const int32_t graph_batch = decode_only && use_graphs_ ? GraphBatch(num_seqs) : 0;
  const int32_t seqs_padded = graph_batch > 0 ? graph_batch : num_seqs;
  const int32_t token_cap = decode_only ? options_.max_num_seqs : num_tokens;
  const int32_t seq_cap = decode_only ? options_.max_num_seqs : num_seqs;
  const InputLayout l(token_cap, seq_cap, seqs_padded, max_blocks_per_seq_);

  auto* h = reinterpret_cast<int32_t*>(host_in_);
  pack_.Clear();
  std::vector<int32_t> bias_ids;
  std::vector<float> bias_values;
  std::vector<int64_t> sampled_seq_ids;
  int32_t row = 0;
  for (int32_t i = 0; i < num_seqs; ++i) {
    const ScheduledSeq& s = plan.seqs[i];
    h[l.query_start + i] = row;
    int32_t* table = h + l.block_tables + size_t{static_cast<size_t>(i)} * max_blocks_per_seq_;
    const int32_t blocks =
        std::min<int32_t>(static_cast<int32_t>(s.block_table.size()), max_blocks_per_seq_);
    std::memcpy(table, s.block_table.data(), blocks * 4);
    for (int32_t t = 0; t < s.num_scheduled_tokens; ++t, ++row) {
      const int32_t pos = s.num_computed_tokens + t;
      h[l.token_ids + row] = s.all_token_ids[pos];
      h[l.positions + row] = pos;
      h[l.slots + row] = s.block_table[pos / bs] * bs + pos % bs;
    }
    if (s.sample) {
      h[l.sample_rows + sampled_seq_ids.size()] = row - 1;
      sampled_seq_ids.push_back(s.seq_id);
      const SamplingParams& sp = *s.sampling;
      const int32_t end = s.num_computed_tokens + s.num_scheduled_tokens;
      bias_ids.clear();
      bias_values.clear();
      for (const auto& [id, v] : sp.logit_bias) {
        if (id < 0 || id >= config_.vocab_size) {
          return absl::InvalidArgumentError(absl::StrCat("logit_bias token ", id));
        }
        bias_ids.push_back(id);
        bias_values.push_back(v);
      }
      kernels::SamplingRowParams r;
      r.temperature = sp.temperature;
      r.top_p = sp.top_p;
      r.top_k = sp.top_k;
      r.min_p = sp.min_p;
      r.repetition_penalty = sp.repetition_penalty;
      r.presence_penalty = sp.presence_penalty;
      r.frequency_penalty = sp.frequency_penalty;
      r.seed = sp.seed;
      r.step = static_cast<uint64_t>(std::max(0, end - s.num_prompt_tokens));
      r.token_ids = s.all_token_ids.data();
      r.num_prompt_tokens = s.num_prompt_tokens;
      r.num_tokens = end;
      r.bias_token_ids = bias_ids.data();
      r.bias_values = bias_values.data();
      r.num_bias = static_cast<int32_t>(bias_ids.size());
      r.num_logprobs = std::min(sp.num_logprobs, options_.max_top_logprobs);
      pack_.Add(r);
    }
  }
  h[l.query_start + num_seqs] = row;
  // Padding up to the graph's batch: idle sequences on the null block.
  for (int32_t i = num_seqs; i < seqs_padded; ++i) {
    h[l.token_ids + i] = 0;
    h[l.positions + i] = 0;
    h[l.slots + i] = 0;
    h[l.query_start + i + 1] = i + 1;
    h[l.sample_rows + i] = i;
    std::memset(h + l.block_tables + size_t{static_cast<size_t>(i)} * max_blocks_per_seq_, 0,
                max_blocks_per_seq_ * 4);
  }
  const int32_t num_rows = static_cast<int32_t>(sampled_seq_ids.size());
  // The sampling pack follows the int32 inputs in the same upload.
  size_t off = l.end * 4;
  auto put = [&](const auto& v) {
    off = AlignUp(off, 16);
    const size_t at = off, n = v.size() * sizeof(v[0]);
    if (off + n > upload_bytes_) {
      off = upload_bytes_ + 1;
      return size_t{0};
    }
    if (n > 0) std::memcpy(host_in_ + off, v.data(), n);
    off += n;
    return at;
  };
  const size_t rows_at = put(pack_.rows), pen_at = put(pack_.penalties);
  const size_t bias_ids_at = put(pack_.bias_ids), bias_values_at = put(pack_.bias_values);
  if (off > upload_bytes_) return absl::ResourceExhaustedError("sampling inputs too large");
  LOOM_CUDA_CHECK(cudaMemcpyAsync(dev_in_, host_in_, off, cudaMemcpyHostToDevice, stream_));

  if (graph_batch > 0) {
    LOOM_CUDA_CHECK(cudaGraphLaunch(graphs_.at(graph_batch), stream_));
  } else {
    const auto* dev = reinterpret_cast<const int32_t*>(dev_in_);
    CudaStepInputs in;
    in.token_ids = dev + l.token_ids;
    in.positions = dev + l.positions;
    in.slot_mapping = dev + l.slots;
    in.query_start = dev + l.query_start;
    in.sample_rows = dev + l.sample_rows;
    in.block_tables = dev + l.block_tables;
    in.num_tokens = num_tokens;
    in.num_seqs = num_seqs;
    in.num_sample_rows = num_rows;
    in.partition_size = decode_only ? kc::DecodePartitionSize(num_seqs) : 0;
    forward_->Run(in, stream_);
  }

  const int32_t top = options_.max_top_logprobs, cap = options_.max_num_seqs;
  kc::SamplingGpuParams sp;
  sp.logits = forward_->logits();
  sp.num_rows = num_rows;
  sp.vocab_size = config_.vocab_size;
  sp.rows = reinterpret_cast<const kc::SamplingRowGpu*>(dev_in_ + rows_at);
  sp.penalties = reinterpret_cast<const kc::PenaltyEntry*>(dev_in_ + pen_at);
  sp.bias_ids = reinterpret_cast<const int32_t*>(dev_in_ + bias_ids_at);
  sp.bias_values = reinterpret_cast<const float*>(dev_in_ + bias_values_at);
  auto* out = reinterpret_cast<int32_t*>(dev_out_);
  sp.out_token_ids = out;
  sp.out_logprobs = reinterpret_cast<float*>(out + cap);
  sp.max_top_logprobs = top;
  sp.out_top_ids = out + 2 * cap;
  sp.out_top_logprobs = reinterpret_cast<float*>(out + 2 * cap + cap * top);
  kc::Sample(sp, stream_);
  LOOM_CUDA_CHECK(
      cudaMemcpyAsync(host_out_, dev_out_, out_bytes_, cudaMemcpyDeviceToHost, stream_));
  LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));

  const auto* ho = reinterpret_cast<const int32_t*>(host_out_);
  const auto* ho_f = reinterpret_cast<const float*>(host_out_);
  StepResult result;
  result.sampled.reserve(num_rows);
  for (int32_t r = 0; r < num_rows; ++r) {
    SampledToken t;
    t.seq_id = sampled_seq_ids[r];
    t.token_id = ho[r];
    t.logprob = ho_f[cap + r];
    for (int32_t k = 0; k < pack_.rows[r].num_logprobs; ++k) {
      t.top.push_back({ho[2 * cap + r * top + k], ho_f[2 * cap + cap * top + r * top + k]});
    }
    result.sampled.push_back(std::move(t));
  }
  return result;
}

bool CudaDeviceUsable() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return false;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return false;
  return prop.major >= 8;
}

CudaExecutor::CudaExecutor(std::unique_ptr<CudaExecutorImpl> impl) : impl_(std::move(impl)) {}
CudaExecutor::~CudaExecutor() = default;

absl::StatusOr<std::unique_ptr<CudaExecutor>> CudaExecutor::Create(
    const ModelConfig& config, const WeightStore* weights, int32_t max_model_len,
    const CudaExecutorOptions& options) {
  if (!CudaDeviceUsable()) return absl::UnavailableError("no usable CUDA device");
  const int32_t len = options.max_model_len > 0 ? options.max_model_len : max_model_len;
  if (len <= 0) return absl::InvalidArgumentError("max_model_len must be positive");
  auto impl = std::make_unique<CudaExecutorImpl>(config, len, options);
  if (absl::Status s = impl->Init(weights); !s.ok()) return s;
  return std::unique_ptr<CudaExecutor>(new CudaExecutor(std::move(impl)));
}

ExecutorGeometry CudaExecutor::Geometry() const { return impl_->Geometry(); }
absl::StatusOr<StepResult> CudaExecutor::Execute(const StepPlan& plan) {
  return impl_->Execute(plan);
}
void CudaExecutor::set_use_graphs(bool on) { impl_->set_use_graphs(on); }
int64_t CudaExecutor::weight_bytes() const { return impl_->weight_bytes(); }

absl::StatusOr<std::unique_ptr<Executor>> CreateCudaExecutor(const LoadedModel& model,
                                                             const CudaExecutorOptions& options) {
  absl::StatusOr<std::unique_ptr<CudaExecutor>> e =
      CudaExecutor::Create(model.config, model.weights.get(), model.max_model_len, options);
  if (!e.ok()) return e.status();
  return std::unique_ptr<Executor>(*std::move(e));
}

}  // namespace loom

namespace loom {

absl::StatusOr<kernels::cuda::AttentionKernel> ParseAttentionKernel(absl::string_view value) {
  if (value == "auto" || value == "v1") return kernels::cuda::AttentionKernel::kV1;
  if (value == "v2") return kernels::cuda::AttentionKernel::kV2;
  return absl::InvalidArgumentError(
      absl::StrCat("attention_kernel must be one of auto, v1, v2; got \"", value, "\""));
}

absl::StatusOr<std::unique_ptr<Executor>> CreateCudaExecutor(const LoadedModel& model,
                                                             const ExecutorOptions& options) {
  if (options.dtype != "auto" && options.dtype != "bfloat16") {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype ", options.dtype, " unsupported on cuda (bfloat16 only)"));
  }
  absl::StatusOr<kernels::cuda::AttentionKernel> attention =
      ParseAttentionKernel(options.attention_kernel);
  if (!attention.ok()) return attention.status();
  CudaExecutorOptions cuda;
  cuda.attention_kernel = *attention;
  cuda.block_size = options.block_size;
  cuda.max_model_len = options.max_model_len;
  cuda.kv_cache_bytes = options.kv_cache_bytes;
  cuda.kv_cache_memory_fraction = static_cast<float>(options.kv_cache_memory_fraction);
  return CreateCudaExecutor(model, cuda);
}

}  // namespace loom
