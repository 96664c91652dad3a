// A read-only memory mapping of a whole file (or bytes held in memory, for
// tests). Weight stores keep it alive (shared) so tensors can point into it.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace loom {

class MappedFile {
 public:
  static absl::StatusOr<std::shared_ptr<const MappedFile>> Open(const std::string& path);
  static std::shared_ptr<const MappedFile> FromBytes(std::vector<std::byte> bytes);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;

  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;           // data_ came from mmap
  std::vector<std::byte> owned_;  // FromBytes
};

}  // namespace loom
