// Requests are untrusted input: decode arbitrary bytes as a GenerateRequest
// and as a TokenizeRequest (protobuf wire format) and validate them against
// the default model's vocabulary, as the service does before any work.
#include <cstddef>
#include <cstdint>

#include "loom/v1/generation.pb.h"
#include "server/request_validator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr int32_t kVocabSize = 49152;
  loom::v1::GenerateRequest generate;
  if (generate.ParseFromArray(data, static_cast<int>(size))) {
    (void)loom::ValidateGenerateRequest(generate, kVocabSize);
  }
  loom::v1::TokenizeRequest tokenize;
  if (tokenize.ParseFromArray(data, static_cast<int>(size))) {
    (void)loom::ValidateTokenizeRequest(tokenize);
  }
  return 0;
}
