// /v1/chat/completions responses: the "chat.completion" body and the
// "chat.completion.chunk" stream (SSE frames, see sse.h for the final [DONE]).
#pragma once

#include <string>

#include "loom/v1/generation.pb.h"
#include "openai/response_context.h"

namespace loom::openai {

std::string RenderChatCompletion(const ResponseContext& context,
                                 const v1::GenerateResponse& response);

// One engine delta as a chunk. The first chunk of each choice (`first`) carries
// delta.role = "assistant"; later ones only content (none once it is empty).
std::string RenderChatChunk(const ResponseContext& context, const v1::GenerateStreamResponse& delta,
                            bool first);

// The last chunk when stream_options.include_usage: no choices, the usage.
std::string RenderChatUsageChunk(const ResponseContext& context, const v1::Usage& usage);

}  // namespace loom::openai
