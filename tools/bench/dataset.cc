#include "tools/bench/dataset.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace loom::bench {
namespace {

// Uniform integer in [lo, hi] from 64 random bits; the modulo bias is far
// below anything a benchmark can see, and unlike std distributions the result
// is the same with every standard library.
int64_t UniformInt(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

std::pair<int64_t, int64_t> LengthRange(int len, double ratio) {
  const auto lo = static_cast<int64_t>(std::floor(len * (1 - ratio)));
  const auto hi = static_cast<int64_t>(std::ceil(len * (1 + ratio)));
  return {std::max<int64_t>(lo, 1), std::max<int64_t>(hi, 1)};
}

}  // namespace

absl::StatusOr<std::vector<BenchPrompt>> RandomDataset(const RandomDatasetOptions& options) {
  if (options.num_prompts < 0 || options.input_len < 1 || options.output_len < 1) {
    return absl::InvalidArgumentError(
        "--num_prompts must be >= 0 and --input_len, --output_len >= 1");
  }
  if (!(options.range_ratio >= 0 && options.range_ratio < 1)) {
    return absl::InvalidArgumentError("--range_ratio must be in [0, 1)");
  }
  if (options.max_token_id <= options.min_token_id || options.min_token_id < 0) {
    return absl::InvalidArgumentError("empty token id range");
  }
  std::mt19937_64 rng(options.seed);
  const auto [in_lo, in_hi] = LengthRange(options.input_len, options.range_ratio);
  const auto [out_lo, out_hi] = LengthRange(options.output_len, options.range_ratio);
  std::vector<BenchPrompt> prompts(static_cast<size_t>(options.num_prompts));
  for (BenchPrompt& p : prompts) {
    const int64_t input_len = UniformInt(rng, in_lo, in_hi);
    p.output_len = static_cast<int32_t>(UniformInt(rng, out_lo, out_hi));
    p.token_ids.resize(static_cast<size_t>(input_len));
    for (int32_t& id : p.token_ids) {
      id = static_cast<int32_t>(UniformInt(rng, options.min_token_id, options.max_token_id - 1));
    }
  }
  return prompts;
}

absl::StatusOr<std::vector<BenchPrompt>> JsonlDataset(const std::string& path, int num_prompts,
                                                      int default_output_len) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the dataset ", path));
  std::vector<BenchPrompt> lines;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("prompt") || !j["prompt"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_no, ": expected {\"prompt\": \"...\", \"output_len\": N}"));
    }
    BenchPrompt p;
    p.text = j["prompt"].get<std::string>();
    p.output_len = default_output_len;
    if (j.contains("output_len")) {
      if (!j["output_len"].is_number_unsigned() || j["output_len"].get<uint64_t>() < 1 ||
          j["output_len"].get<uint64_t>() > (1u << 20)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line_no, ": output_len must be an integer >= 1"));
      }
      p.output_len = static_cast<int32_t>(j["output_len"].get<uint64_t>());
    }
    lines.push_back(std::move(p));
  }
  if (lines.empty()) return absl::InvalidArgumentError(absl::StrCat(path, " holds no prompts"));
  std::vector<BenchPrompt> prompts;
  prompts.reserve(static_cast<size_t>(std::max(num_prompts, 0)));
  for (int i = 0; i < num_prompts; ++i)
    prompts.push_back(lines[static_cast<size_t>(i) % lines.size()]);
  return prompts;
}

void SafeTokenRange(int32_t vocab_size, int32_t& min_token_id, int32_t& max_token_id) {
  // Skip the first and last 10% (at most 1,000 ids on either side is plenty
  // for every tokenizer in use, and small vocabularies keep most of their ids).
  const int32_t margin = std::min<int32_t>(vocab_size / 10, 1000);
  min_token_id = margin;
  max_token_id = std::max(vocab_size - margin, margin + 1);
}

}  // namespace loom::bench
