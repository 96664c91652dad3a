#include "model/safetensors.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace loom {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// The product of the dims must fit in 2^62 elements: a crafted shape such as
// [2^40, 2^40] would otherwise overflow the byte-size arithmetic.
absl::Status CheckElementCount(const std::string& path, const std::string& name,
                               const std::vector<int64_t>& shape, int64_t count) {
  constexpr int64_t kMaxElements = int64_t{1} << 62;
  for (int64_t d : shape) {
    if (d <= 0 || count > kMaxElements / d) {
      return Bad(path, absl::StrCat("tensor ", name, ": element count of its shape exceeds 2^62"));
    }
    count *= d;
  }
  return absl::OkStatus();
}

absl::Status LoadFile(const std::string& path, WeightStore& store) {
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::Open(path));
  std::span<const std::byte> bytes = file->bytes();
  uint64_t header_len;
  if (bytes.size() < 8) return Bad(path, "too short for a safetensors header");
  std::memcpy(&header_len, bytes.data(), 8);
  if (header_len > bytes.size() - 8 || header_len > (uint64_t{100} << 20)) {
    return Bad(path, "header length exceeds the file");
  }
  std::string_view header_text(reinterpret_cast<const char*>(bytes.data() + 8), header_len);
  json header = json::parse(header_text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return Bad(path, "header is not JSON");
  std::span<const std::byte> data = bytes.subspan(8 + header_len);
  store.KeepAlive(file);
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() ||
        !entry.contains("shape") || !entry["shape"].is_array() || !entry.contains("data_offsets") ||
        !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2) {
      return Bad(path, absl::StrCat("malformed entry for ", name));
    }
    const std::string dtype = entry["dtype"].get<std::string>();
    Tensor t;
    t.name = name;
    if (dtype == "F32") {
      t.dtype = DType::kF32;
    } else if (dtype == "F16") {
      t.dtype = DType::kF16;
    } else if (dtype == "BF16") {
      t.dtype = DType::kBF16;
    } else {
      return absl::UnimplementedError(absl::StrCat(path, ": tensor ", name, " has dtype ", dtype,
                                                   "; supported: F32, F16, BF16"));
    }
    for (const json& d : entry["shape"]) {
      if (!d.is_number_unsigned()) return Bad(path, absl::StrCat("bad shape for ", name));
      t.shape.push_back(d.get<int64_t>());
    }
    if (t.shape.empty()) t.shape.push_back(1);  // a scalar
    LOOM_RETURN_IF_ERROR(CheckElementCount(path, name, t.shape, 1));
    const json& off = entry["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      return Bad(path, absl::StrCat("bad data_offsets for ", name));
    }
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data.size()) {
      return Bad(path, absl::StrCat("data of ", name, " lies outside the file"));
    }
    t.data = data.subspan(begin, end - begin);
    if (absl::Status s = store.Add(std::move(t)); !s.ok()) return Bad(path, s.message());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadSafetensorsFile(const std::string& path, WeightStore& store) {
  // nlohmann::json throws on a field of the wrong type: a malformed file.
  try {
    return LoadFile(path, store);
  } catch (const json::exception& e) {
    return Bad(path, e.what());
  }
}

absl::StatusOr<std::unique_ptr<WeightStore>> LoadSafetensorsDir(const std::string& dir) {
  namespace fs = std::filesystem;
  auto store = std::make_unique<WeightStore>();
  std::set<std::string> files;
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(index, ec)) {
    std::ifstream in(index);
    std::stringstream ss;
    ss << in.rdbuf();
    json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") ||
        !j["weight_map"].is_object()) {
      return Bad(index.string(), "no weight_map");
    }
    for (const auto& [name, shard] : j["weight_map"].items()) {
      if (!shard.is_string()) return Bad(index.string(), "weight_map values must be file names");
      const std::string file = shard.get<std::string>();
      if (file.find('/') != std::string::npos) {
        return Bad(index.string(), absl::StrCat("shard ", file, " is outside the directory"));
      }
      files.insert((fs::path(dir) / file).string());
    }
  } else if (fs::exists(fs::path(dir) / "model.safetensors", ec)) {
    files.insert((fs::path(dir) / "model.safetensors").string());
  } else {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".safetensors") files.insert(e.path().string());
    }
  }
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat("no .safetensors files in ", dir));
  }
  for (const std::string& f : files) {
    LOOM_RETURN_IF_ERROR(LoadSafetensorsFile(f, *store));
  }
  return store;
}

}  // namespace loom
