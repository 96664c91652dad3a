#include "model/safetensors.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/config.h"
#include "tests/fixtures/fixture_util.h"

namespace loom {
namespace {

using ::loom::testing::FixturePath;

TEST(SafetensorsTest, LoadsShardedBf16) {
  auto w = LoadSafetensorsDir(FixturePath("tiny/llama3"));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w)->size(), 2u + 2u * 9u + 1u);  // embed, norm, head + 9 per layer
  const Tensor* q = (*w)->Find("model.layers.1.self_attn.q_proj.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype, DType::kBF16);
  EXPECT_EQ(q->shape, (std::vector<int64_t>{64, 64}));
  std::vector<float> f(q->num_elements());
  (*w)->ToFloat32(*q, f);
  double sum_sq = 0;
  for (float v : f) sum_sq += v * v;
  EXPECT_GT(sum_sq, 1.0);  // real data, not zeros
  ASSERT_NE((*w)->Find("lm_head.weight"), nullptr);
}

TEST(SafetensorsTest, LoadsF16AndF32WithBiases) {
  auto llama2 = LoadSafetensorsDir(FixturePath("tiny/llama2"));
  ASSERT_TRUE(llama2.ok()) << llama2.status();
  EXPECT_EQ((*llama2)->Find("model.norm.weight")->dtype, DType::kF16);
  auto qwen2 = LoadSafetensorsDir(FixturePath("tiny/qwen2"));
  ASSERT_TRUE(qwen2.ok()) << qwen2.status();
  const Tensor* bias = (*qwen2)->Find("model.layers.0.self_attn.k_proj.bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->dtype, DType::kF32);
  EXPECT_EQ(bias->shape, std::vector<int64_t>{32});
  auto tied = LoadSafetensorsDir(FixturePath("tiny/llama32_tied"));
  ASSERT_TRUE(tied.ok()) << tied.status();
  EXPECT_EQ((*tied)->Find("lm_head.weight"), nullptr);
}

TEST(ConfigTest, ReadsEveryTinyConfig) {
  auto llama3 = ConfigFromJson(FixturePath("tiny/llama3/config.json"));
  ASSERT_TRUE(llama3.ok()) << llama3.status();
  EXPECT_EQ(llama3->architecture, "LlamaForCausalLM");
  EXPECT_EQ(llama3->rope_scaling, RopeScalingType::kLlama3);
  EXPECT_FLOAT_EQ(llama3->rope_theta, 500000.0f);
  EXPECT_FLOAT_EQ(llama3->rope_factor, 8.0f);
  EXPECT_EQ(llama3->rope_original_max_position, 64);
  EXPECT_EQ(llama3->head_dim, 16);
  EXPECT_EQ(llama3->num_kv_heads, 2);
  EXPECT_EQ(llama3->eos_token_ids.size(), 2u);
  EXPECT_FALSE(llama3->tie_word_embeddings);

  auto tied = ConfigFromJson(FixturePath("tiny/llama32_tied/config.json"));
  ASSERT_TRUE(tied.ok()) << tied.status();
  EXPECT_TRUE(tied->tie_word_embeddings);
  EXPECT_EQ(tied->rope_scaling, RopeScalingType::kLlama3);  // from rope_parameters
  EXPECT_FLOAT_EQ(tied->rope_theta, 500000.0f);

  auto qwen2 = ConfigFromJson(FixturePath("tiny/qwen2/config.json"));
  ASSERT_TRUE(qwen2.ok()) << qwen2.status();
  EXPECT_TRUE(qwen2->attention_bias);
  EXPECT_FLOAT_EQ(qwen2->rope_theta, 1000000.0f);
  EXPECT_EQ(qwen2->rope_scaling, RopeScalingType::kNone);
  EXPECT_FALSE(qwen2->bos_token_id.has_value());

  auto mistral = ConfigFromJson(FixturePath("tiny/mistral/config.json"));
  ASSERT_TRUE(mistral.ok()) << mistral.status();
  EXPECT_EQ(mistral->architecture, "MistralForCausalLM");
  EXPECT_EQ(mistral->max_position_embeddings, 256);

  auto llama2 = ConfigFromJson(FixturePath("tiny/llama2/config.json"));
  ASSERT_TRUE(llama2.ok()) << llama2.status();
  EXPECT_EQ(llama2->bos_token_id, 1);
  EXPECT_EQ(llama2->eos_token_ids, std::vector<int32_t>{2});
}

TEST(ConfigTest, Llama3RopeScalingBands) {
  auto c = ConfigFromJson(FixturePath("tiny/llama3/config.json"));
  ASSERT_TRUE(c.ok());
  std::vector<float> inv = RopeInverseFrequencies(*c);
  ASSERT_EQ(inv.size(), 8u);
  ModelConfig plain = *c;
  plain.rope_scaling = RopeScalingType::kNone;
  std::vector<float> base = RopeInverseFrequencies(plain);
  // Wavelength 2*pi < 64/4: high frequency, unchanged.
  EXPECT_FLOAT_EQ(inv[0], base[0]);
  // Wavelength > 64: low frequency, divided by the factor.
  EXPECT_FLOAT_EQ(inv[7], base[7] / 8.0f);
  // In between: smoothly interpolated.
  EXPECT_LT(inv[1], base[1]);
  EXPECT_GT(inv[1], base[1] / 8.0f);
}

TEST(ConfigTest, SlidingWindowsAndBadConfigsFail) {
  auto c = ConfigFromJsonString(R"({"architectures": ["MistralForCausalLM"], "vocab_size": 10,
      "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 2,
      "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 32768,
      "sliding_window": 4096})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_position_embeddings, 32768);
  EXPECT_EQ(c->sliding_window, 4096);
  EXPECT_EQ(c->layer_sliding, (std::vector<bool>{true, true}));
  EXPECT_TRUE(IsSlidingLayer(*c, 1));
  EXPECT_EQ(c->head_dim, 4);
  // Qwen2 slides only with use_sliding_window, from max_window_layers on;
  // layer_types, where given, decide.
  const std::string qwen = R"({"architectures": ["Qwen2ForCausalLM"], "vocab_size": 10,
      "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 3, "num_attention_heads": 2,
      "max_position_embeddings": 1024, "sliding_window": 64, "max_window_layers": 1)";
  auto off = ConfigFromJsonString(qwen + "}");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->sliding_window, 0);
  auto on = ConfigFromJsonString(qwen + R"(, "use_sliding_window": true})");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(on->layer_sliding, (std::vector<bool>{false, true, true}));
  auto types = ConfigFromJsonString(qwen + R"(, "use_sliding_window": true, "layer_types":
      ["sliding_attention", "full_attention", "sliding_attention"]})");
  ASSERT_TRUE(types.ok()) << types.status();
  EXPECT_EQ(types->layer_sliding, (std::vector<bool>{true, false, true}));
  auto bad_types = ConfigFromJsonString(qwen + R"(, "use_sliding_window": true, "layer_types":
      ["sliding_attention"]})");
  EXPECT_THAT(bad_types.status().message(), ::testing::HasSubstr("layer_types has 1 entries"));
  EXPECT_EQ(ConfigFromJsonString(R"({"architectures": ["GPT2LMHeadModel"]})").status().code(),
            absl::StatusCode::kUnimplemented);
  // Nulls where Hugging Face allows them read as absent.
  auto nulls = ConfigFromJsonString(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 10,
      "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
      "num_attention_heads": 2, "head_dim": null, "rope_scaling": null, "eos_token_id": null,
      "tie_word_embeddings": null, "model_type": null, "rope_theta": null})");
  ASSERT_TRUE(nulls.ok()) << nulls.status();
  EXPECT_EQ(nulls->head_dim, 4);
  EXPECT_EQ(nulls->num_kv_heads, 2);
  EXPECT_FLOAT_EQ(nulls->rope_theta, 10000.0f);
  EXPECT_FALSE(ConfigFromJsonString("{").ok());
  // A size beyond int32 (or negative, or fractional) names the field, not UB.
  for (const char* size : {"2.5e69", "-8", "8.5"}) {
    auto huge = ConfigFromJsonString(absl::StrCat(
        R"({"model_type": "llama", "vocab_size": 10, "hidden_size": )", size,
        R"(, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2})"));
    ASSERT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument) << size;
    EXPECT_THAT(huge.status().message(),
                ::testing::HasSubstr("hidden_size must be a whole number in [0, 2147483647]"));
  }
  EXPECT_FALSE(ConfigFromJsonString(R"({"model_type": 5})").ok());
  EXPECT_FALSE(ConfigFromJsonString(R"({"model_type": "llama", "vocab_size": "x"})").ok());
  EXPECT_FALSE(ConfigFromJsonString(R"({"model_type": "llama", "vocab_size": 10,
      "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
      "num_attention_heads": 3, "num_key_value_heads": 2})")
                   .ok());
}

// Gemma 3 270M's config.json as transformers 5 writes it (rope_parameters per
// layer type), and what Loom reads from it.
TEST(ConfigTest, Gemma3) {
  auto c = ConfigFromJsonString(R"({"architectures": ["Gemma3ForCausalLM"],
      "model_type": "gemma3_text", "vocab_size": 262144, "hidden_size": 640,
      "intermediate_size": 2048, "num_hidden_layers": 18, "num_attention_heads": 4,
      "num_key_value_heads": 1, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
      "max_position_embeddings": 32768, "rms_norm_eps": 1e-06, "query_pre_attn_scalar": 256,
      "sliding_window": 512, "final_logit_softcapping": null, "attn_logit_softcapping": null,
      "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_TRUE(c->qk_norm && c->sandwich_norms);
  EXPECT_EQ(c->rms_norm_weight_offset, 1.0f);
  EXPECT_EQ(c->hidden_activation, Activation::kGeluTanh);
  EXPECT_EQ(c->embedding_scale, std::sqrt(640.0f));
  EXPECT_EQ(AttentionScale(*c), 0.0625f);
  EXPECT_EQ(c->rope_theta, 1e6f);
  EXPECT_EQ(c->rope_local_theta, 1e4f);
  EXPECT_EQ(c->sliding_window, 512);
  for (int32_t l = 0; l < 18; ++l) EXPECT_EQ(IsSlidingLayer(*c, l), (l + 1) % 6 != 0) << l;
  // The sliding layers' RoPE runs on their own base.
  EXPECT_FLOAT_EQ(RopeInverseFrequencies(*c, true)[1], std::pow(1e4f, -2.0f / 256));
  EXPECT_FLOAT_EQ(RopeInverseFrequencies(*c, false)[1], std::pow(1e6f, -2.0f / 256));
  auto softcap = ConfigFromJsonString(R"({"architectures": ["Gemma3ForCausalLM"],
      "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
      "num_attention_heads": 2, "final_logit_softcapping": 30.0})");
  EXPECT_EQ(softcap.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(softcap.status().message(), ::testing::HasSubstr("final_logit_softcapping"));
  auto qwen3 = ConfigFromJsonString(R"({"architectures": ["Qwen3ForCausalLM"], "vocab_size": 10,
      "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
      "num_attention_heads": 2, "head_dim": 8, "attention_bias": false})");
  ASSERT_TRUE(qwen3.ok()) << qwen3.status();
  EXPECT_TRUE(qwen3->qk_norm);
  EXPECT_FALSE(qwen3->attention_bias || qwen3->sandwich_norms);
  EXPECT_EQ(qwen3->head_dim, 8);
}

std::string WriteFile(const std::string& name, const std::string& header, size_t data_bytes,
                      bool lie_about_length = false) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream out(path, std::ios::binary);
  uint64_t n = lie_about_length ? header.size() + 1000 : header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << std::string(data_bytes, '\0');
  return path;
}

TEST(SafetensorsTest, OverflowingShapeNamesTheTensorAndLimit) {
  WeightStore store;
  const absl::Status s = LoadSafetensorsFile(
      WriteFile("overflow.safetensors",
                R"({"w": {"dtype": "F32", "shape": [1099511627776, 1099511627776],)"
                R"( "data_offsets": [0, 16]}})",
                16),
      store);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tensor w: element count"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("2^62"), std::string::npos) << s.message();
}

TEST(SafetensorsTest, MalformedFilesAreErrors) {
  const std::string ok_header =
      R"({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}})";
  {
    WeightStore store;
    EXPECT_TRUE(LoadSafetensorsFile(WriteFile("ok.safetensors", ok_header, 16), store).ok());
  }
  struct Case {
    const char* name;
    std::string header;
    size_t data;
    bool lie;
  } cases[] = {
      {"long.safetensors", ok_header, 16, true},
      {"notjson.safetensors", "{nope", 16, false},
      {"outside.safetensors", ok_header, 8, false},
      {"size.safetensors", R"({"w": {"dtype": "F32", "shape": [3, 2], "data_offsets": [0, 16]}})",
       16, false},
      {"dtype.safetensors", R"({"w": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]}})", 16,
       false},
      {"types.safetensors", R"({"w": {"dtype": 1, "shape": "x", "data_offsets": [0, 16]}})", 16,
       false},
      {"neg.safetensors", R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 16]}})", 16,
       false},
      {"huge.safetensors",
       R"({"w": {"dtype": "F32", "shape": [1099511627776, 1099511627776], "data_offsets": [0, 16]}})",
       16, false},
      {"past.safetensors", R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1600]}})",
       16, false},
      {"order.safetensors", R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 16,
       false},
  };
  for (const Case& c : cases) {
    WeightStore store;
    EXPECT_FALSE(LoadSafetensorsFile(WriteFile(c.name, c.header, c.data, c.lie), store).ok())
        << c.name;
  }
  WeightStore store;
  const std::string tiny = ::testing::TempDir() + "/tiny.safetensors";
  std::ofstream(tiny) << "abc";
  EXPECT_FALSE(LoadSafetensorsFile(tiny, store).ok());
}

}  // namespace
}  // namespace loom
