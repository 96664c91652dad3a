// tokenizer.json is untrusted input, and so is the text it encodes: the bytes
// up to the first NUL are loaded as tokenizer.json and, when it loads, the
// rest (or a fixed sample when there is no NUL) is encoded and decoded, and
// the first pieces are looked up.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string path = loom::fuzz::WriteScratchFile("tokenizer.json", data,
                                                        nul == std::string_view::npos ? size : nul);
  const std::string_view text =
      nul == std::string_view::npos ? loom::fuzz::kSampleText : input.substr(nul + 1);
  absl::StatusOr<std::unique_ptr<loom::Tokenizer>> tok = loom::Tokenizer::FromTokenizerJson(path);
  if (!tok.ok()) return 0;
  const std::vector<int32_t> ids = (*tok)->Encode(text, true);
  (void)(*tok)->Decode(ids);
  for (int32_t id = 0; id < std::min((*tok)->vocab_size(), 300); ++id) {
    (void)(*tok)->TokenBytes(id);
    (void)(*tok)->IsSpecial(id);
  }
  return 0;
}
