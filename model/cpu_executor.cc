#include "model/cpu_executor.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "model/kv_cache_sizing.h"

namespace loom {
namespace {

constexpr int64_t kMaxDefaultKvBytes = int64_t{4} << 30;

int64_t AvailableBytes() {
  return static_cast<int64_t>(sysconf(_SC_AVPHYS_PAGES)) * sysconf(_SC_PAGESIZE);
}

// The pool reserves address space only: its pages are committed as they are
// first written (base/zero_pages.h), so a generous default costs no memory
// until the KV is in use, and a quarter of the free RAM leaves the rest to
// the weights and to other processes.
int64_t DefaultKvBudget(int64_t available) { return std::min(kMaxDefaultKvBytes, available / 4); }

std::string GiB(int64_t bytes) {
  return absl::StrFormat("%.2f GiB", static_cast<double>(bytes) / (int64_t{1} << 30));
}

// The raw model logprob of target and the top k alternatives (best first,
// lower id first on ties) from one row of logits: log_softmax, nothing else.
PromptTokenLogprob ScoreRow(const float* logits, int32_t vocab_size, int32_t target, int32_t k,
                            std::vector<int32_t>& order) {
  const float max = *std::max_element(logits, logits + vocab_size);
  double sum = 0;
  for (int32_t v = 0; v < vocab_size; ++v) sum += std::exp(static_cast<double>(logits[v] - max));
  const double lse = static_cast<double>(max) + std::log(sum);
  PromptTokenLogprob out;
  out.token_id = target;
  out.logprob = static_cast<float>(logits[target] - lse);
  out.rank = 1 + static_cast<int32_t>(std::count_if(logits, logits + vocab_size,
                                                    [&](float x) { return x > logits[target]; }));
  k = std::min(k, vocab_size);
  if (k <= 0) return out;
  order.resize(vocab_size);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [logits](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  out.top.reserve(k);
  for (int32_t i = 0; i < k; ++i) {
    out.top.push_back({order[i], static_cast<float>(logits[order[i]] - lse)});
  }
  return out;
}

}  // namespace

CpuExecutor::CpuExecutor(const ModelConfig& config, int32_t threads, LinearDType dtype)
    : config_(config), dtype_(dtype), pool_(std::make_unique<kernels::cpu::ThreadPool>(threads)) {}

absl::StatusOr<std::unique_ptr<CpuExecutor>> CpuExecutor::Create(const LoadedModel& model,
                                                                 const ExecutorOptions& options) {
  LinearDType dtype;
  // auto: linear weights stored in ggml blocks stay so, the others bfloat16.
  const bool keep_quantized = options.dtype == "auto";
  if (options.dtype == "auto" || options.dtype == "bfloat16") {
    dtype = LinearDType::kBFloat16;
  } else if (options.dtype == "float32") {
    dtype = LinearDType::kFloat32;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "dtype ", options.dtype, " is not supported on cpu (auto, bfloat16, float32)"));
  }
  const std::optional<XPrecision> prefill = XPrecisionNamed(options.cpu_prefill_precision);
  const std::optional<XPrecision> decode = XPrecisionNamed(options.cpu_decode_precision);
  for (const auto& [name, value, parsed] :
       {std::tuple{"cpu_prefill_precision", &options.cpu_prefill_precision, prefill},
        std::tuple{"cpu_decode_precision", &options.cpu_decode_precision, decode}}) {
    if (!parsed.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " ", *value, " is not supported (float32, int16, int8)"));
    }
  }
  if (options.cpu_greedy_head != "screened" && options.cpu_greedy_head != "full") {
    return absl::InvalidArgumentError(absl::StrCat("cpu_greedy_head ", options.cpu_greedy_head,
                                                   " is not supported (screened, full)"));
  }
  if (options.block_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("block_size ", options.block_size));
  }
  const ModelConfig& c = model.config;
  if (c.num_heads <= 0 || c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0 ||
      c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported head layout: ", c.num_heads,
                                                   " heads, ", c.num_kv_heads, " kv heads, dim ",
                                                   c.head_dim));
  }
  std::unique_ptr<CpuExecutor> e(new CpuExecutor(c, options.threads, dtype));
  absl::StatusOr<LlamaWeights> weights =
      LoadLlamaWeights(c, *model.weights, dtype, *e->pool_, keep_quantized);
  if (!weights.ok()) return weights.status();
  e->weights_ = *std::move(weights);
  e->forward_ = std::make_unique<LlamaForward>(e->config_, e->weights_, *prefill, *decode);
  if (options.cpu_greedy_head == "screened") e->forward_->ScreenGreedyHead(*e->pool_);
  e->sampling_limits_ = {.vocab_size = c.vocab_size, .max_logit_bias = options.max_logit_bias};
  e->max_model_len_ = options.max_model_len > 0 ? options.max_model_len : model.max_model_len;
  if (e->max_model_len_ <= 0) e->max_model_len_ = c.max_position_embeddings;
  if (e->max_model_len_ <= 0) {
    return absl::InvalidArgumentError("max_model_len unknown: set it in the options");
  }

  e->kv_layout_ = KvLayoutOf(c);
  for (const KvCacheGroup& group : e->kv_layout_.cache.groups) {
    e->kv_sliding_entry_.insert(e->kv_sliding_entry_.end(), group.num_pages,
                                group.sliding_window > 0);
  }
  const KvCacheSpec spec{e->kv_layout_.layers_per_page,
                         c.num_kv_heads,
                         c.head_dim,
                         options.block_size,
                         static_cast<int32_t>(sizeof(float)),
                         {}};
  const int64_t available = AvailableBytes();
  const int64_t budget =
      options.kv_cache_bytes > 0 ? options.kv_cache_bytes : DefaultKvBudget(available);
  const int32_t num_blocks = NumBlocksForBudget(spec, budget);
  if (num_blocks < e->kv_layout_.cache.stride() + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache budget of ", budget, " bytes holds no usable logical block"));
  }
  e->kv_.num_blocks = num_blocks;
  e->kv_.block_size = options.block_size;
  const size_t layer_elems =
      static_cast<size_t>(num_blocks) * c.num_kv_heads * options.block_size * c.head_dim;
  e->kv_.Allocate(e->kv_layout_.layers_per_page, layer_elems);
  e->kv_pool_ =
      absl::StrCat("float32 KV pool of ", GiB(budget), ", ",
                   options.kv_cache_bytes > 0
                       ? "--kv_cache_bytes"
                       : absl::StrCat("min(4 GiB, a quarter of the ", GiB(available), " free)"),
                   "; pages committed on first write");
  return e;
}

namespace {

// "linear weights in q4_k, q6_k blocks" for the weights kept in ggml blocks,
// in the order first met; empty when none are.
std::string QuantizedFormats(const LlamaWeights& w) {
  std::vector<std::string> names;
  auto add = [&](const LinearWeight& linear) {
    if (linear.dtype != LinearDType::kQuantized) return;
    for (const QuantRows& part : linear.parts) {
      std::string name = kernels::cpu::QuantTypeName(part.type);
      if (std::ranges::find(names, name) == names.end()) names.push_back(std::move(name));
    }
  };
  for (const LlamaLayerWeights& layer : w.layers) {
    for (const LinearWeight* linear : {&layer.qkv, &layer.o_proj, &layer.gate_up, &layer.down}) {
      add(*linear);
    }
  }
  add(w.head());
  if (names.empty()) return "";
  return absl::StrCat("linear weights in ", absl::StrJoin(names, ", "), " blocks");
}

}  // namespace

ExecutorGeometry CpuExecutor::Geometry() const {
  ExecutorGeometry g;
  g.num_blocks = kv_.num_blocks;
  g.block_size = kv_.block_size;
  g.max_model_len = max_model_len_;
  g.device = "cpu";
  g.prompt_logprobs = true;
  g.vocab_size = config_.vocab_size;
  g.kv_layout = kv_layout_.cache;
  g.kv_pool = kv_pool_;
  // The conversion dtype: with auto it names the weights that are not kept
  // in ggml blocks (weights() tells which are).
  g.dtype = LinearDTypeName(dtype_);
  g.weight_formats = QuantizedFormats(weights_);
  return g;
}

absl::Status CpuExecutor::CheckTable(const ScheduledSeq& seq) const {
  const int32_t stride = kv_layout_.cache.stride();
  const int32_t bs = kv_.block_size;
  const int32_t end = seq.num_computed_tokens + seq.num_scheduled_tokens;
  const int64_t num_blocks = static_cast<int64_t>(seq.block_table.size()) / stride;
  if (seq.num_scheduled_tokens <= 0 || seq.num_computed_tokens < 0 ||
      end > static_cast<int32_t>(seq.all_token_ids.size()) || end > max_model_len_ ||
      seq.block_table.size() % stride != 0 || num_blocks * bs < end) {
    return absl::InternalError(absl::StrCat(
        "seq ", seq.seq_id, ": bad slice [", seq.num_computed_tokens, ", ", end, ") of ",
        seq.all_token_ids.size(), " tokens with ", seq.block_table.size(), " block entries"));
  }
  // Sliding pages may be the null block where no query of this step looks.
  const int32_t window = config_.sliding_window;
  const int64_t first_needed = window > 0 && seq.num_computed_tokens >= window
                                   ? (seq.num_computed_tokens - window + 1) / bs
                                   : 0;
  for (size_t i = 0; i < seq.block_table.size(); ++i) {
    const int32_t block = seq.block_table[i];
    const bool may_be_null =
        static_cast<int64_t>(i / stride) < first_needed && kv_sliding_entry_[i % stride];
    if (block < 0 || block >= kv_.num_blocks || (block == 0 && !may_be_null)) {
      return absl::InternalError(
          absl::StrCat("seq ", seq.seq_id, ": block id ", block, " at table entry ", i));
    }
  }
  return absl::OkStatus();
}

absl::Status CpuExecutor::BuildBatch(const StepPlan& plan) {
  batch_.Clear();
  sample_seqs_.clear();
  sample_masks_.clear();
  prompt_rows_.clear();
  const int32_t stride = kv_layout_.cache.stride();
  const int32_t bs = kv_.block_size;
  int32_t max_entries = 0, num_tokens = 0;
  for (const ScheduledSeq& seq : plan.seqs) {
    LOOM_RETURN_IF_ERROR(CheckTable(seq));
    max_entries = std::max(max_entries, static_cast<int32_t>(seq.block_table.size()));
    num_tokens += seq.num_scheduled_tokens;
  }
  const auto num_seqs = static_cast<int32_t>(plan.seqs.size());
  batch_.num_entries = stride;
  batch_.max_blocks_per_seq = max_entries;
  batch_.block_tables.assign(static_cast<size_t>(num_seqs) * max_entries, 0);
  batch_.slot_mapping.resize(static_cast<size_t>(stride) * num_tokens);
  for (int32_t s = 0; s < num_seqs; ++s) {
    const ScheduledSeq& seq = plan.seqs[s];
    const int32_t end = seq.num_computed_tokens + seq.num_scheduled_tokens;
    std::copy(seq.block_table.begin(), seq.block_table.end(),
              batch_.block_tables.begin() + static_cast<size_t>(s) * max_entries);
    for (int32_t p = seq.num_computed_tokens; p < end; ++p) {
      const int32_t token = seq.all_token_ids[p];
      if (token < 0 || token >= config_.vocab_size) {
        return absl::InternalError(absl::StrCat("seq ", seq.seq_id, ": token id ", token));
      }
      const int32_t row = batch_.num_tokens();
      for (int32_t entry = 0; entry < stride; ++entry) {
        batch_.slot_mapping[static_cast<size_t>(entry) * num_tokens + row] =
            seq.block_table[(p / bs) * stride + entry] * bs + p % bs;
      }
      batch_.token_ids.push_back(token);
      batch_.positions.push_back(p);
    }
    if (seq.num_prompt_logprobs >= 0)
      AddPromptRows(seq, batch_.num_tokens() - seq.num_scheduled_tokens);
    batch_.query_start.push_back(batch_.num_tokens());
    batch_.context_lens.push_back(end);
    if (seq.sample) {
      if (seq.sampling == nullptr || end != static_cast<int32_t>(seq.all_token_ids.size())) {
        return absl::InternalError(
            absl::StrCat("seq ", seq.seq_id, ": samples without params or before its end"));
      }
      batch_.logit_rows.push_back(batch_.num_tokens() - 1);
      sample_seqs_.push_back(&seq);
      const uint32_t* mask =
          plan.token_masks.row_of_seq.empty() ? nullptr : plan.token_masks.RowOf(s);
      if (!plan.token_masks.row_of_seq.empty()) sample_masks_.push_back(mask);
      batch_.argmax_only.push_back(NeedsOnlyArgmax(*seq.sampling, mask != nullptr) ? 1 : 0);
    }
  }
  // After every sampling row, so that the sampler sees its rows first.
  for (const PromptRow& row : prompt_rows_) {
    batch_.logit_rows.push_back(row.token_row);
    batch_.argmax_only.push_back(0);
  }
  return absl::OkStatus();
}

void CpuExecutor::AddPromptRows(const ScheduledSeq& seq, int32_t first_row) {
  const int32_t end =
      std::min(seq.num_computed_tokens + seq.num_scheduled_tokens, seq.num_prompt_tokens - 1);
  for (int32_t p = seq.num_computed_tokens; p < end; ++p) {
    prompt_rows_.push_back({&seq, p, first_row + (p - seq.num_computed_tokens)});
  }
}

std::vector<PromptLogprobsChunk> CpuExecutor::ScorePromptRows() const {
  std::vector<PromptLogprobsChunk> chunks;
  std::vector<int32_t> order;
  const int32_t vocab = config_.vocab_size;
  const size_t first = sample_seqs_.size();
  for (size_t r = 0; r < prompt_rows_.size(); ++r) {
    const PromptRow& row = prompt_rows_[r];
    if (chunks.empty() || chunks.back().seq_id != row.seq->seq_id) {
      chunks.push_back(
          {.seq_id = row.seq->seq_id, .first_position = row.position + 1, .entries = {}});
    }
    const float* logits = &logits_[(first + r) * static_cast<size_t>(vocab)];
    chunks.back().entries.push_back(ScoreRow(logits, vocab,
                                             row.seq->all_token_ids[row.position + 1],
                                             row.seq->num_prompt_logprobs, order));
  }
  return chunks;
}

absl::StatusOr<StepResult> CpuExecutor::Execute(const StepPlan& plan) {
  StepResult result;
  if (plan.seqs.empty()) return result;
  LOOM_RETURN_IF_ERROR(BuildBatch(plan));
  forward_->Run(batch_, kv_, *pool_, logits_, [this] { NoteProgress(); });
  if (!prompt_rows_.empty()) {
    result.prompt_logprobs = ScorePromptRows();
    logits_.resize(sample_seqs_.size() * static_cast<size_t>(config_.vocab_size));
  }
  if (!sample_seqs_.empty()) {
    LOOM_ASSIGN_OR_RETURN(
        result.sampled, sampler_.Sample(sample_seqs_, sample_masks_, plan.token_masks.words_per_row,
                                        logits_, sampling_limits_, *pool_, forward_->argmax()));
  }
  return result;
}

}  // namespace loom
