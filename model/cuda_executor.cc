#include "model/cuda_executor.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/sampling.h"
#include "kernels/launch_sizing.h"
#include "model/cuda_forward.h"
#include "model/cuda_weights.h"
#include "model/kv_layout.h"
#include "model/sampling_row.h"

namespace loom {
namespace {

namespace kc = kernels::cuda;
using kernels::StepInputLayout;

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
    ExecutorGeometry g;
    g.num_blocks = num_blocks_;
    g.block_size = options_.block_size;
    g.max_model_len = max_model_len_;
    g.device = "cuda";
    g.dtype = "bfloat16";
    g.max_num_seqs = options_.max_num_seqs;
    g.max_num_batched_tokens = max_tokens_;
    g.vocab_size = config_.vocab_size;
    g.kv_layout = kv_layout_.cache;
    return g;
  }
  void set_use_graphs(bool on) { use_graphs_ = on; }
  int64_t weight_bytes() const { return weights_->bytes(); }

 private:
  // The step's shape: graph or eager, padded batch, upload layout.
  struct StepShape {
    int32_t num_seqs = 0, num_tokens = 0, graph_batch = 0, seqs_padded = 0;
    int32_t width = 0;       // block-table columns of the layout
    int32_t used_width = 0;  // columns the step's longest context needs
    bool decode_only = false;
    kernels::SplitKLaunch split;
  };
  absl::Status AllocateBuffers();
  absl::Status CaptureGraphs();
  absl::StatusOr<StepShape> Plan(const StepPlan& plan) const;
  StepInputLayout Layout(const StepShape& shape) const;
  CudaStepInputs DeviceInputs(const StepShape& shape, int32_t num_rows) const;
  // Writes the int32 inputs and the sampling pack; returns the ids of the sampled seqs.
  absl::StatusOr<std::vector<int64_t>> PackInputs(const StepPlan& plan, const StepShape& shape);
  // mask: the sample's token mask (TokenMasks::RowOf), or null.
  absl::Status AddSamplingRow(const ScheduledSeq& s, const uint32_t* mask, int32_t mask_words);
  absl::Status Upload(const StepShape& shape, const kc::SamplingUploadOffsets& at);
  absl::Status Sample(const kc::SamplingUploadOffsets& at, int32_t num_rows);
  StepResult Unpack(const std::vector<int64_t>& seq_ids) const;
  int32_t GraphBatch(int32_t seqs) const;

  ModelConfig config_;
  CudaExecutorOptions options_;
  ModelKvLayout kv_layout_;
  int32_t stride_ = 1;  // block-table entries per logical block
  int32_t max_model_len_ = 0;
  int32_t max_tokens_ = 0;          // per step
  int32_t max_blocks_per_seq_ = 0;  // the graphs' block-table width, in entries
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
  std::vector<int32_t> bias_ids_;
  std::vector<float> bias_values_;
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

// The upload holds the larger of the two int32 layouts (a mixed step of
// max_tokens_ tokens, or a graph decode of max_num_seqs at full width) and
// the worst sampling pack the request limits allow.
absl::Status CudaExecutorImpl::AllocateBuffers() {
  const int32_t seqs = options_.max_num_seqs;
  const StepInputLayout mixed(max_tokens_, seqs, seqs, max_blocks_per_seq_, stride_);
  kc::SamplingUploadLimits limits;
  limits.max_rows = seqs;
  limits.vocab_size = config_.vocab_size;
  limits.max_history = max_model_len_;
  limits.max_logit_bias = options_.max_logit_bias;
  upload_bytes_ = mixed.end * 4 + kc::SamplingUploadBytes(limits);
  const int32_t top = options_.max_top_logprobs;
  out_bytes_ = size_t{static_cast<size_t>(seqs)} * (2 + 2 * top) * 4;
  LOOM_CUDA_RETURN_IF_ERROR(cudaMallocHost(&host_in_, upload_bytes_));
  LOOM_CUDA_RETURN_IF_ERROR(cudaMalloc(&dev_in_, upload_bytes_));
  LOOM_CUDA_RETURN_IF_ERROR(cudaMallocHost(&host_out_, out_bytes_));
  LOOM_CUDA_RETURN_IF_ERROR(cudaMalloc(&dev_out_, out_bytes_));
  return absl::OkStatus();
}

absl::Status CudaExecutorImpl::Init(const WeightStore* store) {
  const ModelConfig& c = config_;
  if (c.head_dim != 16 && c.head_dim != 32 && c.head_dim != 64 && c.head_dim != 128 &&
      c.head_dim != 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("head_dim ", c.head_dim, " unsupported on CUDA (16, 32, 64, 128, 256)"));
  }
  const int32_t max_group = c.head_dim > 128 ? 4 : 8;
  if (c.num_heads % c.num_kv_heads != 0 || c.num_heads / c.num_kv_heads > max_group) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA attention needs <= ", max_group,
                                                   " query heads per kv head at head_dim ",
                                                   c.head_dim));
  }
  kv_layout_ = KvLayoutOf(c);
  stride_ = kv_layout_.cache.stride();
  if (options_.max_num_seqs < 1 || options_.max_num_batched_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_num_seqs (", options_.max_num_seqs, ") and max_num_batched_tokens (",
                     options_.max_num_batched_tokens, ") must be >= 1"));
  }
  LOOM_CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
  LOOM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  absl::StatusOr<std::unique_ptr<CudaWeights>> w =
      store != nullptr ? CudaWeights::Load(c, *store) : CudaWeights::Dummy(c, options_.dummy_seed);
  if (!w.ok()) return w.status();
  weights_ = *std::move(w);

  max_tokens_ = std::max(options_.max_num_batched_tokens, options_.max_num_seqs);
  max_blocks_per_seq_ = kernels::BlockTableWidth(max_model_len_, options_.block_size) * stride_;
  CudaForwardLimits limits;
  limits.max_tokens = max_tokens_;
  limits.max_seqs = options_.max_num_seqs;
  limits.max_model_len = max_model_len_;
  limits.block_size = options_.block_size;
  limits.attention_kernel = options_.attention_kernel;
  LOOM_RETURN_IF_ERROR(AllocateBuffers());

  size_t free_bytes = 0, total_bytes = 0;
  LOOM_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  const int64_t activations = CudaForward::ActivationBytes(c, limits);
  const int64_t kv_bytes =
      options_.kv_cache_bytes > 0
          ? options_.kv_cache_bytes
          : static_cast<int64_t>((static_cast<double>(free_bytes) - activations) *
                                 options_.kv_cache_memory_fraction);
  int64_t blocks =
      NumBlocksForBudget(CudaForward::KvSpec(c, kv_layout_, options_.block_size), kv_bytes);
  if (options_.max_num_blocks > 0) blocks = std::min<int64_t>(blocks, options_.max_num_blocks);
  if (blocks < max_blocks_per_seq_ + 1) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KV pool of ", blocks, " blocks cannot hold one sequence of ", max_model_len_,
                     " tokens (", free_bytes, " bytes free after weights)"));
  }
  num_blocks_ = static_cast<int32_t>(std::min<int64_t>(blocks, INT32_MAX));
  limits.num_blocks = num_blocks_;
  absl::StatusOr<std::unique_ptr<CudaForward>> forward =
      CudaForward::Create(c, kv_layout_, *weights_, limits);
  if (!forward.ok()) return forward.status();
  forward_ = *std::move(forward);
  use_graphs_ = !options_.enforce_eager;
  forward_->set_gemm_algorithms_timed(options_.gemm_algorithms_timed);
  const absl::Status captured = use_graphs_ ? CaptureGraphs() : absl::OkStatus();
  forward_->set_gemm_algorithms_timed(0);  // shapes first seen while serving take the heuristic's
  return captured;
}

int32_t CudaExecutorImpl::GraphBatch(int32_t seqs) const {
  auto it = graphs_.lower_bound(seqs);
  return it == graphs_.end() ? 0 : it->first;
}

// Graph decodes use the layout of max_num_seqs tokens at full block-table
// width, so that captured graphs see the same addresses at every replay;
// eager steps are packed tight, their block tables as wide as the step needs.
StepInputLayout CudaExecutorImpl::Layout(const StepShape& shape) const {
  const int32_t cap = options_.max_num_seqs;
  const bool graph = shape.graph_batch > 0;
  return StepInputLayout(graph ? cap : shape.num_tokens, graph ? cap : shape.num_seqs,
                         shape.seqs_padded, shape.width, stride_);
}

CudaStepInputs CudaExecutorImpl::DeviceInputs(const StepShape& shape, int32_t num_rows) const {
  const StepInputLayout l = Layout(shape);
  const auto* dev = reinterpret_cast<const int32_t*>(dev_in_);
  CudaStepInputs in;
  in.token_ids = dev + l.token_ids;
  in.positions = dev + l.positions;
  in.slot_mapping = dev + l.slots;
  in.query_start = dev + l.query_start;
  in.sample_rows = dev + l.sample_rows;
  in.block_tables = dev + l.block_tables;
  in.num_entries = stride_;
  in.slot_pitch = static_cast<int32_t>(l.slot_pitch);
  in.num_tokens = shape.graph_batch > 0 ? shape.seqs_padded : shape.num_tokens;
  in.num_seqs = shape.graph_batch > 0 ? shape.seqs_padded : shape.num_seqs;
  in.num_sample_rows = shape.graph_batch > 0 ? shape.seqs_padded : num_rows;
  in.block_table_width = shape.width;
  if (shape.decode_only) {
    in.partition_size = shape.split.partition_size;
    in.max_partitions = shape.split.max_partitions;
  }
  return in;
}

// Each graph is captured after one eager run of the same shape, so that
// cuBLASLt has chosen its algorithms and every kernel module is loaded.
absl::Status CudaExecutorImpl::CaptureGraphs() {
  const int32_t cap = options_.max_num_seqs;
  std::vector<int32_t> sizes;
  for (int32_t b = 1; b < cap; b *= 2) sizes.push_back(b);
  sizes.push_back(cap);
  // Idle sequences: token 0 at position 0 of the null block.
  const StepInputLayout l(cap, cap, cap, max_blocks_per_seq_, stride_);
  auto* h = reinterpret_cast<int32_t*>(host_in_);
  std::memset(host_in_, 0, l.end * 4);
  for (int32_t i = 0; i <= cap; ++i) h[l.query_start + i] = i;
  for (int32_t i = 0; i < cap; ++i) h[l.sample_rows + i] = i;
  LOOM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dev_in_, host_in_, l.end * 4, cudaMemcpyHostToDevice, stream_));
  for (int32_t b : sizes) {
    StepShape shape;
    shape.num_seqs = shape.num_tokens = shape.graph_batch = shape.seqs_padded = b;
    shape.width = max_blocks_per_seq_;
    shape.decode_only = true;
    shape.split = kernels::PlanSplitK(b, max_model_len_, max_model_len_, /*graph=*/true);
    const CudaStepInputs in = DeviceInputs(shape, b);
    LOOM_RETURN_IF_ERROR(forward_->Run(in, stream_));
    LOOM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    cudaGraph_t graph;
    LOOM_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    const absl::Status run = forward_->Run(in, stream_);
    LOOM_CUDA_RETURN_IF_ERROR(cudaStreamEndCapture(stream_, &graph));
    LOOM_RETURN_IF_ERROR(run);
    cudaGraphExec_t exec;
    const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    LOOM_CUDA_RETURN_IF_ERROR(instantiated);
    graphs_[b] = exec;
  }
  return absl::OkStatus();
}

absl::StatusOr<CudaExecutorImpl::StepShape> CudaExecutorImpl::Plan(const StepPlan& plan) const {
  StepShape shape;
  shape.num_seqs = static_cast<int32_t>(plan.seqs.size());
  shape.num_tokens = plan.num_scheduled_tokens;
  if (shape.num_seqs > options_.max_num_seqs || shape.num_tokens > max_tokens_) {
    return absl::InvalidArgumentError(absl::StrCat("step of ", shape.num_seqs, " seqs / ",
                                                   shape.num_tokens, " tokens exceeds the limits (",
                                                   options_.max_num_seqs, " / ", max_tokens_, ")"));
  }
  const int32_t bs = options_.block_size;
  bool decode_only = shape.num_tokens == shape.num_seqs;
  int32_t longest = 1;
  for (const ScheduledSeq& s : plan.seqs) {
    const int32_t end = s.num_computed_tokens + s.num_scheduled_tokens;
    if (end > max_model_len_ || static_cast<int64_t>(s.all_token_ids.size()) < end ||
        s.block_table.size() % stride_ != 0 ||
        static_cast<int64_t>(s.block_table.size()) / stride_ * bs < end) {
      return absl::InvalidArgumentError(absl::StrCat("seq ", s.seq_id, ": inconsistent slice"));
    }
    decode_only = decode_only && s.num_scheduled_tokens == 1 && s.sample;
    longest = std::max(longest, end);
  }
  shape.decode_only = decode_only;
  shape.graph_batch = decode_only && use_graphs_ ? GraphBatch(shape.num_seqs) : 0;
  const bool graph = shape.graph_batch > 0;
  shape.seqs_padded = graph ? shape.graph_batch : shape.num_seqs;
  shape.used_width = kernels::BlockTableWidth(longest, bs) * stride_;
  shape.width = graph ? max_blocks_per_seq_ : shape.used_width;
  if (decode_only) {
    shape.split = kernels::PlanSplitK(shape.seqs_padded, longest, max_model_len_, graph);
  }
  return shape;
}

absl::Status CudaExecutorImpl::AddSamplingRow(const ScheduledSeq& s, const uint32_t* mask,
                                              int32_t mask_words) {
  const SamplingRowLimits limits{.vocab_size = config_.vocab_size,
                                 .max_logit_bias = options_.max_logit_bias,
                                 .max_top_logprobs = options_.max_top_logprobs};
  LOOM_ASSIGN_OR_RETURN(kernels::SamplingRowParams r,
                        MakeSamplingRow(s, limits, bias_ids_, bias_values_));
  r.allowed_tokens = mask;
  r.allowed_words = mask == nullptr ? 0 : mask_words;
  pack_.Add(r);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> CudaExecutorImpl::PackInputs(const StepPlan& plan,
                                                                  const StepShape& shape) {
  const StepInputLayout l = Layout(shape);
  const int32_t bs = options_.block_size;
  auto* h = reinterpret_cast<int32_t*>(host_in_);
  pack_.Clear();
  std::vector<int64_t> sampled;
  int32_t row = 0;
  for (int32_t i = 0; i < shape.num_seqs; ++i) {
    const ScheduledSeq& s = plan.seqs[i];
    h[l.query_start + i] = row;
    int32_t* table = h + l.block_tables + size_t{static_cast<size_t>(i)} * shape.width;
    const int32_t blocks =
        std::min<int32_t>(static_cast<int32_t>(s.block_table.size()), shape.used_width);
    std::memcpy(table, s.block_table.data(), blocks * 4);
    for (int32_t t = 0; t < s.num_scheduled_tokens; ++t, ++row) {
      const int32_t pos = s.num_computed_tokens + t;
      h[l.token_ids + row] = s.all_token_ids[pos];
      h[l.positions + row] = pos;
      for (int32_t e = 0; e < stride_; ++e) {
        h[l.slots + e * l.slot_pitch + row] =
            s.block_table[(pos / bs) * stride_ + e] * bs + pos % bs;
      }
    }
    if (s.sample) {
      h[l.sample_rows + sampled.size()] = row - 1;
      sampled.push_back(s.seq_id);
      LOOM_RETURN_IF_ERROR(
          AddSamplingRow(s, plan.token_masks.RowOf(i), plan.token_masks.words_per_row));
    }
  }
  h[l.query_start + shape.num_seqs] = row;
  // Padding up to the graph's batch: idle sequences at position 0 of the null
  // block, which reads only the first column of their block-table row.
  for (int32_t i = shape.num_seqs; i < shape.seqs_padded; ++i) {
    h[l.token_ids + i] = 0;
    h[l.positions + i] = 0;
    for (int32_t e = 0; e < stride_; ++e) h[l.slots + e * l.slot_pitch + i] = 0;
    h[l.query_start + i + 1] = i + 1;
    h[l.sample_rows + i] = i;
    h[l.block_tables + size_t{static_cast<size_t>(i)} * shape.width] = 0;
  }
  return sampled;
}

absl::Status CudaExecutorImpl::Sample(const kc::SamplingUploadOffsets& at, int32_t num_rows) {
  const int32_t top = options_.max_top_logprobs, cap = options_.max_num_seqs;
  kc::SamplingGpuParams sp;
  sp.logits = forward_->logits();
  sp.num_rows = num_rows;
  sp.vocab_size = config_.vocab_size;
  sp.rows = reinterpret_cast<const kc::SamplingRowGpu*>(dev_in_ + at.rows);
  sp.penalties = reinterpret_cast<const kc::PenaltyEntry*>(dev_in_ + at.penalties);
  sp.bias_ids = reinterpret_cast<const int32_t*>(dev_in_ + at.bias_ids);
  sp.bias_values = reinterpret_cast<const float*>(dev_in_ + at.bias_values);
  sp.masks = reinterpret_cast<const uint32_t*>(dev_in_ + at.masks);
  auto* out = reinterpret_cast<int32_t*>(dev_out_);
  sp.out_token_ids = out;
  sp.out_logprobs = reinterpret_cast<float*>(out + cap);
  sp.max_top_logprobs = top;
  sp.out_top_ids = out + 2 * cap;
  sp.out_top_logprobs = reinterpret_cast<float*>(out + 2 * cap + cap * top);
  LOOM_RETURN_IF_ERROR(kc::Sample(sp, stream_));
  LOOM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_out_, dev_out_, out_bytes_, cudaMemcpyDeviceToHost, stream_));
  LOOM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

StepResult CudaExecutorImpl::Unpack(const std::vector<int64_t>& seq_ids) const {
  const int32_t top = options_.max_top_logprobs, cap = options_.max_num_seqs;
  const auto* ho = reinterpret_cast<const int32_t*>(host_out_);
  const auto* ho_f = reinterpret_cast<const float*>(host_out_);
  StepResult result;
  result.sampled.reserve(seq_ids.size());
  for (size_t r = 0; r < seq_ids.size(); ++r) {
    SampledToken t;
    t.seq_id = seq_ids[r];
    t.token_id = ho[r];
    t.logprob = ho_f[cap + r];
    for (int32_t k = 0; k < pack_.rows[r].num_logprobs; ++k) {
      const float logprob = ho_f[2 * cap + cap * top + r * top + k];
      if (std::isinf(logprob) && logprob < 0) break;  // masked out: not an alternative
      t.top.push_back({ho[2 * cap + r * top + k], logprob});
    }
    result.sampled.push_back(std::move(t));
  }
  return result;
}

// Eager layouts are tight: one copy. A graph's layout is full width: the head,
// the used columns of its block-table rows, then the sampling pack.
absl::Status CudaExecutorImpl::Upload(const StepShape& shape, const kc::SamplingUploadOffsets& at) {
  if (shape.graph_batch == 0) {
    LOOM_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dev_in_, host_in_, at.end, cudaMemcpyHostToDevice, stream_));
    return absl::OkStatus();
  }
  const StepInputLayout l = Layout(shape);
  const kernels::StepUpload u =
      kernels::PlanStepUpload(l, shape.seqs_padded, shape.width, shape.used_width);
  LOOM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dev_in_, host_in_, u.head_bytes, cudaMemcpyHostToDevice, stream_));
  LOOM_CUDA_RETURN_IF_ERROR(
      cudaMemcpy2DAsync(dev_in_ + u.head_bytes, u.row_pitch_bytes, host_in_ + u.head_bytes,
                        u.row_pitch_bytes, u.row_bytes, u.rows, cudaMemcpyHostToDevice, stream_));
  const size_t pack = l.end * 4;
  if (at.end > pack) {
    LOOM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev_in_ + pack, host_in_ + pack, at.end - pack,
                                              cudaMemcpyHostToDevice, stream_));
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> CudaExecutorImpl::Execute(const StepPlan& plan) {
  if (plan.seqs.empty()) return StepResult{};
  absl::StatusOr<StepShape> shape = Plan(plan);
  if (!shape.ok()) return shape.status();
  absl::StatusOr<std::vector<int64_t>> sampled = PackInputs(plan, *shape);
  if (!sampled.ok()) return sampled.status();
  const auto num_rows = static_cast<int32_t>(sampled->size());
  // The sampling pack follows the int32 inputs in the same upload.
  absl::StatusOr<kc::SamplingUploadOffsets> at =
      kc::PackSamplingUpload(pack_, host_in_, Layout(*shape).end * 4, upload_bytes_);
  if (!at.ok()) return at.status();
  LOOM_RETURN_IF_ERROR(Upload(*shape, *at));
  if (shape->graph_batch > 0) {
    LOOM_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graphs_.at(shape->graph_batch), stream_));
  } else {
    LOOM_RETURN_IF_ERROR(forward_->Run(DeviceInputs(*shape, num_rows), stream_));
  }
  LOOM_RETURN_IF_ERROR(Sample(*at, num_rows));
  return Unpack(*sampled);
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
  LOOM_RETURN_IF_ERROR(impl->Init(weights));
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

}  // namespace loom
