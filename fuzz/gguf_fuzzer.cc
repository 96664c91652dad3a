// GGUF files are untrusted input: parse arbitrary bytes, and when they parse,
// read every tensor's bytes (ASan checks the spans), derive the model config,
// the tokenizer and the weights as loomd would.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "formats/gguf_file.h"
#include "formats/mapped_file.h"
#include "fuzz/fuzz_util.h"
#include "model/config.h"
#include "model/gguf_weights.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                               reinterpret_cast<const std::byte*>(data) + size);
  absl::StatusOr<std::unique_ptr<loom::GgufFile>> gguf =
      loom::GgufFile::Parse(loom::MappedFile::FromBytes(std::move(bytes)));
  if (!gguf.ok()) return 0;
  for (const loom::GgufTensorInfo& t : (*gguf)->tensors()) loom::fuzz::Touch(t.data);
  if (absl::StatusOr<std::unique_ptr<loom::Tokenizer>> tok = loom::Tokenizer::FromGguf(**gguf);
      tok.ok()) {
    const std::vector<int32_t> ids = (*tok)->Encode(loom::fuzz::kSampleText, true);
    (void)(*tok)->Decode(ids);
  }
  if (absl::StatusOr<loom::ModelConfig> config = loom::ConfigFromGguf(**gguf); config.ok()) {
    (void)loom::LoadGgufWeights(**gguf, *config);
  }
  return 0;
}
