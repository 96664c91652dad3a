#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/model.h"
#include "tests/fixtures/fixture_util.h"

namespace loom {
namespace {

using ::loom::testing::FixturePath;
using ::loom::testing::ReadFixtureJson;

class TinyModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyModelTest, LoadsDirectory) {
  absl::StatusOr<std::unique_ptr<LoadedModel>> m =
      LoadModel({.path = FixturePath("tiny/" + GetParam())});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->name, GetParam());
  EXPECT_EQ((*m)->max_model_len, 256);
  EXPECT_EQ((*m)->config.hidden_size, 64);
  EXPECT_FALSE((*m)->config.eos_token_ids.empty());
  ASSERT_NE((*m)->chat_template, nullptr) << (*m)->chat_template_error;
  EXPECT_LE((*m)->tokenizer->vocab_size(), (*m)->config.vocab_size);
  // The golden prompt ids come from the same tokenizer.
  const nlohmann::json golden = ReadFixtureJson("tiny/" + GetParam() + "/golden.json");
  for (const nlohmann::json& run : golden["runs"]) {
    EXPECT_EQ((*m)->tokenizer->Encode(run["text"].get<std::string>(), true),
              run["prompt_ids"].get<std::vector<int32_t>>());
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TinyModelTest,
                         ::testing::Values("llama3", "llama32_tied", "llama2", "mistral", "qwen2",
                                           "qwen3", "mistral_swa"));

// A GGUF names one eos token; the special tokens that end a chat turn stop
// generation too, as transformers' generation_config.json lists them.
TEST(ModelLoadTest, GgufStopsOnEndOfTurnTokens) {
  // The tiny Qwen3 GGUF: eos <|im_end|> (2); <|endoftext|> (0) is special too.
  absl::StatusOr<std::unique_ptr<LoadedModel>> qwen3 =
      LoadModel({.path = FixturePath("tiny/qwen3/model.gguf")});
  ASSERT_TRUE(qwen3.ok()) << qwen3.status();
  EXPECT_EQ((*qwen3)->config.eos_token_ids, (std::vector<int32_t>{2, 0}));
  // <|im_start|> opens a turn: not a stop.
  EXPECT_TRUE((*qwen3)->tokenizer->IsSpecial(1));

  // Gemma 3's GGUF names <eos> (1) alone; transformers stops on <end_of_turn>
  // (106) as well.
  const std::string gemma = ::loom::testing::Gemma3GgufIfPresent();
  if (gemma.empty()) GTEST_SKIP() << "Gemma 3 model not fetched (scripts/setup)";
  absl::StatusOr<std::unique_ptr<LoadedModel>> m = LoadModel({.path = gemma});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->config.eos_token_ids, (std::vector<int32_t>{1, 106}));
}

TEST(ModelLoadTest, DummyWeightsFromConfig) {
  absl::StatusOr<std::unique_ptr<LoadedModel>> m = LoadModel(
      {.path = FixturePath("tiny/qwen2/config.json"), .load_format = "dummy", .max_model_len = 64});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->max_model_len, 64);
  const Tensor* bias = (*m)->weights->Find("model.layers.1.self_attn.q_proj.bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->dtype, DType::kBF16);

  // Without a tokenizer next to the config, a byte-level fallback serves.
  const std::string dir = ::testing::TempDir() + "/dummy_model";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << R"({"architectures": ["LlamaForCausalLM"],
      "vocab_size": 300, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128})";
  m = LoadModel({.path = dir, .load_format = "dummy", .dummy_dtype = DType::kF32});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->tokenizer->vocab_size(), 300);
  EXPECT_EQ((*m)->chat_template, nullptr);
  EXPECT_EQ((*m)->weights->Find("lm_head.weight")->dtype, DType::kF32);
  // Same seed, same weights.
  auto again = LoadModel({.path = dir, .load_format = "dummy", .dummy_dtype = DType::kF32});
  ASSERT_TRUE(again.ok());
  const Tensor* a = (*m)->weights->Find("model.layers.1.mlp.up_proj.weight");
  const Tensor* b = (*again)->weights->Find("model.layers.1.mlp.up_proj.weight");
  EXPECT_TRUE(std::equal(a->data.begin(), a->data.end(), b->data.begin(), b->data.end()));
}

TEST(ModelLoadTest, Errors) {
  EXPECT_EQ(LoadModel({.path = "/nonexistent/model.gguf"}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadModel({.path = FixturePath("tiny/llama3/config.json")}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(LoadModel({.path = FixturePath("tiny/llama3"), .max_model_len = 100000}).ok());
  EXPECT_FALSE(LoadModel({.path = FixturePath("tiny/llama3"), .load_format = "onnx"}).ok());
  // A directory whose weights do not match its config.
  const std::string dir = ::testing::TempDir() + "/mismatch";
  std::filesystem::create_directories(dir);
  for (const char* f : {"model.safetensors", "tokenizer.json"}) {
    std::filesystem::copy_file(FixturePath(std::string("tiny/qwen2/") + f), dir + "/" + f,
                               std::filesystem::copy_options::overwrite_existing);
  }
  std::filesystem::copy_file(FixturePath("tiny/llama2/config.json"), dir + "/config.json",
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_FALSE(LoadModel({.path = dir}).ok());
}

TEST(ModelLoadTest, DefaultModel) {
  if (testing::DefaultGgufIfPresent().empty()) GTEST_SKIP() << "default model not fetched";
  absl::StatusOr<std::unique_ptr<LoadedModel>> m = LoadModel({});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->name, "SmolLM2-135M-Instruct.Q4_1");
  EXPECT_EQ((*m)->max_model_len, 8192);
  ASSERT_NE((*m)->chat_template, nullptr) << (*m)->chat_template_error;
  const nlohmann::json golden = ReadFixtureJson("smollm2/golden.json");
  const nlohmann::json& chat_run = golden["runs"].back();
  ASSERT_TRUE(chat_run["chat"].get<bool>());
  const std::vector<ChatMessage> messages = {{"user", "What is the capital of France?"}};
  absl::StatusOr<std::string> prompt = (*m)->chat_template->Render(messages, true);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_EQ(*prompt, chat_run["text"].get<std::string>());
  EXPECT_EQ((*m)->tokenizer->Encode(*prompt, true),
            chat_run["prompt_ids"].get<std::vector<int32_t>>());
}

}  // namespace
}  // namespace loom
