// /v1/completions responses: the "text_completion" body and its stream chunks
// (SSE frames, see sse.h for the final [DONE]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "loom/v1/generation.pb.h"
#include "openai/response_context.h"

namespace loom::openai {

// One GenerateResponse per prompt, in prompt order. With options.echo,
// echo_prompts[p] (prompt p's text) is prepended to each of its choices.
// Choice index = prompt * options.n + completion.index; usage sums the prompts.
std::string RenderCompletionResponse(const ResponseContext& context,
                                     std::span<const v1::GenerateResponse> responses,
                                     std::span<const std::string> echo_prompts = {});

// data: {"object": "text_completion", "choices": [one choice]} for one engine
// delta of prompt `prompt_index`. text_offset is the byte offset of the delta
// within its choice's text (logprobs' text_offset).
std::string RenderCompletionChunk(const ResponseContext& context,
                                  const v1::GenerateStreamResponse& delta, uint32_t prompt_index,
                                  size_t text_offset = 0);

// The last chunk when stream_options.include_usage: no choices, the request's usage.
std::string RenderCompletionUsageChunk(const ResponseContext& context, const v1::Usage& usage);

}  // namespace loom::openai
