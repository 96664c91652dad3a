#include "tools/bench/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"

namespace loom::bench {

double Percentile(std::span<const double> sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Summary Summarize(std::vector<double> values) {
  Summary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  const auto n = static_cast<double>(values.size());
  s.mean = sum / n;
  double squares = 0;
  for (double v : values) squares += (v - s.mean) * (v - s.mean);
  s.stddev = std::sqrt(squares / n);
  s.median = Percentile(values, 50);
  s.p90 = Percentile(values, 90);
  s.p99 = Percentile(values, 99);
  return s;
}

absl::StatusOr<Slo> ParseSlo(absl::string_view text) {
  Slo slo;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    const std::vector<absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    absl::Duration d;
    if (kv.size() != 2 || !absl::ParseDuration(kv[1], &d) || d <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--slo: expected key=duration (e.g. ttft=500ms), got \"", item, "\""));
    }
    const double ms = absl::ToDoubleMilliseconds(d);
    if (kv[0] == "ttft") {
      slo.ttft_ms = ms;
    } else if (kv[0] == "tpot") {
      slo.tpot_ms = ms;
    } else if (kv[0] == "e2el") {
      slo.e2el_ms = ms;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--slo: unknown key \"", kv[0], "\"; known: ttft, tpot, e2el"));
    }
  }
  return slo;
}

namespace {

double Tpot(const RequestRecord& r) {
  return (r.e2el - r.ttft) / static_cast<double>(r.output_tokens - 1);
}

bool MeetsSlo(const RequestRecord& r, const Slo& slo) {
  if (slo.ttft_ms && r.ttft * 1e3 > *slo.ttft_ms) return false;
  if (slo.tpot_ms && r.output_tokens > 1 && Tpot(r) * 1e3 > *slo.tpot_ms) return false;
  if (slo.e2el_ms && r.e2el * 1e3 > *slo.e2el_ms) return false;
  return true;
}

}  // namespace

BenchMetrics ComputeMetrics(std::span<const RequestRecord> records, double duration,
                            const Slo& slo) {
  BenchMetrics m;
  m.duration = duration;
  std::vector<double> ttfts, tpots, itls, e2els;
  for (const RequestRecord& r : records) {
    if (!r.ok) {
      ++m.failed;
      continue;
    }
    ++m.completed;
    m.total_input_tokens += r.input_tokens;
    m.total_output_tokens += r.output_tokens;
    ttfts.push_back(r.ttft * 1e3);
    e2els.push_back(r.e2el * 1e3);
    if (r.output_tokens > 1) tpots.push_back(Tpot(r) * 1e3);
    for (double gap : r.itls) itls.push_back(gap * 1e3);
    if (MeetsSlo(r, slo)) ++m.good_requests;
  }
  if (duration > 0) {
    m.request_throughput = static_cast<double>(m.completed) / duration;
    m.output_throughput = static_cast<double>(m.total_output_tokens) / duration;
    m.total_token_throughput =
        static_cast<double>(m.total_input_tokens + m.total_output_tokens) / duration;
    m.request_goodput = static_cast<double>(m.good_requests) / duration;
  }
  m.ttft_ms = Summarize(std::move(ttfts));
  m.tpot_ms = Summarize(std::move(tpots));
  m.itl_ms = Summarize(std::move(itls));
  m.e2el_ms = Summarize(std::move(e2els));
  return m;
}

}  // namespace loom::bench
