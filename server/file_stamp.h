// What a file looks like from outside: size, modification time and inode.
// A watcher that compares stamps notices an edit in place and a replacement
// (a Kubernetes Secret or cert-manager swaps a symlink: a new inode).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>

namespace loom {

struct FileStamp {
  int64_t size = -1;
  int64_t mtime_ns = -1;
  uint64_t inode = 0;

  friend bool operator==(const FileStamp&, const FileStamp&) = default;
};

// The file's stamp (following links); nullopt when it cannot be stat'ed.
inline std::optional<FileStamp> StampOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return std::nullopt;
  }
  return FileStamp{.size = static_cast<int64_t>(st.st_size),
                   .mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
                               static_cast<int64_t>(st.st_mtim.tv_nsec),
                   .inode = static_cast<uint64_t>(st.st_ino)};
}

}  // namespace loom
