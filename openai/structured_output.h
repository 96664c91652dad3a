// The OpenAI fields that constrain the output, read into the GenerateRequest's
// `constraint` oneof:
//   response_format: {"type": "text"} | {"type": "json_object"} |
//     {"type": "json_schema", "json_schema": {"name", "schema", "strict",
//     "description"}}
//   structured_outputs (vLLM): {"json": schema (object or text)} |
//     {"regex": ...} | {"choice": [...]} | {"grammar": ...} | {"json_object": true}
// At most one of the two may constrain; shapes only, the compiler judges the
// texts. Both /v1/completions and /v1/chat/completions accept them.
#pragma once

#include "absl/status/status.h"
#include "loom/v1/generation.pb.h"
#include "openai/ordered_json.h"
#include "openai/request_options.h"

namespace loom::openai {

// Sets request's constraint and options->constraint_field.
absl::Status ReadStructuredOutput(const Json& body, v1::GenerateRequest* request,
                                  OpenAiOptions* options);

// An INVALID_ARGUMENT about the request's constraint (its message starts
// with the proto field: "json_schema: at /properties/x: ...") renamed to the
// OpenAI field the client used ("response_format.json_schema.schema: at
// /properties/x: ...", param "response_format"); other statuses unchanged.
absl::Status RenameConstraintError(const absl::Status& status, const OpenAiOptions& options);

}  // namespace loom::openai
