// Creates the executor for a loaded model: the CPU executor, or the CUDA one
// when the build has CUDA and a usable device ("auto" prefers CUDA).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/executor.h"
#include "model/model.h"

namespace loom {

struct ExecutorOptions {
  std::string device = "auto";  // auto | cpu | cuda
  // Weights and KV. auto: on cuda bfloat16; on cpu GGUF Q8_0/Q4_0/Q4_1 linear weights stay in
  // their blocks, other weights bfloat16, KV float32.
  std::string dtype = "auto";
  int32_t block_size = 16;
  // KV pool budget; 0: kv_cache_memory_fraction of the device's free memory
  // after weights (on the CPU, a share of available RAM, at most 4 GiB).
  int64_t kv_cache_bytes = 0;
  double kv_cache_memory_fraction = 0.9;
  int32_t threads = 0;        // CPU kernel threads; 0: one per hardware thread
  int32_t max_model_len = 0;  // 0: the model's
  // cuda decode attention kernel: auto (= v1), v1, v2
  std::string attention_kernel = "auto";
  // cpu: the activations of prefill matmuls (33 tokens or more in a step) on
  // quantized weights: int16 per block of 32 where the CPU has AVX-512 VNNI
  // (kernels/cpu/matmul_quant_int16.h; float32 elsewhere and for Q2_K and
  // Q3_K), float32, or int8 per block of 32 as llama.cpp rounds them on Q8_0,
  // Q4_0/Q4_1 and Q5_0/Q5_1 (kernels/cpu/matmul_quant_int8.h).
  std::string cpu_prefill_precision = "int16";
  // cpu: the same for decode steps (up to 32 tokens; int16 from 8, int8 from 4).
  std::string cpu_decode_precision = "int16";
  // cpu: the greedy rows' next token from the output head: "screened" (only
  // the rows of the head that can hold the argmax, in float32:
  // kernels/cpu/head_screen.h; the same token as "full") or "full" (every
  // logit).
  std::string cpu_greedy_head = "screened";
  // Per-step limits (--max_num_seqs, --max_num_batched_tokens) and the most
  // logit_bias entries a request may carry (--max_logit_bias): the CUDA
  // executor sizes its buffers, graphs and workspaces from them.
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 8192;
  int32_t max_logit_bias = 1024;
};

// INVALID_ARGUMENT for an unknown device or dtype, FAILED_PRECONDITION for
// cuda in a build or on a machine without it.
absl::StatusOr<std::unique_ptr<Executor>> CreateExecutor(const LoadedModel& model,
                                                         const ExecutorOptions& options);

}  // namespace loom
