#include "fuzz/fuzz_util.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace loom::fuzz {
namespace {

volatile std::byte sink;

}  // namespace

void Touch(std::span<const std::byte> bytes) {
  if (!bytes.empty()) sink = bytes.front() ^ bytes.back();
}

std::string WriteScratchFile(const std::string& name, const uint8_t* data, size_t size) {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d =
        std::filesystem::temp_directory_path() / ("loom_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  const std::filesystem::path path = dir / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path.string();
}

}  // namespace loom::fuzz
