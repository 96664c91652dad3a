#include "model/weights.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/check.h"

namespace loom {

std::optional<kernels::cpu::QuantType> QuantTypeOf(DType dtype) {
  using kernels::cpu::QuantType;
  switch (dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return std::nullopt;
    case DType::kQ8_0:
      return QuantType::kQ8_0;
    case DType::kQ4_0:
      return QuantType::kQ4_0;
    case DType::kQ4_1:
      return QuantType::kQ4_1;
    case DType::kQ5_0:
      return QuantType::kQ5_0;
    case DType::kQ5_1:
      return QuantType::kQ5_1;
    case DType::kQ2_K:
      return QuantType::kQ2_K;
    case DType::kQ3_K:
      return QuantType::kQ3_K;
    case DType::kQ4_K:
      return QuantType::kQ4_K;
    case DType::kQ5_K:
      return QuantType::kQ5_K;
    case DType::kQ6_K:
      return QuantType::kQ6_K;
  }
  return std::nullopt;
}

const char* DTypeName(DType dtype) {
  if (std::optional<kernels::cpu::QuantType> q = QuantTypeOf(dtype)) {
    return kernels::cpu::QuantTypeName(*q);
  }
  switch (dtype) {
    case DType::kF32:
      return "float32";
    case DType::kF16:
      return "float16";
    default:
      break;
  }
  return "bfloat16";
}

int64_t DTypeBlockValues(DType dtype) {
  std::optional<kernels::cpu::QuantType> q = QuantTypeOf(dtype);
  return q ? kernels::cpu::QuantBlockValues(*q) : 1;
}

int64_t DTypeBlockBytes(DType dtype) {
  if (std::optional<kernels::cpu::QuantType> q = QuantTypeOf(dtype)) {
    return kernels::cpu::QuantBlockBytes(*q);
  }
  return dtype == DType::kF32 ? 4 : 2;
}

int64_t DTypeRowBytes(DType dtype, int64_t n) {
  LOOM_CHECK_EQ(n % DTypeBlockValues(dtype), 0) << DTypeName(dtype) << " row of " << n;
  return n / DTypeBlockValues(dtype) * DTypeBlockBytes(dtype);
}

int64_t Tensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Tensor::rows() const { return shape.empty() ? 1 : num_elements() / shape.back(); }
int64_t Tensor::cols() const { return shape.empty() ? 1 : shape.back(); }

const Tensor* WeightStore::Find(std::string_view name) const {
  auto it = tensors_.find(std::string(name));
  return it == tensors_.end() ? nullptr : &it->second;
}

absl::StatusOr<const Tensor*> WeightStore::Get(std::string_view name) const {
  const Tensor* t = Find(name);
  if (t == nullptr)
    return absl::NotFoundError(absl::StrCat("tensor ", std::string(name), " not found"));
  return t;
}

std::vector<std::string> WeightStore::Names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

void WeightStore::RowsToFloat32(const Tensor& t, int64_t row_begin, int64_t row_end,
                                std::span<float> out) const {
  const int64_t cols = t.cols();
  LOOM_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= t.rows());
  LOOM_CHECK_EQ(static_cast<int64_t>(out.size()), (row_end - row_begin) * cols);
  const int64_t row_bytes = DTypeRowBytes(t.dtype, cols);
  const std::byte* base = t.data.data() + row_begin * row_bytes;
  const int64_t n = (row_end - row_begin) * cols;
  switch (t.dtype) {
    case DType::kF32:
      std::memcpy(out.data(), base, n * sizeof(float));
      return;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, base + 2 * i, 2);
        out[i] = t.dtype == DType::kF16 ? HalfToFloat(v) : BFloat16ToFloat(v);
      }
      return;
    default:
      // The kernels' decoder, so that dequantized float32 weights have
      // exactly the values the quantized matmul multiplies with.
      kernels::cpu::DequantizeBlocks(*QuantTypeOf(t.dtype), base, n, out.data());
      return;
  }
}

void WeightStore::RowsToBFloat16(const Tensor& t, int64_t row_begin, int64_t row_end,
                                 std::span<uint16_t> out) const {
  const int64_t cols = t.cols();
  LOOM_CHECK_EQ(static_cast<int64_t>(out.size()), (row_end - row_begin) * cols);
  if (t.dtype == DType::kBF16) {
    LOOM_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= t.rows());
    std::memcpy(out.data(), t.data.data() + row_begin * cols * 2, out.size() * 2);
    return;
  }
  // One row at a time keeps the float scratch small for large tensors.
  std::vector<float> row(cols);
  for (int64_t r = row_begin; r < row_end; ++r) {
    RowsToFloat32(t, r, r + 1, row);
    uint16_t* dst = out.data() + (r - row_begin) * cols;
    for (int64_t c = 0; c < cols; ++c) dst[c] = FloatToBFloat16(row[c]);
  }
}

void WeightStore::ToFloat32(const Tensor& t, std::span<float> out) const {
  RowsToFloat32(t, 0, t.rows(), out);
}

void WeightStore::ToBFloat16(const Tensor& t, std::span<uint16_t> out) const {
  RowsToBFloat16(t, 0, t.rows(), out);
}

void WeightStore::AlignedDelete::operator()(std::byte* p) const {
  ::operator delete[](p, std::align_val_t(64));
}

void WeightStore::KeepAlive(std::shared_ptr<const MappedFile> file) {
  files_.push_back(std::move(file));
}

std::span<std::byte> WeightStore::Allocate(size_t bytes) {
  // 64-byte alignment so that SIMD kernels may read the buffers directly.
  auto* p = static_cast<std::byte*>(::operator new[](bytes == 0 ? 1 : bytes, std::align_val_t(64)));
  buffers_.push_back(std::unique_ptr<std::byte[], AlignedDelete>(p));
  return {p, bytes};
}

absl::Status WeightStore::Add(Tensor tensor) {
  if (tensor.shape.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", tensor.name, " has no shape"));
  }
  for (int64_t d : tensor.shape) {
    if (d <= 0 || d > (int64_t{1} << 40)) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", tensor.name, " has a bad shape"));
    }
  }
  if (tensor.cols() % DTypeBlockValues(tensor.dtype) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", tensor.name, ": row of ",
                                                   tensor.cols(), " is not a whole number of ",
                                                   DTypeName(tensor.dtype), " blocks"));
  }
  const int64_t bytes = DTypeRowBytes(tensor.dtype, tensor.cols()) * tensor.rows();
  if (static_cast<int64_t>(tensor.data.size()) != bytes) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", tensor.name, " has ",
                                                   tensor.data.size(), " bytes, expected ", bytes));
  }
  std::string name = tensor.name;
  if (!tensors_.emplace(name, std::move(tensor)).second) {
    return absl::InvalidArgumentError(absl::StrCat("duplicate tensor ", name));
  }
  return absl::OkStatus();
}

}  // namespace loom
