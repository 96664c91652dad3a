#include "tools/bench/bench.h"

#include <algorithm>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "loom/v1/generation.grpc.pb.h"
#include "tools/bench/arrivals.h"
#include "tools/bench/bench_stats.h"
#include "tools/bench/dataset.h"
#include "tools/bench/report.h"
#include "tools/bench/runner.h"

namespace loom::bench {
namespace {

constexpr absl::Duration kInfoTimeout = absl::Seconds(30);

absl::StatusOr<v1::ModelInfo> GetModelInfo(v1::GenerationService::Stub& stub) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kInfoTimeout));
  v1::ModelInfo info;
  const grpc::Status status = stub.GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("GetModelInfo failed: ", status.error_code(), " ", status.error_message()));
  }
  return info;
}

absl::StatusOr<std::vector<BenchPrompt>> MakeDataset(const BenchOptions& options,
                                                     const v1::ModelInfo& info) {
  if (options.dataset != "random") {
    return JsonlDataset(options.dataset, options.num_prompts, options.output_len);
  }
  RandomDatasetOptions random;
  random.num_prompts = options.num_prompts;
  random.input_len = options.input_len;
  random.output_len = options.output_len;
  random.range_ratio = options.range_ratio;
  random.seed = options.seed;
  SafeTokenRange(static_cast<int32_t>(info.vocab_size()), random.min_token_id, random.max_token_id);
  absl::StatusOr<std::vector<BenchPrompt>> prompts = RandomDataset(random);
  if (!prompts.ok()) return prompts.status();
  // Fit every request into the context: the prompt yields to the output.
  const int64_t max_len = info.max_model_len();
  for (BenchPrompt& p : *prompts) {
    p.output_len = static_cast<int32_t>(std::min<int64_t>(p.output_len, max_len - 1));
    const auto room = static_cast<size_t>(max_len - p.output_len);
    if (p.token_ids.size() > room) p.token_ids.resize(room);
  }
  return prompts;
}

v1::GenerateRequest ToRequest(const BenchPrompt& prompt, size_t index, uint64_t seed) {
  v1::GenerateRequest r;
  r.set_request_id(absl::StrCat("bench-", seed, "-", index));
  if (prompt.token_ids.empty()) {
    r.set_prompt(prompt.text);
  } else {
    r.mutable_prompt_token_ids()->mutable_ids()->Add(prompt.token_ids.begin(),
                                                     prompt.token_ids.end());
    // The ids are the whole prompt: no BOS in front, so lengths are exact.
    r.set_add_special_tokens(false);
  }
  r.mutable_sampling()->set_temperature(0);
  r.mutable_stopping()->set_max_tokens(static_cast<uint32_t>(prompt.output_len));
  r.mutable_stopping()->set_ignore_eos(true);
  return r;
}

}  // namespace

int Bench(const std::shared_ptr<grpc::Channel>& channel, const BenchOptions& options,
          std::ostream& out, std::ostream& err) {
  absl::StatusOr<Slo> slo = ParseSlo(options.slo);
  if (!slo.ok()) {
    err << slo.status().message() << "\n";
    return 2;
  }
  auto stub = v1::GenerationService::NewStub(channel);
  absl::StatusOr<v1::ModelInfo> info = GetModelInfo(*stub);
  if (!info.ok()) {
    err << info.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::vector<BenchPrompt>> prompts = MakeDataset(options, *info);
  if (!prompts.ok()) {
    err << prompts.status().message() << "\n";
    return 2;
  }
  std::vector<v1::GenerateRequest> requests;
  for (size_t i = 0; i < prompts->size(); ++i) {
    requests.push_back(ToRequest((*prompts)[i], i, options.seed));
  }
  if (!requests.empty()) {
    // One short request first, as vLLM does: a wrong target or dataset fails
    // here instead of in every request of the run.
    v1::GenerateRequest probe = requests.front();
    probe.set_request_id(absl::StrCat(probe.request_id(), "-probe"));
    probe.mutable_stopping()->set_max_tokens(1);
    RunResult probe_result = RunRequests(*stub, {probe}, {0.0}, 1);
    if (!probe_result.errors.empty()) {
      err << "the test request failed: " << probe_result.errors.begin()->first << "\n";
      return 1;
    }
  }
  err << absl::StrFormat("%s: %d requests, rate %g/s, max concurrency %d, model %s\n",
                         options.dataset, requests.size(), options.request_rate,
                         options.max_concurrency, info->name());
  const std::vector<double> arrivals =
      PoissonArrivals(static_cast<int>(requests.size()), options.request_rate, options.seed);
  RunResult result = RunRequests(*stub, requests, arrivals, options.max_concurrency);
  for (const auto& [error, count] : result.errors) err << count << " x " << error << "\n";

  const BenchMetrics metrics = ComputeMetrics(result.records, result.duration, *slo);
  out << FormatTable(metrics, !options.slo.empty());
  if (!options.json_path.empty()) {
    RunConfig config{.model_id = info->name(),
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
