// Every invalid-input case of API.md §1 is rejected with INVALID_ARGUMENT and a
// message naming the field and its allowed range.
#include "server/request_validator.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loom/v1/generation.pb.h"

namespace loom {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kVocab = 300;

v1::GenerateRequest Valid() {
  v1::GenerateRequest r;
  r.set_prompt("hello");
  return r;
}

void ExpectInvalid(const v1::GenerateRequest& request, const std::string& message) {
  absl::Status status = ValidateGenerateRequest(request, kVocab);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(message));
}

TEST(RequestValidatorTest, AcceptsMinimalAndFullRequests) {
  EXPECT_TRUE(ValidateGenerateRequest(Valid(), kVocab).ok());

  v1::GenerateRequest r = Valid();
  r.set_request_id(std::string(128, 'a'));
  auto* s = r.mutable_sampling();
  s->set_temperature(0);
  s->set_top_p(1);
  s->set_top_k(0);
  s->set_min_p(1);
  s->set_repetition_penalty(0.01F);
  s->set_presence_penalty(-2);
  s->set_frequency_penalty(2);
  s->set_seed(7);
  s->set_n(16);
  (*s->mutable_logit_bias())[299] = -100;
  (*s->mutable_logit_bias())[0] = 100;
  auto* st = r.mutable_stopping();
  st->set_max_tokens(1);
  st->set_min_tokens(1);
  for (int i = 0; i < 16; ++i) {
    st->add_stop(std::string(i == 0 ? 256 : 1, 'x'));
  }
  st->add_stop_token_ids(299);
  r.set_logprobs(20);
  r.set_truncate(v1::TRUNCATION_RIGHT);
  EXPECT_TRUE(ValidateGenerateRequest(r, kVocab).ok());
}

TEST(RequestValidatorTest, RejectsBadInput) {
  ExpectInvalid(v1::GenerateRequest(), "input must be set");
  v1::GenerateRequest r;
  r.set_prompt("");
  ExpectInvalid(r, "prompt must not be empty");
  r.mutable_prompt_token_ids();
  ExpectInvalid(r, "prompt_token_ids.ids must not be empty");
  r.mutable_prompt_token_ids()->add_ids(1);
  r.mutable_prompt_token_ids()->add_ids(300);
  ExpectInvalid(r, "prompt_token_ids.ids[1] must be a token id in [0, 300); got 300");
  r.mutable_prompt_token_ids()->set_ids(1, -1);
  ExpectInvalid(r, "prompt_token_ids.ids[1] must be a token id in [0, 300); got -1");
  r.mutable_messages();
  ExpectInvalid(r, "messages.messages must not be empty");
  auto* m = r.mutable_messages()->add_messages();
  m->set_role("user");
  EXPECT_TRUE(ValidateGenerateRequest(r, kVocab).ok());
  m->set_role("robot");
  ExpectInvalid(
      r, "messages.messages[0].role must be one of system, user, assistant, tool; got \"robot\"");
}

TEST(RequestValidatorTest, RejectsLongRequestId) {
  v1::GenerateRequest r = Valid();
  r.set_request_id(std::string(129, 'a'));
  ExpectInvalid(r, "request_id must be at most 128 characters; got 129 characters");
}

TEST(RequestValidatorTest, RejectsSamplingOutOfRange) {
  struct Case {
    void (*set)(v1::SamplingParams&);
    std::string message;
  };
  const Case cases[] = {
      {[](v1::SamplingParams& s) { s.set_temperature(250); },
       "sampling.temperature must be in [0, 100]; got 250"},
      {[](v1::SamplingParams& s) { s.set_temperature(-0.5F); },
       "sampling.temperature must be in [0, 100]; got -0.5"},
      {[](v1::SamplingParams& s) { s.set_temperature(std::nanf("")); },
       "sampling.temperature must be in [0, 100]"},
      {[](v1::SamplingParams& s) { s.set_top_p(0); }, "sampling.top_p must be in (0, 1]; got 0"},
      {[](v1::SamplingParams& s) { s.set_top_p(1.5F); },
       "sampling.top_p must be in (0, 1]; got 1.5"},
      {[](v1::SamplingParams& s) { s.set_top_k(-1); }, "sampling.top_k must be >= 0"},
      {[](v1::SamplingParams& s) { s.set_min_p(-0.1F); }, "sampling.min_p must be in [0, 1]"},
      {[](v1::SamplingParams& s) { s.set_min_p(1.1F); }, "sampling.min_p must be in [0, 1]"},
      {[](v1::SamplingParams& s) { s.set_repetition_penalty(0); },
       "sampling.repetition_penalty must be > 0; got 0"},
      {[](v1::SamplingParams& s) { s.set_presence_penalty(2.5F); },
       "sampling.presence_penalty must be in [-2, 2]; got 2.5"},
      {[](v1::SamplingParams& s) { s.set_frequency_penalty(-3); },
       "sampling.frequency_penalty must be in [-2, 2]; got -3"},
      {[](v1::SamplingParams& s) { s.set_n(0); }, "sampling.n must be in [1, 16]; got 0"},
      {[](v1::SamplingParams& s) { s.set_n(17); }, "sampling.n must be in [1, 16]; got 17"},
      {[](v1::SamplingParams& s) { (*s.mutable_logit_bias())[300] = 1; },
       "sampling.logit_bias key must be a token id in [0, 300); got 300"},
      {[](v1::SamplingParams& s) { (*s.mutable_logit_bias())[5] = 101; },
       "sampling.logit_bias[5] must be in [-100, 100]; got 101"},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest r = Valid();
    c.set(*r.mutable_sampling());
    ExpectInvalid(r, c.message);
  }
}

TEST(RequestValidatorTest, RejectsStoppingOutOfRange) {
  v1::GenerateRequest r = Valid();
  r.mutable_stopping()->set_max_tokens(0);
  ExpectInvalid(r, "stopping.max_tokens must be >= 1; got 0");
  // Zero asks for the prompt's scores alone.
  r.set_prompt_logprobs(0);
  EXPECT_TRUE(ValidateGenerateRequest(r, kVocab).ok());
  r.clear_prompt_logprobs();

  r = Valid();
  r.mutable_stopping()->set_max_tokens(4);
  r.mutable_stopping()->set_min_tokens(5);
  ExpectInvalid(r, "stopping.min_tokens must be in [0, stopping.max_tokens] = [0, 4]; got 5");

  r = Valid();
  const std::vector<std::string> seventeen(17, "x");
  r.mutable_stopping()->mutable_stop()->Assign(seventeen.begin(), seventeen.end());
  ExpectInvalid(r, "stopping.stop must have at most 16 strings; got 17");

  r = Valid();
  r.mutable_stopping()->add_stop("ok");
  r.mutable_stopping()->add_stop("");
  ExpectInvalid(r, "stopping.stop[1] must be 1..256 bytes long; got 0 bytes");
  r.mutable_stopping()->set_stop(1, std::string(257, 'x'));
  ExpectInvalid(r, "stopping.stop[1] must be 1..256 bytes long; got 257 bytes");

  r = Valid();
  r.mutable_stopping()->add_stop_token_ids(3);
  r.mutable_stopping()->add_stop_token_ids(1000);
  ExpectInvalid(r, "stopping.stop_token_ids[1] must be a token id in [0, 300); got 1000");
}

TEST(RequestValidatorTest, RejectsLogprobsAndTruncation) {
  v1::GenerateRequest r = Valid();
  r.set_logprobs(21);
  ExpectInvalid(r, "logprobs must be in [0, 20]; got 21");
  r.set_logprobs(-1);
  ExpectInvalid(r, "logprobs must be in [0, 20]; got -1");

  r = Valid();
  r.set_prompt_logprobs(0);
  EXPECT_TRUE(ValidateGenerateRequest(r, kVocab).ok());
  r.set_prompt_logprobs(20);
  EXPECT_TRUE(ValidateGenerateRequest(r, kVocab).ok());
  r.set_prompt_logprobs(21);
  ExpectInvalid(r, "prompt_logprobs must be in [0, 20]; got 21");
  r.set_prompt_logprobs(-1);
  ExpectInvalid(r, "prompt_logprobs must be in [0, 20]; got -1");

  r = Valid();
  r.set_truncate(static_cast<v1::Truncation>(9));
  ExpectInvalid(r,
                "truncate must be one of TRUNCATION_UNSPECIFIED, TRUNCATION_LEFT, "
                "TRUNCATION_RIGHT; got 9");
}

TEST(RequestValidatorTest, LogitBiasEntriesAreLimitedByMaxLogitBias) {
  v1::GenerateRequest r = Valid();
  for (int32_t id = 0; id < 5; ++id) (*r.mutable_sampling()->mutable_logit_bias())[id] = 1;
  EXPECT_TRUE(ValidateGenerateRequest(r, kVocab, {.max_logit_bias = 5}).ok());
  const absl::Status status = ValidateGenerateRequest(r, kVocab, {.max_logit_bias = 4});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "sampling.logit_bias must have at most 4 entries; got 5 entries");
  EXPECT_TRUE(ValidateGenerateRequest(r, kVocab).ok());  // default limit: kDefaultMaxLogitBias
}

TEST(RequestValidatorTest, RejectsFieldsOverTheirLimits) {
  RequestLimits limits;
  limits.max_stop_token_ids = 3;
  limits.max_cache_salt_bytes = 8;
  limits.max_prompt_bytes = 10;
  limits.max_prompt_tokens = 4;
  const auto expect = [&limits](const v1::GenerateRequest& r, const std::string& message) {
    const absl::Status status = ValidateGenerateRequest(r, kVocab, limits);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(message));
  };

  v1::GenerateRequest r = Valid();
  for (int i = 0; i < 3; ++i) r.mutable_stopping()->add_stop_token_ids(i);
  r.set_cache_salt(std::string(8, 's'));
  r.set_prompt(std::string(10, 'p'));
  r.set_priority(kMaxPriority);
  EXPECT_TRUE(ValidateGenerateRequest(r, kVocab, limits).ok());

  r.mutable_stopping()->add_stop_token_ids(3);
  expect(r, "stopping.stop_token_ids must have at most 3 entries; got 4 entries");
  r.mutable_stopping()->mutable_stop_token_ids()->RemoveLast();

  r.set_cache_salt(std::string(9, 's'));
  expect(r, "cache_salt must have at most 8 bytes; got 9 bytes");
  r.set_cache_salt("");

  r.set_prompt(std::string(11, 'p'));
  expect(r, "prompt must have at most 10 bytes; got 11 bytes");

  auto* m = r.mutable_messages()->add_messages();
  m->set_role("user");
  m->set_content("1234567");
  expect(r, "messages (turns and tools together) must have at most 10 bytes; got 11 bytes");
  m->set_content("123456");
  EXPECT_TRUE(ValidateGenerateRequest(r, kVocab, limits).ok());

  for (int i = 0; i < 5; ++i) r.mutable_prompt_token_ids()->add_ids(i);
  expect(r, "prompt_token_ids.ids must have at most 4 entries; got 5 entries");
  r.mutable_prompt_token_ids()->mutable_ids()->RemoveLast();
  EXPECT_TRUE(ValidateGenerateRequest(r, kVocab, limits).ok());

  r.set_priority(kMaxPriority + 1);
  expect(r, "priority must be in [-1000000, 1000000]; got 1000001");
  r.set_priority(kMinPriority - 1);
  expect(r, "priority must be in [-1000000, 1000000]; got -1000001");
}

TEST(RequestValidatorTest, DefaultLimitsAcceptTheirMaximumAndRejectOneMore) {
  const RequestLimits limits;
  v1::GenerateRequest r = Valid();
  for (int i = 0; i < limits.max_stop_token_ids; ++i) r.mutable_stopping()->add_stop_token_ids(1);
  r.set_cache_salt(std::string(limits.max_cache_salt_bytes, 's'));
  EXPECT_TRUE(ValidateGenerateRequest(r, kVocab).ok());
  r.mutable_stopping()->add_stop_token_ids(1);
  EXPECT_EQ(ValidateGenerateRequest(r, kVocab).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RequestValidatorTest, TokenizeRequest) {
  v1::TokenizeRequest r;
  EXPECT_EQ(ValidateTokenizeRequest(r).code(), absl::StatusCode::kInvalidArgument);
  r.set_text("");
  EXPECT_TRUE(ValidateTokenizeRequest(r).ok());
  r.mutable_messages()->add_messages()->set_role("narrator");
  absl::Status status = ValidateTokenizeRequest(r);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("messages.messages[0].role"));
}

TEST(ValidateGenerationDefaultsTest, SameRangesAsTheRequestFields) {
  EXPECT_TRUE(ValidateGenerationDefaults({}).ok());
  GenerationDefaults d;
  d.temperature = 0.7F;
  d.top_p = 0.9F;
  d.max_tokens = 1;
  EXPECT_TRUE(ValidateGenerationDefaults(d).ok());
  d.temperature = 250.0F;
  EXPECT_THAT(std::string(ValidateGenerationDefaults(d).message()),
              HasSubstr("sampling.temperature must be in [0, 100]; got 250"));
  d.temperature.reset();
  d.top_p = 0.0F;
  EXPECT_THAT(std::string(ValidateGenerationDefaults(d).message()),
              HasSubstr("sampling.top_p must be in (0, 1]"));
  d.top_p.reset();
  d.max_tokens = 0;
  EXPECT_THAT(std::string(ValidateGenerationDefaults(d).message()),
              HasSubstr("max_tokens must be >= 1; got 0"));
}

}  // namespace
}  // namespace loom
