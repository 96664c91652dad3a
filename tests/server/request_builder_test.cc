// Input resolution, max_model_len enforcement (reject or truncate), defaults,
// request ids and seeds.
#include "server/request_builder.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/fake_model_frontend.h"

namespace loom {
namespace {

using ::testing::ElementsAre;
using testing::FakeModelFrontend;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

class RequestBuilderTest : public ::testing::Test {
 protected:
  absl::StatusOr<RequestParams> Build(const v1::GenerateRequest& r) {
    return builder_.Build(r, absl::UnixEpoch(), absl::UnixEpoch() + absl::Seconds(5));
  }

  FakeModelFrontend model_{/*max_model_len=*/16};
  RequestBuilder builder_{model_};
};

TEST_F(RequestBuilderTest, PromptIsTokenizedWithBosByDefault) {
  v1::GenerateRequest r;
  r.set_prompt("ab");
  absl::StatusOr<RequestParams> p = Build(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->prompt_token_ids, ElementsAre(FakeModelFrontend::kBos, 'a', 'b'));
  r.set_add_special_tokens(false);
  EXPECT_THAT(Build(r)->prompt_token_ids, ElementsAre('a', 'b'));
}

TEST_F(RequestBuilderTest, ChatIsRenderedWithoutExtraSpecialTokens) {
  v1::GenerateRequest r;
  auto* m = r.mutable_messages()->add_messages();
  m->set_role("user");
  m->set_content("x");
  FakeModelFrontend roomy_model(/*max_model_len=*/64);
  RequestBuilder builder(roomy_model);
  absl::StatusOr<RequestParams> p = builder.Build(r, absl::Now(), absl::InfiniteFuture());
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string text = "user: x\nassistant: ";
  EXPECT_EQ(p->prompt_token_ids, std::vector<int32_t>(text.begin(), text.end()));
}

TEST(RequestBuilderGenerationDefaultsTest, FillOnlyTheFieldsARequestLeavesUnset) {
  FakeModelFrontend model(/*max_model_len=*/64);
  GenerationDefaults defaults;
  defaults.temperature = 0.2F;
  defaults.top_p = 0.5F;
  defaults.top_k = 7;
  defaults.repetition_penalty = 1.1F;
  defaults.max_tokens = 9;
  RequestBuilder builder(model, {}, defaults);
  v1::GenerateRequest r;
  r.mutable_prompt_token_ids()->add_ids(5);
  absl::StatusOr<RequestParams> p = builder.Build(r, absl::Now(), absl::InfiniteFuture());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FLOAT_EQ(p->sampling.temperature, 0.2F);
  EXPECT_FLOAT_EQ(p->sampling.top_p, 0.5F);
  EXPECT_EQ(p->sampling.top_k, 7);
  EXPECT_FLOAT_EQ(p->sampling.repetition_penalty, 1.1F);
  EXPECT_FLOAT_EQ(p->sampling.min_p, 0.0F);  // not in the defaults: the API's
  EXPECT_EQ(p->stopping.max_tokens, 9);

  // A field the request sets wins, 0 included.
  r.mutable_sampling()->set_temperature(0);
  r.mutable_sampling()->set_top_k(0);
  r.mutable_stopping()->set_max_tokens(3);
  p = builder.Build(r, absl::Now(), absl::InfiniteFuture());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FLOAT_EQ(p->sampling.temperature, 0.0F);
  EXPECT_EQ(p->sampling.top_k, 0);
  EXPECT_FLOAT_EQ(p->sampling.top_p, 0.5F);
  EXPECT_EQ(p->stopping.max_tokens, 3);
}

TEST(RequestBuilderGenerationDefaultsTest, DefaultMaxTokensYieldsToTheContext) {
  FakeModelFrontend model(/*max_model_len=*/16);
  GenerationDefaults defaults;
  defaults.max_tokens = 100;
  RequestBuilder builder(model, {}, defaults);
  v1::GenerateRequest r;
  for (int i = 0; i < 10; ++i) r.mutable_prompt_token_ids()->add_ids(5);
  absl::StatusOr<RequestParams> p = builder.Build(r, absl::Now(), absl::InfiniteFuture());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->stopping.max_tokens, 6);  // 16 - 10, not the default's 100
}

TEST_F(RequestBuilderTest, AppliesDefaultsAndCopiesFields) {
  v1::GenerateRequest r;
  r.mutable_prompt_token_ids()->add_ids(5);
  r.set_priority(-3);
  r.set_cache_salt("salt");
  r.set_logprobs(2);
  auto* s = r.mutable_sampling();
  s->set_temperature(0.5F);
  s->set_n(3);
  (*s->mutable_logit_bias())[9] = 1;
  (*s->mutable_logit_bias())[4] = -1;
  r.mutable_stopping()->add_stop("\n");
  r.mutable_stopping()->set_ignore_eos(true);
  absl::StatusOr<RequestParams> p = Build(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->sampling.temperature, 0.5F);
  EXPECT_EQ(p->sampling.top_p, 1.0F);
  EXPECT_EQ(p->sampling.num_logprobs, 2);
  EXPECT_THAT(p->sampling.logit_bias,
              ElementsAre(std::pair<int32_t, float>(4, -1), std::pair<int32_t, float>(9, 1)));
  EXPECT_EQ(p->n, 3);
  EXPECT_EQ(p->priority, -3);
  EXPECT_EQ(p->cache_salt, "salt");
  EXPECT_THAT(p->stopping.stop, ElementsAre("\n"));
  EXPECT_TRUE(p->stopping.ignore_eos);
  // max_tokens defaults to 256 capped to what max_model_len leaves: 16 - 1.
  EXPECT_EQ(p->stopping.max_tokens, 15);
  EXPECT_EQ(p->arrival_time, absl::UnixEpoch());
  EXPECT_EQ(p->deadline, absl::UnixEpoch() + absl::Seconds(5));
}

TEST_F(RequestBuilderTest, AssignsRequestIdAndSeedOnlyWhenUnset) {
  v1::GenerateRequest r;
  r.set_prompt("a");
  std::set<std::string> ids;
  std::set<uint64_t> seeds;
  for (int i = 0; i < 8; ++i) {
    absl::StatusOr<RequestParams> p = Build(r);
    ASSERT_TRUE(p.ok());
    EXPECT_THAT(
        p->request_id,
        MatchesRegex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"));
    ids.insert(p->request_id);
    seeds.insert(p->sampling.seed);
  }
  EXPECT_EQ(ids.size(), 8U);
  EXPECT_EQ(seeds.size(), 8U);

  r.set_request_id("mine");
  r.mutable_sampling()->set_seed(42);
  absl::StatusOr<RequestParams> p = Build(r);
  EXPECT_EQ(p->request_id, "mine");
  EXPECT_EQ(p->sampling.seed, 42U);
}

TEST_F(RequestBuilderTest, RejectsTooLongPromptWithoutTruncation) {
  v1::GenerateRequest r;
  r.set_prompt(std::string(16, 'x'));  // 17 tokens with BOS
  absl::StatusOr<RequestParams> p = Build(r);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(), "prompt has 17 tokens; max_model_len is 16");
}

TEST_F(RequestBuilderTest, RejectsMaxTokensBeyondTheContext) {
  v1::GenerateRequest r;
  r.set_prompt("abc");  // 4 tokens
  r.mutable_stopping()->set_max_tokens(13);
  absl::StatusOr<RequestParams> p = Build(r);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr("stopping.max_tokens must be in [1, 12]"));
  r.mutable_stopping()->set_max_tokens(12);
  EXPECT_EQ(Build(r)->stopping.max_tokens, 12);
  r.mutable_stopping()->set_max_tokens(16);
  EXPECT_THAT(std::string(Build(r).status().message()),
              HasSubstr("stopping.max_tokens must be in [1, 15]; got 16"));
}

TEST_F(RequestBuilderTest, MinTokensMustFitTheDefaultMaxTokens) {
  v1::GenerateRequest r;
  r.set_prompt("abc");  // 4 tokens: default max_tokens is 12
  r.mutable_stopping()->set_min_tokens(13);
  EXPECT_THAT(std::string(Build(r).status().message()),
              HasSubstr("stopping.min_tokens must be in [0, 12]; got 13"));
}

TEST_F(RequestBuilderTest, TruncatesLeftOrRightLeavingRoomForMaxTokens) {
  v1::GenerateRequest r;
  r.set_prompt("abcdefghijklmnopqrstuvwxyz");
  r.set_add_special_tokens(false);
  r.mutable_stopping()->set_max_tokens(10);
  r.set_truncate(v1::TRUNCATION_LEFT);
  absl::StatusOr<RequestParams> p = Build(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->prompt_token_ids, ElementsAre('u', 'v', 'w', 'x', 'y', 'z'));
  EXPECT_EQ(p->stopping.max_tokens, 10);

  r.set_truncate(v1::TRUNCATION_RIGHT);
  p = Build(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->prompt_token_ids, ElementsAre('a', 'b', 'c', 'd', 'e', 'f'));
}

TEST_F(RequestBuilderTest, TruncationWithoutMaxTokensKeepsRoomForOutput) {
  v1::GenerateRequest r;
  r.set_prompt(std::string(40, 'x'));
  r.set_truncate(v1::TRUNCATION_LEFT);
  absl::StatusOr<RequestParams> p = Build(r);
  ASSERT_TRUE(p.ok()) << p.status();
  // The default output (256, capped to max_model_len - 1 = 15) leaves 1 token.
  EXPECT_EQ(p->prompt_token_ids.size(), 1U);
  EXPECT_EQ(p->stopping.max_tokens, 15);
}

TEST_F(RequestBuilderTest, TokenizeUsesTheSameInputRules) {
  v1::TokenizeRequest r;
  r.set_text("hi");
  EXPECT_THAT(*builder_.Tokenize(r), ElementsAre(FakeModelFrontend::kBos, 'h', 'i'));
  r.set_add_special_tokens(false);
  EXPECT_THAT(*builder_.Tokenize(r), ElementsAre('h', 'i'));
  EXPECT_EQ(builder_.Tokenize(v1::TokenizeRequest()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loom
