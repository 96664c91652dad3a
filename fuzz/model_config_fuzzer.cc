// config.json and tokenizer_config.json are untrusted input: the same bytes
// are parsed as a model config and, next to a small valid tokenizer.json, as
// the tokenizer_config.json that supplies BOS/EOS; a tokenizer that loads
// must then encode and decode.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)loom::ConfigFromJsonString(text);
  const std::string tokenizer_path = loom::fuzz::WriteScratchFile(
      "tokenizer.json", reinterpret_cast<const uint8_t*>(loom::fuzz::kTokenizerJson.data()),
      loom::fuzz::kTokenizerJson.size());
  loom::fuzz::WriteScratchFile("tokenizer_config.json", data, size);
  absl::StatusOr<std::unique_ptr<loom::Tokenizer>> tok =
      loom::Tokenizer::FromTokenizerJson(tokenizer_path);
  if (tok.ok()) {
    const std::vector<int32_t> ids = (*tok)->Encode(loom::fuzz::kSampleText, true);
    (void)(*tok)->Decode(ids);
    (void)(*tok)->bos_token();
    (void)(*tok)->eos_token();
  }
  return 0;
}
