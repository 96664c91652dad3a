// OpenAI request bodies are untrusted input: parse arbitrary bytes as a
// /v1/completions, a /v1/chat/completions, a /tokenize and a /detokenize body,
// and render what a failure would send back, as the HTTP front end does
// before any work.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "openai/chat_request.h"
#include "openai/completion_request.h"
#include "openai/openai_error.h"
#include "openai/tokenize.h"

namespace {

void RenderError(const absl::Status& status, loom::openai::Endpoint endpoint) {
  if (!status.ok()) {
    (void)loom::openai::RenderErrorBody(loom::openai::ToOpenAiError(status, endpoint));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view body(reinterpret_cast<const char*>(data), size);
  RenderError(loom::openai::ParseCompletionRequest(body).status(),
              loom::openai::Endpoint::kCompletions);
  RenderError(loom::openai::ParseChatRequest(body).status(),
              loom::openai::Endpoint::kChatCompletions);
  RenderError(loom::openai::ParseTokenizeRequest(body).status(),
              loom::openai::Endpoint::kCompletions);
  RenderError(loom::openai::ParseDetokenizeRequest(body).status(),
              loom::openai::Endpoint::kCompletions);
  return 0;
}
