// RequestBuilder over arbitrary GenerateRequests: byte 0 sets max_model_len
// (2..257) of a byte-per-token fake model, the rest is the serialized request.
// Tool calls are in the hermes format, so that a forced tool_choice composes
// its grammar from the request's parameter schemas (no compiler: the request
// is then refused, after the composition).
// A request it accepts must fit: a non-empty prompt of in-vocabulary ids,
// 1 <= min_tokens... max_tokens (max_tokens 0 only with prompt_logprobs), and
// prompt + max_tokens <= max_model_len,
// whichever truncation mode it asked for.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/time/clock.h"
#include "loom/v1/generation.pb.h"
#include "server/request_builder.h"
#include "tests/server/fake_model_frontend.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const loom::testing::FakeModelFrontend model(2u + data[0]);
  loom::v1::GenerateRequest request;
  if (!request.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
  loom::RequestBuilder builder(model, {}, {}, {nullptr, loom::ToolCallFormat::kHermes});
  const absl::Time now = absl::Now();
  absl::StatusOr<loom::RequestParams> params = builder.Build(request, now, absl::InfiniteFuture());
  if (!params.ok()) return 0;
  const int64_t max_model_len = model.Info().max_model_len();
  const int64_t prompt = static_cast<int64_t>(params->prompt_token_ids.size());
  Check(prompt > 0);
  for (int32_t id : params->prompt_token_ids) {
    Check(id >= 0 && id < loom::testing::FakeModelFrontend::kVocabSize);
  }
  // max_tokens 0 only scores the prompt (prompt_logprobs): nothing is generated.
  Check(params->stopping.max_tokens >= 1 ||
        (params->stopping.max_tokens == 0 && params->prompt_logprobs >= 0));
  Check(params->stopping.min_tokens >= 0 &&
        params->stopping.min_tokens <= params->stopping.max_tokens);
  Check(prompt + params->stopping.max_tokens <= max_model_len);
  Check(!params->request_id.empty());
  return 0;
}
