// tokenizer.json is untrusted input: load arbitrary bytes as one and, when it
// loads, encode and decode a fixed text and look up the first pieces.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "model/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = loom::fuzz::WriteScratchFile("tokenizer.json", data, size);
  absl::StatusOr<std::unique_ptr<loom::Tokenizer>> tok = loom::Tokenizer::FromTokenizerJson(path);
  if (!tok.ok()) return 0;
  const std::vector<int32_t> ids = (*tok)->Encode(loom::fuzz::kSampleText, true);
  (void)(*tok)->Decode(ids);
  for (int32_t id = 0; id < std::min((*tok)->vocab_size(), 300); ++id) {
    (void)(*tok)->TokenBytes(id);
    (void)(*tok)->IsSpecial(id);
  }
  return 0;
}
