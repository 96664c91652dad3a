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

namespace {

constexpr char kTokenizerJson[] =
    R"({"added_tokens": [{"id": 5, "content": "<s>", "special": true},)"
    R"( {"id": 6, "content": "</s>", "special": true}],)"
    R"( "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},)"
    R"( "model": {"type": "BPE", "vocab": {"H": 0, "e": 1, "l": 2, "o": 3, "He": 4,)"
    R"( "<s>": 5, "</s>": 6}, "merges": [["H", "e"]]}})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)loom::ConfigFromJsonString(text);
  const std::string tokenizer_path = loom::fuzz::WriteScratchFile(
      "tokenizer.json", reinterpret_cast<const uint8_t*>(kTokenizerJson),
      sizeof(kTokenizerJson) - 1);
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
