#include "openai/sse.h"

#include "absl/strings/str_cat.h"

namespace loom::openai {

std::string SseFrame(absl::string_view json) { return absl::StrCat("data: ", json, "\n\n"); }

std::string SseDone() { return "data: [DONE]\n\n"; }

std::string SseErrorEvent(const OpenAiError& error) { return SseFrame(RenderErrorBody(error)); }

}  // namespace loom::openai
