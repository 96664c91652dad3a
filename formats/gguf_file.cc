#include "formats/gguf_file.h"

#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace loom {
namespace {

constexpr uint64_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 4;
// Far above any vocabulary or merge list; bounds memory on hostile counts.
constexpr uint64_t kMaxArrayLength = uint64_t{1} << 23;
// Array values in the whole file: a few vocabularies' worth (a 262k-token
// vocabulary has three arrays of 262k). Each costs a GgufValue in memory however
// few bytes it takes in the file, so the file size alone does not bound them.
constexpr uint64_t kMaxArrayValues = uint64_t{1} << 23;

// The fewest bytes one value of the type takes in the file.
uint64_t MinEncodedBytes(uint32_t type) {
  switch (static_cast<GgufType>(type)) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kString:  // its length
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kArray:  // element type and length
      return 12;
  }
  return 1;
}

// Bytes per block and values per block of the ggml types whose size Loom knows.
bool TypeBlock(uint32_t type, uint64_t& block_values, uint64_t& block_bytes) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32:
      block_values = 1;
      block_bytes = 4;
      return true;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      block_values = 1;
      block_bytes = 2;
      return true;
    case GgmlType::kQ4_0:
      block_values = 32;
      block_bytes = 18;
      return true;
    case GgmlType::kQ4_1:
      block_values = 32;
      block_bytes = 20;
      return true;
    case GgmlType::kQ5_0:
      block_values = 32;
      block_bytes = 22;
      return true;
    case GgmlType::kQ5_1:
      block_values = 32;
      block_bytes = 24;
      return true;
    case GgmlType::kQ8_0:
      block_values = 32;
      block_bytes = 34;
      return true;
    case GgmlType::kQ2_K:
      block_values = 256;
      block_bytes = 84;
      return true;
    case GgmlType::kQ3_K:
      block_values = 256;
      block_bytes = 110;
      return true;
    case GgmlType::kQ4_K:
      block_values = 256;
      block_bytes = 144;
      return true;
    case GgmlType::kQ5_K:
      block_values = 256;
      block_bytes = 176;
      return true;
    case GgmlType::kQ6_K:
      block_values = 256;
      block_bytes = 210;
      return true;
  }
  return false;
}

}  // namespace

// Reads the header with a cursor that checks every read against the end.
class GgufParser {
 public:
  explicit GgufParser(std::span<const std::byte> bytes) : bytes_(bytes) {}

  absl::Status Run(GgufFile& file) {
    uint64_t num_tensors = 0, num_kv = 0;
    LOOM_RETURN_IF_ERROR(ReadHeader(file, num_tensors, num_kv));
    LOOM_RETURN_IF_ERROR(ReadMetadata(file, num_kv));
    std::vector<TensorPlace> places;
    for (uint64_t i = 0; i < num_tensors; ++i) {
      GgufTensorInfo info;
      LOOM_ASSIGN_OR_RETURN(const TensorPlace place, ReadTensorInfo(file, info));
      if (file.tensor_index_.contains(info.name)) {
        return absl::InvalidArgumentError(absl::StrCat("duplicate tensor ", info.name));
      }
      file.tensor_index_[info.name] = file.tensors_.size();
      file.tensors_.push_back(std::move(info));
      places.push_back(place);
    }
    return PlaceTensorData(file, places);
  }

 private:
  // Where a tensor's data lies, relative to the data section.
  struct TensorPlace {
    uint64_t offset, bytes;
  };

  // The magic, the version, and the tensor and metadata counts.
  absl::Status ReadHeader(GgufFile& file, uint64_t& num_tensors, uint64_t& num_kv) {
    char magic[4];
    if (!Read(magic, 4) || std::memcmp(magic, "GGUF", 4) != 0) {
      return absl::InvalidArgumentError("not a GGUF file (bad magic)");
    }
    if (!ReadPod(file.version_)) return Truncated("version");
    if (file.version_ != 2 && file.version_ != 3) {
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported GGUF version ", file.version_, " (need 2 or 3)"));
    }
    if (!ReadPod(num_tensors) || !ReadPod(num_kv)) return Truncated("counts");
    // Every entry takes at least 8 bytes, which bounds the counts by the size.
    if (num_tensors > Remaining() / 8 || num_kv > Remaining() / 8) {
      return absl::InvalidArgumentError("GGUF header counts exceed the file size");
    }
    return absl::OkStatus();
  }

  // num_kv key/value pairs, then general.alignment from among them.
  absl::Status ReadMetadata(GgufFile& file, uint64_t num_kv) {
    for (uint64_t i = 0; i < num_kv; ++i) {
      std::string key;
      if (!ReadString(key)) return Truncated("metadata key");
      uint32_t type;
      if (!ReadPod(type)) return Truncated("metadata type");
      GgufValue value;
      if (absl::Status s = ReadValue(type, 0, value); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("metadata ", key, ": ", s.message()));
      }
      file.metadata_[key] = std::move(value);
    }
    if (auto a = file.GetInt("general.alignment")) {
      if (*a <= 0 || *a > 65536 || (*a & (*a - 1)) != 0) {
        return absl::InvalidArgumentError(absl::StrCat("bad general.alignment ", *a));
      }
      file.alignment_ = static_cast<uint64_t>(*a);
    }
    return absl::OkStatus();
  }

  // One tensor's name, shape and type into info; its offset and size (0 for a
  // type whose block size Loom does not know).
  absl::StatusOr<TensorPlace> ReadTensorInfo(const GgufFile& file, GgufTensorInfo& info) {
    if (!ReadString(info.name)) return Truncated("tensor name");
    uint32_t n_dims;
    if (!ReadPod(n_dims)) return Truncated("tensor dims");
    if (n_dims == 0 || n_dims > kMaxDims) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", info.name, " has ", n_dims, " dimensions"));
    }
    uint64_t num_values = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne;
      if (!ReadPod(ne)) return Truncated("tensor shape");
      if (ne == 0 || ne > (uint64_t{1} << 40) || num_values > (uint64_t{1} << 40) / ne) {
        return absl::InvalidArgumentError(absl::StrCat("tensor ", info.name, " has a bad shape"));
      }
      num_values *= ne;
      info.ne.push_back(static_cast<int64_t>(ne));
    }
    TensorPlace place{0, 0};
    if (!ReadPod(info.type) || !ReadPod(place.offset)) return Truncated("tensor type/offset");
    if (place.offset % file.alignment_ != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", info.name, " offset is not aligned"));
    }
    uint64_t block_values = 0, block_bytes = 0;
    if (TypeBlock(info.type, block_values, block_bytes)) {
      if (info.ne[0] % block_values != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor ", info.name, " rows are not whole blocks"));
      }
      place.bytes = num_values / block_values * block_bytes;
    }
    return place;
  }

  // Points each tensor at its data, which must lie inside the file.
  absl::Status PlaceTensorData(GgufFile& file, const std::vector<TensorPlace>& places) {
    const uint64_t data_start = (pos_ + file.alignment_ - 1) / file.alignment_ * file.alignment_;
    if (data_start > bytes_.size() && !file.tensors_.empty()) {
      return absl::InvalidArgumentError("GGUF tensor data section is missing");
    }
    for (size_t i = 0; i < places.size(); ++i) {
      const uint64_t avail = bytes_.size() - std::min<uint64_t>(data_start, bytes_.size());
      if (places[i].offset > avail || places[i].bytes > avail - places[i].offset) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor ", file.tensors_[i].name, " data lies outside the file"));
      }
      // Unknown types keep an empty span: their size cannot be checked.
      file.tensors_[i].data = bytes_.subspan(data_start + places[i].offset, places[i].bytes);
    }
    return absl::OkStatus();
  }

  uint64_t Remaining() const { return bytes_.size() - pos_; }

  bool Read(void* dst, uint64_t n) {
    if (n > Remaining()) return false;
    std::memcpy(dst, bytes_.data() + pos_, n);
    pos_ += n;
    return true;
  }

  template <typename T>
  bool ReadPod(T& v) {
    return Read(&v, sizeof(T));
  }

  bool ReadString(std::string& s) {
    uint64_t n;
    if (!ReadPod(n) || n > Remaining()) return false;
    s.assign(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return true;
  }

  static absl::Status Truncated(const char* what) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF file truncated in ", what));
  }

  absl::Status ReadValue(uint32_t type, int depth, GgufValue& out) {
    auto scalar = [&]<typename T, typename Stored>(T, Stored) -> absl::Status {
      T v;
      if (!ReadPod(v)) return Truncated("value");
      out = GgufValue(static_cast<GgufType>(type), static_cast<Stored>(v));
      return absl::OkStatus();
    };
    switch (static_cast<GgufType>(type)) {
      case GgufType::kUint8:
        return scalar(uint8_t{}, uint64_t{});
      case GgufType::kInt8:
        return scalar(int8_t{}, int64_t{});
      case GgufType::kUint16:
        return scalar(uint16_t{}, uint64_t{});
      case GgufType::kInt16:
        return scalar(int16_t{}, int64_t{});
      case GgufType::kUint32:
        return scalar(uint32_t{}, uint64_t{});
      case GgufType::kInt32:
        return scalar(int32_t{}, int64_t{});
      case GgufType::kUint64:
        return scalar(uint64_t{}, uint64_t{});
      case GgufType::kInt64:
        return scalar(int64_t{}, int64_t{});
      case GgufType::kFloat32:
        return scalar(float{}, double{});
      case GgufType::kFloat64:
        return scalar(double{}, double{});
      case GgufType::kBool: {
        uint8_t v;
        if (!ReadPod(v)) return Truncated("value");
        if (v > 1) return absl::InvalidArgumentError("bool value is not 0 or 1");
        out = GgufValue(GgufType::kBool, v == 1);
        return absl::OkStatus();
      }
      case GgufType::kString: {
        std::string s;
        if (!ReadString(s)) return Truncated("string");
        out = GgufValue(GgufType::kString, std::move(s));
        return absl::OkStatus();
      }
      case GgufType::kArray: {
        if (depth >= kMaxArrayDepth) return absl::InvalidArgumentError("arrays nested too deep");
        uint32_t elem_type;
        uint64_t n;
        if (!ReadPod(elem_type) || !ReadPod(n)) return Truncated("array header");
        if (n > kMaxArrayLength || n > Remaining() / MinEncodedBytes(elem_type)) {
          return absl::InvalidArgumentError(
              absl::StrCat("array of ", n, " values is too long: at most ", kMaxArrayLength,
                           " values, and no more than the ", Remaining(), " bytes left hold"));
        }
        array_values_ += n;
        if (array_values_ > kMaxArrayValues) {
          return absl::InvalidArgumentError(
              absl::StrCat("metadata arrays hold more than ", kMaxArrayValues, " values in all"));
        }
        GgufValue::Array values;
        for (uint64_t i = 0; i < n; ++i) {
          GgufValue v;
          LOOM_RETURN_IF_ERROR(ReadValue(elem_type, depth + 1, v));
          values.push_back(std::move(v));
        }
        out = GgufValue(GgufType::kArray, std::move(values));
        return absl::OkStatus();
      }
    }
    return absl::InvalidArgumentError(absl::StrCat("unknown value type ", type));
  }

  std::span<const std::byte> bytes_;
  uint64_t pos_ = 0;
  uint64_t array_values_ = 0;  // in all arrays read so far
};

std::optional<int64_t> GgufValue::AsInt() const {
  if (const auto* v = std::get_if<int64_t>(&value_)) return *v;
  if (const auto* v = std::get_if<uint64_t>(&value_)) {
    if (*v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return static_cast<int64_t>(*v);
    }
  }
  return std::nullopt;
}

std::optional<double> GgufValue::AsFloat() const {
  if (const auto* v = std::get_if<double>(&value_)) return *v;
  if (const auto* v = std::get_if<int64_t>(&value_)) return static_cast<double>(*v);
  if (const auto* v = std::get_if<uint64_t>(&value_)) return static_cast<double>(*v);
  return std::nullopt;
}

std::optional<bool> GgufValue::AsBool() const {
  if (const auto* v = std::get_if<bool>(&value_)) return *v;
  return std::nullopt;
}

const std::string* GgufValue::AsString() const { return std::get_if<std::string>(&value_); }
const GgufValue::Array* GgufValue::AsArray() const {
  const auto* p = std::get_if<std::shared_ptr<const Array>>(&value_);
  return p ? p->get() : nullptr;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::Open(path));
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = Parse(std::move(file));
  if (!gguf.ok()) {
    return absl::Status(gguf.status().code(), absl::StrCat(path, ": ", gguf.status().message()));
  }
  return gguf;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Parse(std::shared_ptr<const MappedFile> file) {
  std::unique_ptr<GgufFile> gguf(new GgufFile());
  gguf->mapping_ = std::move(file);
  GgufParser parser(gguf->mapping_->bytes());
  LOOM_RETURN_IF_ERROR(parser.Run(*gguf));
  return gguf;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_.find(std::string(key));
  return it == metadata_.end() ? nullptr : &it->second;
}

std::optional<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  return v ? v->AsInt() : std::nullopt;
}

std::optional<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  return v ? v->AsFloat() : std::nullopt;
}

std::optional<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  return v ? v->AsBool() : std::nullopt;
}

std::optional<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr || v->AsString() == nullptr) return std::nullopt;
  return *v->AsString();
}

const GgufValue::Array* GgufFile::GetArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  return v ? v->AsArray() : nullptr;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace loom
