#include "tools/bench/bench.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/bench/arrivals.h"
#include "tools/bench/backend.h"
#include "tools/bench/bench_stats.h"
#include "tools/bench/dataset.h"
#include "tools/bench/report.h"
#include "tools/bench/runner.h"

namespace loom::bench {
namespace {

absl::StatusOr<std::vector<BenchPrompt>> MakeDataset(const BenchOptions& options,
                                                     const TargetInfo& info) {
  if (options.dataset != "random") {
    return JsonlDataset(options.dataset, options.num_prompts, options.output_len);
  }
  RandomDatasetOptions random;
  random.num_prompts = options.num_prompts;
  random.input_len = options.input_len;
  random.output_len = options.output_len;
  random.range_ratio = options.range_ratio;
  random.seed = options.seed;
  const int32_t vocab_size = options.vocab_size > 0 ? options.vocab_size : info.vocab_size;
  if (vocab_size <= 0) {
    return absl::InvalidArgumentError(
        "the server does not report its vocabulary size, which the random dataset needs: "
        "pass --vocab_size, or a JSONL --dataset");
  }
  SafeTokenRange(vocab_size, random.min_token_id, random.max_token_id);
  absl::StatusOr<std::vector<BenchPrompt>> prompts = RandomDataset(random);
  if (!prompts.ok()) return prompts.status();
  // Fit every request into the context: the prompt yields to the output.
  const int64_t max_len = info.max_model_len;
  if (max_len <= 1) return prompts;
  for (BenchPrompt& p : *prompts) {
    p.output_len = static_cast<int32_t>(std::min<int64_t>(p.output_len, max_len - 1));
    const auto room = static_cast<size_t>(max_len - p.output_len);
    if (p.token_ids.size() > room) p.token_ids.resize(room);
  }
  return prompts;
}

// Runs prompts[i] with max_tokens[i] at arrivals[i].
RunResult Run(Backend& backend, const std::vector<BenchPrompt>& prompts,
              const std::vector<int32_t>& max_tokens, const std::vector<double>& arrivals,
              int max_concurrency, const std::string& id_prefix) {
  std::vector<std::string> ids(prompts.size());
  auto start = [&](size_t i, RequestDone done) {
    ids[i] = absl::StrCat(id_prefix, i);
    backend.Start(prompts[i], ids[i], max_tokens[i], std::move(done));
  };
  return RunRequests(prompts.size(), start, arrivals, max_concurrency);
}

}  // namespace

absl::StatusOr<BackendKind> ParseBackend(absl::string_view name) {
  if (name == "loom") return BackendKind::kLoom;
  if (name == "openai") return BackendKind::kOpenAi;
  if (name == "openai-chat") return BackendKind::kOpenAiChat;
  return absl::InvalidArgumentError(
      absl::StrCat("--backend=", name, ": expected loom, openai or openai-chat"));
}

int Bench(Backend& backend, const BenchOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<Slo> slo = ParseSlo(options.slo);
  if (!slo.ok()) {
    err << slo.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<TargetInfo> info = backend.Info();
  if (!info.ok()) {
    err << info.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::vector<BenchPrompt>> prompts = MakeDataset(options, *info);
  if (!prompts.ok()) {
    err << prompts.status().message() << "\n";
    return 2;
  }
  if (absl::Status prepared = backend.Prepare(*prompts); !prepared.ok()) {
    err << prepared.message() << "\n";
    return 1;
  }
  const std::string id_prefix = absl::StrCat("bench-", options.seed, "-");
  if (!prompts->empty()) {
    // One short request first, as vLLM does: a wrong target or dataset fails
    // here instead of in every request of the run.
    RunResult probe = Run(backend, {prompts->front()}, {1}, {0.0}, 1, id_prefix + "probe-");
    if (!probe.errors.empty()) {
      err << "the test request failed: " << probe.errors.begin()->first << "\n";
      return 1;
    }
  }
  err << absl::StrFormat("%s: %d requests, rate %g/s, max concurrency %d, model %s\n",
                         options.dataset, prompts->size(), options.request_rate,
                         options.max_concurrency, info->model);
  std::vector<int32_t> max_tokens;
  for (const BenchPrompt& p : *prompts) max_tokens.push_back(p.output_len);
  const std::vector<double> arrivals =
      PoissonArrivals(static_cast<int>(prompts->size()), options.request_rate, options.seed);
  RunResult result =
      Run(backend, *prompts, max_tokens, arrivals, options.max_concurrency, id_prefix);
  for (const auto& [error, count] : result.errors) err << count << " x " << error << "\n";

  const BenchMetrics metrics = ComputeMetrics(result.records, result.duration, *slo);
  out << FormatTable(metrics, !options.slo.empty());
  if (!options.json_path.empty()) {
    RunConfig config{.backend = options.backend_name,
                     .model_id = info->model,
                     .num_prompts = options.num_prompts,
                     .request_rate = options.request_rate,
                     .max_concurrency = options.max_concurrency,
                     .dataset = options.dataset,
                     .seed = options.seed};
    std::ofstream file(options.json_path);
    file << ToJson(metrics, config);
    if (!file.flush()) {
      err << "cannot write " << options.json_path << "\n";
      return 1;
    }
  }
  return metrics.failed == 0 ? 0 : 1;
}

}  // namespace loom::bench
