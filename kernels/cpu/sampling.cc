// The sampling recipe of kernels/sampling.h, one row per task. Only top_p needs
// an order over the candidates, and it finds its cut with a weighted
// quickselect, so no step sorts the whole vocabulary.
#include "kernels/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "base/check.h"
#include "kernels/parallel.h"
#include "kernels/philox.h"

namespace loom::kernels::cpu {
namespace {

void ApplyPenalties(const SamplingRowParams& r, float* logits, int32_t vocab) {
  if (r.repetition_penalty != 1.0f) {
    std::vector<int32_t> ids(r.token_ids, r.token_ids + r.num_tokens);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (int32_t id : ids) {
      LOOM_CHECK(id >= 0 && id < vocab);
      float& l = logits[id];
      l = l > 0.0f ? l / r.repetition_penalty : l * r.repetition_penalty;
    }
  }
  if (r.frequency_penalty != 0.0f || r.presence_penalty != 0.0f) {
    std::vector<int32_t> out(r.token_ids + r.num_prompt_tokens, r.token_ids + r.num_tokens);
    std::sort(out.begin(), out.end());
    for (size_t i = 0; i < out.size();) {
      size_t j = i;
      while (j < out.size() && out[j] == out[i]) ++j;
      LOOM_CHECK(out[i] >= 0 && out[i] < vocab);
      logits[out[i]] -= r.frequency_penalty * static_cast<float>(j - i) + r.presence_penalty;
      i = j;
    }
  }
  for (int32_t i = 0; i < r.num_bias; ++i) {
    LOOM_CHECK(r.bias_token_ids[i] >= 0 && r.bias_token_ids[i] < vocab);
    logits[r.bias_token_ids[i]] += r.bias_values[i];
  }
}

// Step 2's mask: -inf for every token the row does not allow. Whole words of
// allowed tokens are skipped.
void ApplyMask(const SamplingRowParams& r, float* logits, int32_t vocab) {
  for (int32_t begin = 0; begin < vocab; begin += 32) {
    const int32_t w = begin / 32;
    const uint32_t bits = w < r.allowed_words ? r.allowed_tokens[w] : 0u;
    if (bits == ~0u) continue;
    const int32_t end = std::min(vocab, begin + 32);
    for (int32_t t = begin; t < end; ++t) {
      if (((bits >> (t - begin)) & 1u) == 0) logits[t] = -std::numeric_limits<float>::infinity();
    }
  }
}

// The token of a masked row whose allowed tokens all have logit -inf (or that
// allows none): the lowest allowed id, else 0.
int32_t LowestAllowed(const SamplingRowParams& r, int32_t vocab) {
  for (int32_t t = 0; t < vocab; ++t) {
    if (TokenAllowed(r.allowed_tokens, r.allowed_words, t)) return t;
  }
  return 0;
}

float LogSumExp(const float* logits, int32_t vocab) {
  const float m = *std::max_element(logits, logits + vocab);
  double sum = 0.0;
  for (int32_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - m));
  return m + static_cast<float>(std::log(sum));
}

int32_t Argmax(const float* logits, int32_t vocab) {
  return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
}

int32_t Draw(const SamplingRowParams& r, const float* logits, int32_t vocab) {
  // Descending value, lower id first on ties.
  auto better = [](const float* v) {
    return [v](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); };
  };
  std::vector<int32_t> cand(vocab);
  std::iota(cand.begin(), cand.end(), 0);
  if (r.top_k > 0 && r.top_k < vocab) {
    std::nth_element(cand.begin(), cand.begin() + (r.top_k - 1), cand.end(), better(logits));
    // Every token tied with the k-th best stays.
    const float kth = logits[cand[r.top_k - 1]];
    cand.erase(std::partition(cand.begin() + r.top_k, cand.end(),
                              [&](int32_t id) { return logits[id] >= kth; }),
               cand.end());
  }
  float lmax = logits[cand[0]];
  for (int32_t id : cand) lmax = std::max(lmax, logits[id]);
  // prob[id] proportional to exp((l - lmax) / T); the best token has weight 1.
  std::vector<float> weight(vocab, 0.0f);
  for (int32_t id : cand) weight[id] = std::exp((logits[id] - lmax) / r.temperature);
  if (r.min_p > 0.0f) {
    std::erase_if(cand, [&](int32_t id) { return weight[id] < r.min_p; });
  }
  double total = 0.0;
  for (int32_t id : cand) total += weight[id];
  if (r.top_p < 1.0f) {
    // Weighted quickselect: the shortest best-first prefix of cand whose weight
    // reaches top_p * total, in expected linear time (no full sort).
    double need = r.top_p * total;
    auto lo = cand.begin();
    auto hi = cand.end();
    while (hi - lo > 64) {
      const auto mid = lo + (hi - lo) / 2;
      std::nth_element(lo, mid, hi, better(weight.data()));
      double upper = 0.0;
      for (auto it = lo; it != mid; ++it) upper += weight[*it];
      if (upper >= need) {
        hi = mid;
      } else {
        need -= upper;
        lo = mid;
      }
    }
    std::sort(lo, hi, better(weight.data()));
    double run = 0.0;
    while (lo != hi && run < need) run += weight[*lo++];
    if (lo == cand.begin()) ++lo;
    // Every token tied with the last kept one stays.
    const float cut = logits[*(lo - 1)];
    lo = std::partition(lo, cand.end(), [&](int32_t id) { return logits[id] >= cut; });
    cand.resize(lo - cand.begin());
  }
  // Walk the kept tokens in id order: drop the others' weight, then scan.
  std::vector<float> kept(vocab, 0.0f);
  total = 0.0;
  for (int32_t id : cand) {
    kept[id] = weight[id];
    total += weight[id];
  }
  const double u = static_cast<double>(PhiloxUniform(r.seed, r.step, 0)) * total;
  double run = 0.0;
  int32_t last = cand.front();
  for (int32_t id = 0; id < vocab; ++id) {
    if (kept[id] == 0.0f) continue;
    run += kept[id];
    last = id;
    if (run > u) return id;
  }
  return last;
}

void SampleRow(const SamplingBatchParams& p, int32_t row) {
  const SamplingRowParams& r = p.rows[row];
  if (r.chosen_token >= 0) {
    LOOM_CHECK_LT(r.num_logprobs, 0);
    p.out_token_ids[row] = r.chosen_token;
    return;
  }
  float* logits = p.logits + static_cast<int64_t>(row) * p.vocab_size;
  ApplyPenalties(r, logits, p.vocab_size);
  bool none_allowed = false;
  if (r.allowed_tokens != nullptr) {
    ApplyMask(r, logits, p.vocab_size);
    none_allowed =
        !(logits[Argmax(logits, p.vocab_size)] > -std::numeric_limits<float>::infinity());
  }
  const int32_t token = none_allowed                         ? LowestAllowed(r, p.vocab_size)
                        : IsGreedyTemperature(r.temperature) ? Argmax(logits, p.vocab_size)
                                                             : Draw(r, logits, p.vocab_size);
  p.out_token_ids[row] = token;
  if (r.num_logprobs < 0) return;
  LOOM_CHECK_LE(r.num_logprobs, p.max_top_logprobs);
  // A row with nothing allowed has no distribution: every logprob is -inf.
  const float lse =
      none_allowed ? std::numeric_limits<float>::infinity() : LogSumExp(logits, p.vocab_size);
  p.out_logprobs[row] = logits[token] - lse;
  if (r.num_logprobs == 0) return;
  std::vector<int32_t> ids(p.vocab_size);
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + r.num_logprobs, ids.end(),
                    [logits](int32_t a, int32_t b) {
                      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
                    });
  for (int32_t i = 0; i < r.num_logprobs; ++i) {
    p.out_top_ids[static_cast<int64_t>(row) * p.max_top_logprobs + i] = ids[i];
    p.out_top_logprobs[static_cast<int64_t>(row) * p.max_top_logprobs + i] = logits[ids[i]] - lse;
  }
}

}  // namespace

void Sample(const SamplingBatchParams& p, ParallelFor& pool) {
  pool.Run(p.num_rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) SampleRow(p, static_cast<int32_t>(row));
  });
}

}  // namespace loom::kernels::cpu
