// Server-sent-event framing of OpenAI streams: one "data: <json>\n\n" frame
// per chunk, "data: [DONE]\n\n" at the end, and an error frame for a failure
// after the stream has started (the HTTP status is already sent by then).
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "openai/openai_error.h"

namespace loom::openai {

std::string SseFrame(absl::string_view json);

std::string SseDone();

// data: {"error": {...}}\n\n
std::string SseErrorEvent(const OpenAiError& error);

}  // namespace loom::openai
