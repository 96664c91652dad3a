// /v1/chat/completions responses: the "chat.completion" body and the
// "chat.completion.chunk" stream (SSE frames, see sse.h for the final [DONE]).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "loom/v1/generation.pb.h"
#include "openai/response_context.h"

namespace loom::openai {

// A tool call as a message shows it. In a stream's delta, id and name are
// set on a call's first delta only and arguments is a fragment to append.
struct ToolCallOut {
  int index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

// A choice's text as the tool-call parser split it: the content left (empty:
// none) and the calls.
struct ChatChoiceMessage {
  std::string content;
  std::vector<ToolCallOut> tool_calls;
};

// messages: empty, or one per completion when the reply was parsed for tool
// calls. A choice with calls has "tool_calls" (content null when none is
// left) and, when it stopped, finish_reason "tool_calls".
std::string RenderChatCompletion(const ResponseContext& context,
                                 const v1::GenerateResponse& response,
                                 std::span<const ChatChoiceMessage> messages = {});

// One engine delta as a chunk. The first chunk of each choice (`first`) carries
// delta.role = "assistant"; later ones only content (none once it is empty).
// With `parsed` (the reply is parsed for tool calls) its content replaces
// the delta's text and its calls go out as delta.tool_calls; `called` (the
// choice has made a call) turns a final "stop" into "tool_calls".
std::string RenderChatChunk(const ResponseContext& context, const v1::GenerateStreamResponse& delta,
                            bool first, const ChatChoiceMessage* parsed = nullptr,
                            bool called = false);

// The last chunk when stream_options.include_usage: no choices, the usage.
std::string RenderChatUsageChunk(const ResponseContext& context, const v1::Usage& usage);

}  // namespace loom::openai
