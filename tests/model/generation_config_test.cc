// The sampling defaults a model ships: generation_config.json (lenient, as a
// model's file), the --override_generation_config object (strict), GGUF
// general.sampling.* keys, and LoadModel picking the file up.
#include "model/generation_config.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model.h"
#include "tests/fixtures/fixture_util.h"

namespace loom {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

TEST(GenerationConfigTest, ReadsTheSamplingKeysOfAHuggingFaceFile) {
  // The shape of a real generation_config.json: ids and flags beside the
  // sampling keys, which are all that is read.
  absl::StatusOr<GenerationDefaults> d = GenerationDefaultsFromJson(R"({
      "bos_token_id": 128000, "do_sample": true, "eos_token_id": [128001, 128009],
      "temperature": 0.6, "top_p": 0.9, "top_k": 50, "max_new_tokens": 2048,
      "repetition_penalty": null, "transformers_version": "4.45.0"})",
                                                                    /*strict=*/false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->temperature, Optional(0.6F));
  EXPECT_THAT(d->top_p, Optional(0.9F));
  EXPECT_THAT(d->top_k, Optional(50));
  EXPECT_THAT(d->max_tokens, Optional(2048));
  EXPECT_FALSE(d->repetition_penalty.has_value());
  EXPECT_FALSE(d->min_p.has_value());
  EXPECT_EQ(d->ToString(), "temperature=0.6 top_p=0.9 top_k=50 max_tokens=2048");
}

TEST(GenerationConfigTest, AModelFileIgnoresWhatItCannotUse) {
  absl::StatusOr<GenerationDefaults> d = GenerationDefaultsFromJson(
      R"({"temperature": "hot", "presence_penalty": 1.5, "top_k": -1})", /*strict=*/false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->temperature.has_value());
  EXPECT_FALSE(d->presence_penalty.has_value());  // not a generation_config.json key
  EXPECT_THAT(d->top_k, Optional(0));             // -1 (off) is Loom's 0
  EXPECT_EQ(GenerationDefaults{}.ToString(), "none");
}

TEST(GenerationConfigTest, TheOverrideFlagIsStrict) {
  absl::StatusOr<GenerationDefaults> d = GenerationDefaultsFromJson(
      R"({"temperature": 0.7, "presence_penalty": 0.5, "max_tokens": 64})", /*strict=*/true);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->presence_penalty, Optional(0.5F));
  EXPECT_THAT(d->max_tokens, Optional(64));

  EXPECT_THAT(std::string(GenerationDefaultsFromJson(R"({"temp": 1})", true).status().message()),
              HasSubstr("unknown key temp; the keys are temperature,"));
  EXPECT_THAT(std::string(GenerationDefaultsFromJson(R"({"top_k": 1.5})", true).status().message()),
              HasSubstr("top_k must be a 32-bit integer"));
  EXPECT_THAT(
      std::string(GenerationDefaultsFromJson(R"({"top_p": null})", true).status().message()),
      HasSubstr("top_p must be a number"));
  for (const char* bad : {"", "[1]", "{", "0.7"}) {
    EXPECT_THAT(std::string(GenerationDefaultsFromJson(bad, true).status().message()),
                HasSubstr("expected a JSON object"))
        << bad;
  }
}

TEST(GenerationConfigTest, OverrideFieldsReplaceTheModels) {
  GenerationDefaults model;
  model.temperature = 0.6F;
  model.top_p = 0.9F;
  GenerationDefaults over;
  over.temperature = 0.2F;
  over.max_tokens = 10;
  model.MergeFrom(over);
  EXPECT_EQ(model.ToString(), "temperature=0.2 top_p=0.9 max_tokens=10");
}

class GenerationConfigDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("loom_generation_config_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::copy(testing::FixturePath("tiny/llama3"), dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& text) { std::ofstream(dir_ / "generation_config.json") << text; }

  std::filesystem::path dir_;
};

TEST_F(GenerationConfigDirTest, LoadModelReadsTheFileBesideTheWeights) {
  absl::StatusOr<std::unique_ptr<LoadedModel>> m = LoadModel({.path = dir_.string()});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE((*m)->generation_defaults.empty());  // the fixture ships none

  Write(R"({"temperature": 0.3, "top_p": 0.8, "eos_token_id": 2})");
  m = LoadModel({.path = dir_.string()});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->generation_defaults.ToString(), "temperature=0.3 top_p=0.8");

  Write("{not json");
  m = LoadModel({.path = dir_.string()});
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("generation_config.json: expected a JSON object"));
}

}  // namespace
}  // namespace loom
