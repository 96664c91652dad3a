// The cost of structured outputs in decoding: the default model on the CPU
// executor behind the engine, 16 streams kept in flight (a finished request
// is replaced at once), every stream constrained by a non-trivial schema
// (the recursive UI schema of the corpus), against the same run
// unconstrained: the same requests (prompts, seeds) with the output lengths
// the constrained ones had. Both phases run in each iteration, one after the
// other (in alternating order) on one engine, so that they see the same
// machine.
//
//   step_ms_*            mean engine step (schedule with the masks, execute
//                        with the masked sampler, update with the matchers)
//                        over the steps that decoded exactly 16 streams
//   tok_s_*              generated tokens per second over the whole phase
//   overhead_pct         (constrained step - unconstrained step) /
//                        unconstrained step
//   throughput_loss_pct  (unconstrained - constrained tokens/s) /
//                        unconstrained tokens/s: the acceptance figure of
//                        issue 20 (<= 10%)
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

// Requests in flight: each sink counts its request's tokens and tells the
// pool when the request ends, so that the loop can replace it at once.
class Pool {
 public:
  void Finished(int64_t tokens) {
    std::lock_guard lock(mu_);
    tokens_ += tokens;
    ++finished_;
    cv_.notify_all();
  }
  // Waits until more than `seen` requests have finished; returns how many have.
  int64_t WaitPast(int64_t seen) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return finished_ > seen; });
    return finished_;
  }
  int64_t tokens() {
    std::lock_guard lock(mu_);
    return tokens_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t tokens_ = 0;
  int64_t finished_ = 0;
};

class CountingSink : public OutputSink {
 public:
  CountingSink(Pool* pool, int64_t* length) : pool_(pool), length_(length) {}
  void Push(RequestOutput output) override {
    for (const SampleDelta& d : output.samples) tokens_ += static_cast<int64_t>(d.token_ids.size());
    if (!output.finished) return;
    *length_ = tokens_;
    pool_->Finished(tokens_);
  }

 private:
  Pool* pool_;
  int64_t* length_;
  int64_t tokens_ = 0;
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

// Keeps kStreams requests in flight, each replaced as soon as it ends. With a
// constraint, requests are submitted until kTokensPerPhase tokens came out
// and `lengths` receives each one's output length; without, the same
// requests (same prompts and seeds) run with exactly those lengths, so that
// both phases do the same work but for the constraint.
Phase RunPhase(Engine& engine, StepRecorder& recorder, const Tokenizer& tokenizer,
               const std::shared_ptr<const TokenConstraint>& constraint,
               std::vector<int64_t>& lengths) {
  Pool pool;
  const bool replay = constraint == nullptr;
  std::vector<int64_t> got(replay ? lengths.size() : 4096, 0);
  size_t submitted = 0;
  auto submit = [&]() {
    RequestParams p;
    p.prompt_token_ids = tokenizer.Encode(
        "Request " + std::to_string(submitted) + ": a user interface form as JSON.\n", false);
    p.stopping.max_tokens = replay ? static_cast<int32_t>(lengths[submitted]) : kMaxTokens;
    p.stopping.ignore_eos = replay;
    p.sampling.temperature = 1.0f;
    p.sampling.seed = static_cast<uint64_t>(submitted);
    p.constraint = constraint;
    (void)engine.Submit(std::move(p), std::make_shared<CountingSink>(&pool, &got[submitted]));
    ++submitted;
  };
  auto more = [&]() {
    return replay ? submitted < lengths.size()
                  : pool.tokens() < kTokensPerPhase && submitted < got.size();
  };
  (void)recorder.TakeMeanMs();
  const auto start = std::chrono::steady_clock::now();
  for (int32_t i = 0; i < kStreams && more(); ++i) submit();
  int64_t finished = 0;
  while (finished < static_cast<int64_t>(submitted)) {
    const int64_t now_finished = pool.WaitPast(finished);
    for (; finished < now_finished; ++finished) {
      if (more()) submit();
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!replay) lengths.assign(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(submitted));
  return {recorder.TakeMeanMs(), static_cast<double>(pool.tokens()) / seconds};
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
  std::vector<int64_t> lengths;
  bool constrained_first = true;
  for (auto _ : state) {
    // The order alternates, so that a drift in the machine's load weighs on
    // both phases alike; the seeded requests repeat their lengths.
    Phase c, p;
    if (constrained_first) {
      c = RunPhase(engine, recorder, *tokenizer, *constraint, lengths);
      p = RunPhase(engine, recorder, *tokenizer, nullptr, lengths);
    } else {
      p = RunPhase(engine, recorder, *tokenizer, nullptr, lengths);
      c = RunPhase(engine, recorder, *tokenizer, *constraint, lengths);
    }
    constrained_first = !constrained_first;
    plain.step_ms += p.step_ms;
    plain.tokens_per_second += p.tokens_per_second;
    constrained.step_ms += c.step_ms;
    constrained.tokens_per_second += c.tokens_per_second;
  }
  const auto n = static_cast<double>(state.iterations());
  int64_t total = 0;
  for (int64_t len : lengths) total += len;
  state.counters["requests"] = static_cast<double>(lengths.size());
  state.counters["mean_len"] = static_cast<double>(total) / static_cast<double>(lengths.size());
  state.counters["step_ms_plain"] = plain.step_ms / n;
  state.counters["step_ms_constrained"] = constrained.step_ms / n;
  state.counters["tok_s_plain"] = plain.tokens_per_second / n;
  state.counters["tok_s_constrained"] = constrained.tokens_per_second / n;
  state.counters["overhead_pct"] = 100.0 * (constrained.step_ms - plain.step_ms) / plain.step_ms;
  state.counters["throughput_loss_pct"] =
      100.0 * (plain.tokens_per_second - constrained.tokens_per_second) / plain.tokens_per_second;
  engine.Shutdown();
}
BENCHMARK(BM_DecodeOverhead16)->Iterations(4)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
}  // namespace loom

BENCHMARK_MAIN();
