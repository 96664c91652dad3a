// The whole LoadModel path over untrusted files. Byte 0 picks the layout:
//   even: the rest is a .gguf file;
//   odd:  the rest is config.json, a NUL byte, then model.safetensors, in a
//         Hugging Face directory next to a small valid tokenizer.json.
// A model that loads must have a consistent shape and a working tokenizer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "model/model.h"

namespace {

loom::ModelLoadOptions HfDirectory(const uint8_t* data, size_t size) {
  const auto* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t config_size = nul == nullptr ? size : static_cast<size_t>(nul - data);
  const std::string config = loom::fuzz::WriteScratchFile("config.json", data, config_size);
  const size_t rest = nul == nullptr ? 0 : size - config_size - 1;
  loom::fuzz::WriteScratchFile("model.safetensors", nul == nullptr ? data : nul + 1, rest);
  loom::fuzz::WriteScratchFile("tokenizer.json",
                               reinterpret_cast<const uint8_t*>(loom::fuzz::kTokenizerJson.data()),
                               loom::fuzz::kTokenizerJson.size());
  return {.path = std::filesystem::path(config).parent_path().string(),
          .load_format = "safetensors"};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  loom::ModelLoadOptions options =
      (data[0] & 1) == 0 ? loom::ModelLoadOptions{.path = loom::fuzz::WriteScratchFile(
                                                      "model.gguf", data + 1, size - 1),
                                                  .load_format = "gguf"}
                         : HfDirectory(data + 1, size - 1);
  absl::StatusOr<std::unique_ptr<loom::LoadedModel>> model = loom::LoadModel(options);
  if (!model.ok()) return 0;
  if ((*model)->max_model_len <= 0 || (*model)->tokenizer == nullptr) std::abort();
  const std::vector<int32_t> ids = (*model)->tokenizer->Encode(loom::fuzz::kSampleText, true);
  (void)(*model)->tokenizer->Decode(ids);
  return 0;
}
