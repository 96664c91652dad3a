// Where a decode step's matmul time goes on the CPU, per weight role, for a
// GGUF as loomd serves it: each pass multiplies ROWS rows of x by every 2-D
// quantized tensor of the file in the model's order (layer by layer, so W
// streams from memory as in a step; the head last: output.weight, or
// token_embd.weight when tied), timing each product; prints per role the
// median over the passes of its time per step, the bytes it reads and the
// rate it reads them at, and the share of the measured read bandwidth
// (bench/mem_read) that is, for X in {float32, int16, int8}
// (MatmulQuantParams' paths).
//
//   step_profile MODEL.gguf [THREADS] [ROWS] [PASSES] [BANDWIDTH_GB_S]
//
// Attention, norms, sampling and the server are not in these sums: a
// step's time (1 / decode rate) less the matmuls' is what they take.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "formats/gguf_file.h"
#include "kernels/cpu/matmul_quant.h"
#include "kernels/cpu/thread_pool.h"

namespace {

namespace kc = loom::kernels::cpu;
using loom::GgmlType;

std::optional<kc::QuantType> QuantTypeOf(uint32_t ggml) {
  switch (static_cast<GgmlType>(ggml)) {
    case GgmlType::kQ8_0:
      return kc::QuantType::kQ8_0;
    case GgmlType::kQ4_0:
      return kc::QuantType::kQ4_0;
    case GgmlType::kQ4_1:
      return kc::QuantType::kQ4_1;
    case GgmlType::kQ5_0:
      return kc::QuantType::kQ5_0;
    case GgmlType::kQ5_1:
      return kc::QuantType::kQ5_1;
    case GgmlType::kQ2_K:
      return kc::QuantType::kQ2_K;
    case GgmlType::kQ3_K:
      return kc::QuantType::kQ3_K;
    case GgmlType::kQ4_K:
      return kc::QuantType::kQ4_K;
    case GgmlType::kQ5_K:
      return kc::QuantType::kQ5_K;
    case GgmlType::kQ6_K:
      return kc::QuantType::kQ6_K;
    default:
      return std::nullopt;
  }
}

// "blk.3.ffn_down.weight" -> "ffn_down (q6_k)".
std::string Role(const loom::GgufTensorInfo& t, kc::QuantType type) {
  std::string name = t.name;
  if (name.rfind("blk.", 0) == 0) name = name.substr(name.find('.', 4) + 1);
  if (name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0) {
    name.resize(name.size() - 7);
  }
  return name + " (" + kc::QuantTypeName(type) + ")";
}

struct Product {
  std::string role;
  kc::MatmulQuantParams p;
  int64_t bytes = 0;
  std::vector<std::byte> w;  // a copy on the heap, as the CPU executor keeps W
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: step_profile MODEL.gguf [THREADS] [ROWS] [PASSES] [BANDWIDTH_GB_S]\n");
    return 2;
  }
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int rows = argc > 3 ? std::atoi(argv[3]) : 1;
  const int passes = argc > 4 ? std::atoi(argv[4]) : 20;
  const double bandwidth = argc > 5 ? std::atof(argv[5]) : 0.0;
  auto file = loom::GgufFile::Open(argv[1]);
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", std::string(file.status().message()).c_str());
    return 1;
  }
  const bool tied = (*file)->FindTensor("output.weight") == nullptr;
  std::vector<Product> products;
  int64_t max_k = 0, max_n = 0;
  for (const loom::GgufTensorInfo& t : (*file)->tensors()) {
    const std::optional<kc::QuantType> type = QuantTypeOf(t.type);
    if (!type || t.ne.size() != 2) continue;
    if (t.name == "token_embd.weight" && !tied) continue;  // only looked up
    Product pr;
    pr.role = Role(t, *type);
    pr.w.assign(t.data.begin(), t.data.end());
    pr.p.type = *type;
    pr.p.k = static_cast<int32_t>(t.ne[0]);
    pr.p.n = static_cast<int32_t>(t.ne[1]);
    pr.bytes = static_cast<int64_t>(t.data.size());
    max_k = std::max<int64_t>(max_k, pr.p.k);
    max_n = std::max<int64_t>(max_n, pr.p.n);
    products.push_back(pr);
  }
  // The head last, as in a step.
  std::stable_partition(products.begin(), products.end(), [](const Product& pr) {
    return pr.role.rfind("output", 0) != 0 && pr.role.rfind("token_embd", 0) != 0;
  });
  std::vector<float> x(static_cast<size_t>(rows) * max_k), y(static_cast<size_t>(rows) * max_n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (float& v : x) v = uniform(rng);
  for (Product& pr : products) pr.p.w = pr.w.data();
  kc::ThreadPool pool(threads);
  int64_t step_bytes = 0;
  for (const Product& pr : products) step_bytes += pr.bytes;
  std::printf("%s: %zu products, %.1f MB a step, %d rows, %d threads, %d passes\n", argv[1],
              products.size(), step_bytes / 1e6, rows, threads, passes);
  for (const char* x_name : {"float32", "int16", "int8"}) {
    const std::string xs = x_name;
    std::map<std::string, std::vector<double>> per_pass;  // role -> seconds per pass
    std::map<std::string, int64_t> role_bytes;
    std::vector<double> totals;
    for (int pass = 0; pass <= passes; ++pass) {  // pass 0 warms up
      std::map<std::string, double> seconds;
      double total = 0.0;
      for (const Product& pr : products) {
        kc::MatmulQuantParams p = pr.p;
        p.x = x.data();
        p.y = y.data();
        p.m = rows;
        p.ldx = p.k;
        p.ldy = p.n;
        p.int16_x = xs == "int16";
        p.quantize_x = xs == "int8";
        const auto start = std::chrono::steady_clock::now();
        kc::MatmulQuant(p, pool);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        seconds[pr.role] += s;
        total += s;
        if (pass == 0) role_bytes[pr.role] += pr.bytes;
      }
      if (pass == 0) continue;
      for (const auto& [role, s] : seconds) per_pass[role].push_back(s);
      totals.push_back(total);
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf("\nx %s\n%-26s %9s %9s %8s %7s\n", x_name, "role", "ms/step", "MB", "GB/s",
                "of bw");
    for (const auto& [role, v] : per_pass) {
      const double s = median(v), gbs = role_bytes[role] / s / 1e9;
      std::printf("%-26s %9.3f %9.1f %8.2f %7.2f\n", role.c_str(), s * 1e3, role_bytes[role] / 1e6,
                  gbs, bandwidth > 0 ? gbs / bandwidth : 0.0);
    }
    const double s = median(totals), gbs = step_bytes / s / 1e9;
    std::printf("%-26s %9.3f %9.1f %8.2f %7.2f\n", "all matmuls", s * 1e3, step_bytes / 1e6, gbs,
                bandwidth > 0 ? gbs / bandwidth : 0.0);
  }
  return 0;
}
