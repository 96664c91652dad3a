// Constraint compile time and mask time against the default model's
// vocabulary (49,152 tokens), on the schema corpus of tests/constraint/schemas.
//
//   BM_CompileCorpus   every corpus schema compiled with an empty cache; the
//                      counters give the median, 95th percentile and maximum
//                      over the schemas (each schema's best of the runs) and
//                      p95 / 50 ms, the acceptance limit of issue 20.
//   BM_CompileCached   the same schema again: a cache hit, per call.
//   BM_MaskPerStep     FillNextTokenBitmask per sequence per step, along the
//                      tokenization of every good document of the corpus
//                      (compact and indented where the schema allows both),
//                      next to the floor of copying one whole bitmask.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "constraint/constraint_compiler.h"
#include "model/model.h"
#include "tests/constraint/model_vocabulary.h"
#include "tests/constraint/schema_corpus.h"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

struct Fixture {
  std::unique_ptr<Tokenizer> tokenizer;
  ConstraintVocabulary vocabulary;
  std::vector<testing::SchemaCase> corpus;
};

const Fixture* Load() {
  static const Fixture* fixture = []() -> const Fixture* {
    absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
        testing::LoadGgufTokenizer(DefaultModelPath());
    if (!tokenizer.ok()) return nullptr;
    auto* f = new Fixture();
    f->tokenizer = *std::move(tokenizer);
    f->vocabulary = testing::VocabularyOf(*f->tokenizer);
    f->corpus = testing::LoadSchemaCorpus(LOOM_SCHEMA_CORPUS_DIR);
    return f;
  }();
  return fixture;
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

void BM_CompileCorpus(benchmark::State& state) {
  const Fixture* f = Load();
  if (f == nullptr) {
    state.SkipWithError("default model missing: run scripts/setup");
    return;
  }
  auto compiler = *ConstraintCompiler::Create(f->vocabulary, ConstraintLimits{.cache_capacity = 0});
  std::vector<double> best_ms(f->corpus.size(), 1e30);
  for (auto _ : state) {
    for (size_t i = 0; i < f->corpus.size(); ++i) {
      const auto start = Clock::now();
      auto compiled = compiler->Compile({ConstraintKind::kJsonSchema, f->corpus[i].schema, {}});
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      if (!compiled.ok()) {
        state.SkipWithError(std::string(compiled.status().message()).c_str());
        return;
      }
      best_ms[i] = std::min(best_ms[i], ms);
    }
  }
  state.counters["schemas"] = static_cast<double>(f->corpus.size());
  state.counters["p50_ms"] = Percentile(best_ms, 0.5);
  state.counters["p95_ms"] = Percentile(best_ms, 0.95);
  state.counters["max_ms"] = Percentile(best_ms, 1.0);
  state.counters["p95_over_50ms"] = Percentile(best_ms, 0.95) / 50.0;
  std::vector<size_t> order(best_ms.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return best_ms[a] > best_ms[b]; });
  std::string slowest = "slowest:";
  for (size_t k = 0; k < std::min<size_t>(4, order.size()); ++k) {
    slowest += " " + f->corpus[order[k]].name + " " +
               std::to_string(static_cast<int>(best_ms[order[k]])) + "ms";
  }
  state.SetLabel(slowest);
}
BENCHMARK(BM_CompileCorpus)->Iterations(3)->Unit(benchmark::kMillisecond);

void BM_CompileCached(benchmark::State& state) {
  const Fixture* f = Load();
  if (f == nullptr) {
    state.SkipWithError("default model missing: run scripts/setup");
    return;
  }
  auto compiler = *ConstraintCompiler::Create(f->vocabulary);
  const ConstraintSpec spec{ConstraintKind::kJsonSchema, f->corpus.back().schema, {}};
  const auto start = Clock::now();
  (void)compiler->Compile(spec);
  const double miss_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  for (auto _ : state) benchmark::DoNotOptimize(compiler->Compile(spec));
  const ConstraintCompiler::CacheStats stats = compiler->cache_stats();
  state.counters["first_compile_us"] = miss_us;
  state.counters["hits"] = static_cast<double>(stats.hits);
  state.counters["misses"] = static_cast<double>(stats.misses);
}
BENCHMARK(BM_CompileCached)->Unit(benchmark::kMicrosecond);

void BM_MaskPerStep(benchmark::State& state) {
  const Fixture* f = Load();
  if (f == nullptr) {
    state.SkipWithError("default model missing: run scripts/setup");
    return;
  }
  auto compiler = *ConstraintCompiler::Create(f->vocabulary);
  struct Walk {
    std::shared_ptr<const TokenConstraint> constraint;
    std::vector<int32_t> tokens;
  };
  std::vector<Walk> walks;
  for (const testing::SchemaCase& c : f->corpus) {
    auto compiled = *compiler->Compile({ConstraintKind::kJsonSchema, c.schema, {}});
    for (const auto& doc : c.valid) {
      for (const std::string& form : c.forms) {
        if (form == "python") continue;  // compact and indented suffice
        walks.push_back({compiled, f->tokenizer->Encode(testing::Render(doc, form), false)});
      }
    }
  }
  const int32_t words = TokenBitmaskWords(f->vocabulary.vocab_size);
  std::vector<uint32_t> mask(words), source(words, ~0u);
  std::vector<double> step_us;
  for (auto _ : state) {
    step_us.clear();
    for (const Walk& w : walks) {
      std::unique_ptr<ConstraintMatcher> m = w.constraint->NewMatcher();
      for (int32_t t : w.tokens) {
        const auto start = Clock::now();
        m->FillNextTokenBitmask(mask);
        step_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
        benchmark::DoNotOptimize(mask.data());
        if (!m->AcceptToken(t)) {
          state.SkipWithError("a good document was rejected");
          return;
        }
      }
    }
  }
  const auto start = Clock::now();
  constexpr int kCopies = 10000;
  for (int i = 0; i < kCopies; ++i) {
    std::memcpy(mask.data(), source.data(), mask.size() * sizeof(uint32_t));
    benchmark::ClobberMemory();
  }
  const double copy_us =
      std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kCopies;
  double sum = 0;
  for (double us : step_us) sum += us;
  state.counters["steps"] = static_cast<double>(step_us.size());
  state.counters["mean_us"] = sum / static_cast<double>(step_us.size());
  state.counters["p50_us"] = Percentile(step_us, 0.5);
  state.counters["p95_us"] = Percentile(step_us, 0.95);
  state.counters["max_us"] = Percentile(step_us, 1.0);
  state.counters["mask_copy_us"] = copy_us;
}
BENCHMARK(BM_MaskPerStep)->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace loom

BENCHMARK_MAIN();
