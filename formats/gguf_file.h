// A parsed GGUF (v2/v3) file: metadata key/values and tensor infos, with the
// tensor data left in a memory mapping. Every length and offset is checked:
// a malformed file gives a Status, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/mapped_file.h"

namespace loom {

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// One metadata value; arrays hold values of one element type.
class GgufValue {
 public:
  using Array = std::vector<GgufValue>;
  GgufValue() = default;
  GgufValue(GgufType type, int64_t v) : type_(type), value_(v) {}
  GgufValue(GgufType type, uint64_t v) : type_(type), value_(v) {}
  GgufValue(GgufType type, double v) : type_(type), value_(v) {}
  GgufValue(GgufType type, bool v) : type_(type), value_(v) {}
  GgufValue(GgufType type, std::string v) : type_(type), value_(std::move(v)) {}
  GgufValue(GgufType type, Array v)
      : type_(type), value_(std::make_shared<const Array>(std::move(v))) {}

  GgufType type() const { return type_; }
  // Integers of any width (and uint64 up to INT64_MAX); nullopt otherwise.
  std::optional<int64_t> AsInt() const;
  // Any numeric type.
  std::optional<double> AsFloat() const;
  std::optional<bool> AsBool() const;
  const std::string* AsString() const;
  const Array* AsArray() const;

 private:
  GgufType type_ = GgufType::kUint8;
  // Arrays sit behind a pointer: a variant holding a vector of itself trips
  // GCC's maybe-uninitialized analysis in sanitizer builds.
  std::variant<int64_t, uint64_t, double, bool, std::string, std::shared_ptr<const Array>> value_;
};

// ggml tensor type ids as stored in the file.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

struct GgufTensorInfo {
  std::string name;                 // GGUF name, e.g. "blk.0.attn_q.weight"
  std::vector<int64_t> ne;          // ggml order: ne[0] is the contiguous (input) dimension
  uint32_t type = 0;                // raw ggml type id (may be one Loom cannot decode)
  std::span<const std::byte> data;  // inside the mapping, bounds-checked
};

class GgufFile {
 public:
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses bytes already mapped or in memory (MappedFile::FromBytes, for tests).
  static absl::StatusOr<std::unique_ptr<GgufFile>> Parse(std::shared_ptr<const MappedFile> file);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const GgufValue* Find(std::string_view key) const;
  std::optional<int64_t> GetInt(std::string_view key) const;
  std::optional<double> GetFloat(std::string_view key) const;
  std::optional<bool> GetBool(std::string_view key) const;
  std::optional<std::string> GetString(std::string_view key) const;
  // String array (e.g. tokenizer.ggml.tokens); nullptr when absent or not strings.
  const GgufValue::Array* GetArray(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;
  // The mapping the tensor data points into.
  const std::shared_ptr<const MappedFile>& mapping() const { return mapping_; }

 private:
  GgufFile() = default;
  friend class GgufParser;

  std::shared_ptr<const MappedFile> mapping_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::unordered_map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace loom
