// Engine output types -> their loom.v1 protobuf counterparts, shared by the
// unary and the streaming Generate.
#pragma once

#include <vector>

#include "engine/request_output.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "loom/v1/generation.pb.h"

namespace loom {

void CopyUsage(const Usage& usage, v1::Usage& out);

void AppendLogprobs(const std::vector<TokenLogprobs>& logprobs,
                    google::protobuf::RepeatedPtrField<v1::TokenLogprob>& out);

// Appends the samples' new tokens, text and logprobs to the response's
// completions (made beforehand, one per sample), and their finish reasons.
void AppendToResponse(const RequestOutput& output, v1::GenerateResponse& response);

}  // namespace loom
