// The cost of structured outputs in decoding: the default model on the CPU
// executor behind the engine, 16 streams kept in flight (a finished request
// is replaced at once), every stream constrained by a non-trivial schema
// (the recursive UI schema of the corpus) against the same run
// unconstrained. Both phases run in each iteration, one after the other, on
// one engine, so that they see the same machine.
//
//   step_ms_*        mean engine step (schedule with the masks, execute with
//                    the masked sampler, update with the matchers) over the
//                    steps that decoded exactly 16 streams
//   tok_s_*          generated tokens per second over the whole phase
//   overhead_pct     (constrained step - unconstrained step) / unconstrained
//                    step, the acceptance figure of issue 20 (<= 10%)
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "constraint/constraint_compiler.h"
#include "engine/engine.h"
#include "model/executor_factory.h"
#include "model/model.h"
#include "nlohmann/json.hpp"
#include "tests/constraint/model_vocabulary.h"
#include "tokenizer/tokenizer_detokenizer.h"

namespace loom {
namespace {

constexpr int32_t kStreams = 16;
constexpr int32_t kMaxTokens = 64;
constexpr int64_t kTokensPerPhase = kStreams * kMaxTokens;

// Step times of the steps that decoded exactly kStreams sequences.
class StepRecorder : public EngineObserver {
 public:
  void OnRequestFinished(FinishLabel, const Usage&, std::string_view) override {}
  void OnInterTokenLatencies(std::span<const double>) override {}
  void OnStep(double seconds, int32_t seqs, int32_t tokens) override {
    if (seqs != kStreams || tokens != kStreams) return;
    std::lock_guard lock(mu_);
    sum_ += seconds;
    ++count_;
  }
  double TakeMeanMs() {
    std::lock_guard lock(mu_);
    const double mean = count_ > 0 ? 1000.0 * sum_ / static_cast<double>(count_) : 0.0;
    sum_ = 0;
    count_ = 0;
    return mean;
  }

 private:
  std::mutex mu_;
  double sum_ = 0;
  int64_t count_ = 0;
};

// Counts a request's generated tokens and notes when it ends.
class CountingSink : public OutputSink {
 public:
  void Push(RequestOutput output) override {
    std::lock_guard lock(mu_);
    for (const SampleDelta& d : output.samples) tokens_ += static_cast<int64_t>(d.token_ids.size());
    if (output.finished) {
      finished_ = true;
      cv_.notify_all();
    }
  }
  void Wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return finished_; });
  }
  int64_t tokens() {
    std::lock_guard lock(mu_);
    return tokens_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t tokens_ = 0;
  bool finished_ = false;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Phase {
  double step_ms = 0;
  double tokens_per_second = 0;
};

// Keeps kStreams requests in flight until kTokensPerPhase tokens came out.
Phase RunPhase(Engine& engine, StepRecorder& recorder, const Tokenizer& tokenizer,
               const std::shared_ptr<const TokenConstraint>& constraint) {
  std::vector<std::shared_ptr<CountingSink>> sinks;
  int64_t submitted = 0;
  auto submit = [&]() {
    RequestParams p;
    p.prompt_token_ids = tokenizer.Encode(
        "Request " + std::to_string(submitted) + ": a user interface form as JSON.\n", false);
    p.stopping.max_tokens = kMaxTokens;
    p.stopping.ignore_eos = constraint == nullptr;
    p.sampling.temperature = 1.0f;
    p.sampling.seed = static_cast<uint64_t>(submitted++);
    p.constraint = constraint;
    sinks.push_back(std::make_shared<CountingSink>());
    (void)engine.Submit(std::move(p), sinks.back());
  };
  (void)recorder.TakeMeanMs();
  const auto start = std::chrono::steady_clock::now();
  for (int32_t i = 0; i < kStreams; ++i) submit();
  int64_t tokens = 0;
  for (size_t next = 0; tokens < kTokensPerPhase; ++next) {
    sinks[next]->Wait();
    tokens += sinks[next]->tokens();
    submit();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& sink : sinks) sink->Wait();
  return {recorder.TakeMeanMs(), static_cast<double>(tokens) / seconds};
}

void BM_DecodeOverhead16(benchmark::State& state) {
  ModelLoadOptions load;
  load.path = DefaultModelPath();
  absl::StatusOr<std::unique_ptr<LoadedModel>> model = LoadModel(load);
  if (!model.ok()) {
    state.SkipWithError("default model missing: run scripts/setup");
    return;
  }
  ExecutorOptions options;
  options.device = "cpu";
  options.kv_cache_bytes = int64_t{256} << 20;
  options.max_num_seqs = kStreams;
  auto executor = CreateExecutor(**model, options);
  if (!executor.ok()) {
    state.SkipWithError(std::string(executor.status().message()).c_str());
    return;
  }
  std::shared_ptr<const Tokenizer> tokenizer = std::move((*model)->tokenizer);
  auto compiler = *ConstraintCompiler::Create(testing::VocabularyOf(*tokenizer));
  const std::string schema =
      ReadFile(std::string(LOOM_SCHEMA_CORPUS_DIR) + "/47_ui_component.json");
  auto constraint = compiler->Compile(
      {ConstraintKind::kJsonSchema, nlohmann::json::parse(schema)["schema"].dump(), {}});
  if (!constraint.ok()) {
    state.SkipWithError(std::string(constraint.status().message()).c_str());
    return;
  }
  EngineConfig config;
  config.scheduler.max_num_seqs = kStreams;
  config.scheduler.max_num_batched_tokens = 1024;
  config.scheduler.max_queued_requests = 4 * kStreams;
  config.scheduler.eos_token_ids = tokenizer->eos_ids();
  Engine engine(config, *std::move(executor), std::make_shared<TokenizerDetokenizer>(tokenizer));
  StepRecorder recorder;
  engine.SetObserver(&recorder);
  if (!engine.Start().ok()) {
    state.SkipWithError("engine failed to start");
    return;
  }
  Phase plain, constrained;
  for (auto _ : state) {
    const Phase p = RunPhase(engine, recorder, *tokenizer, nullptr);
    const Phase c = RunPhase(engine, recorder, *tokenizer, *constraint);
    plain.step_ms += p.step_ms;
    plain.tokens_per_second += p.tokens_per_second;
    constrained.step_ms += c.step_ms;
    constrained.tokens_per_second += c.tokens_per_second;
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["step_ms_plain"] = plain.step_ms / n;
  state.counters["step_ms_constrained"] = constrained.step_ms / n;
  state.counters["tok_s_plain"] = plain.tokens_per_second / n;
  state.counters["tok_s_constrained"] = constrained.tokens_per_second / n;
  state.counters["overhead_pct"] = 100.0 * (constrained.step_ms - plain.step_ms) / plain.step_ms;
  engine.Shutdown();
}
BENCHMARK(BM_DecodeOverhead16)->Iterations(3)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
}  // namespace loom

BENCHMARK_MAIN();
