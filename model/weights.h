// Model weights by Hugging Face tensor name, whatever the file format. GGUF
// tensors appear under HF names ("model.layers.0.self_attn.q_proj.weight",
// "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight" - absent
// when tied) with Q/K rows un-permuted to HF's half-split RoPE layout, so that
// every executor implements one RoPE and both formats give the same logits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "base/float16.h"
#include "formats/mapped_file.h"
#include "kernels/cpu/matmul_quant.h"

namespace loom {

// Quantized types use ggml's block layouts (kernels/cpu/matmul_quant_blocks.h):
// blocks of 32 values (256 for the K-quants) along a row (the input dimension).
enum class DType {
  kF32,
  kF16,
  kBF16,
  kQ8_0,
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ2_K,
  kQ3_K,
  kQ4_K,
  kQ5_K,
  kQ6_K,
};

const char* DTypeName(DType dtype);
// The block type of a quantized dtype; nullopt for F32, F16, BF16.
std::optional<kernels::cpu::QuantType> QuantTypeOf(DType dtype);
// Values per block (1 for float types) and bytes per block.
int64_t DTypeBlockValues(DType dtype);
int64_t DTypeBlockBytes(DType dtype);
// Bytes of one row of `n` values; n must be a multiple of the block size.
int64_t DTypeRowBytes(DType dtype, int64_t n);

struct Tensor {
  std::string name;
  DType dtype = DType::kF32;
  // Hugging Face order: a linear weight is [out_features, in_features], rows
  // contiguous. A 1-D tensor (norm weight, bias) is [n].
  std::vector<int64_t> shape;
  std::span<const std::byte> data;  // mmapped or owned by the store

  int64_t num_elements() const;
  int64_t rows() const;  // product of all but the last dimension (1 for 1-D)
  int64_t cols() const;  // last dimension
};

class WeightStore {
 public:
  WeightStore() = default;
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  const Tensor* Find(std::string_view name) const;
  // NOT_FOUND naming the tensor when absent.
  absl::StatusOr<const Tensor*> Get(std::string_view name) const;
  std::vector<std::string> Names() const;  // sorted
  size_t size() const { return tensors_.size(); }

  // Dequantize / convert a whole tensor; out.size() == num_elements().
  void ToFloat32(const Tensor& tensor, std::span<float> out) const;
  void ToBFloat16(const Tensor& tensor, std::span<uint16_t> out) const;
  // Rows [row_begin, row_end) only, so that executors can convert in parallel
  // and into their own layout; out.size() == (row_end - row_begin) * cols().
  void RowsToFloat32(const Tensor& tensor, int64_t row_begin, int64_t row_end,
                     std::span<float> out) const;
  void RowsToBFloat16(const Tensor& tensor, int64_t row_begin, int64_t row_end,
                      std::span<uint16_t> out) const;

  // Building a store (loaders): the tensor's data must stay valid while the
  // store lives, either in a kept mapping or in a buffer the store owns.
  void KeepAlive(std::shared_ptr<const MappedFile> file);
  std::span<std::byte> Allocate(size_t bytes);
  // INVALID_ARGUMENT on a duplicate name or a data size that does not match
  // dtype and shape.
  absl::Status Add(Tensor tensor);

 private:
  std::unordered_map<std::string, Tensor> tensors_;
  std::vector<std::shared_ptr<const MappedFile>> files_;
  struct AlignedDelete {
    void operator()(std::byte* p) const;
  };
  std::vector<std::unique_ptr<std::byte[], AlignedDelete>> buffers_;
};

}  // namespace loom
