#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "formats/gguf_file.h"
#include "formats/gguf_quant.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/config.h"
#include "model/generation_config.h"
#include "model/gguf_weights.h"
#include "model/weights.h"
#include "tests/fixtures/fixture_util.h"
#include "tests/kernels/random_blocks.h"

namespace loom {
namespace {

// Writes GGUF v3 files byte by byte, as llama.cpp's converter lays them out.
class GgufWriter {
 public:
  template <typename T>
  void Pod(std::vector<std::byte>& out, T v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  void Str(std::vector<std::byte>& out, const std::string& s) {
    Pod<uint64_t>(out, s.size());
    for (char c : s) out.push_back(static_cast<std::byte>(c));
  }
  template <typename T>
  void Kv(const std::string& key, GgufType type, T v) {
    Str(kv_, key);
    Pod<uint32_t>(kv_, static_cast<uint32_t>(type));
    Pod<T>(kv_, v);
    ++num_kv_;
  }
  void KvString(const std::string& key, const std::string& v) {
    Str(kv_, key);
    Pod<uint32_t>(kv_, static_cast<uint32_t>(GgufType::kString));
    Str(kv_, v);
    ++num_kv_;
  }
  void KvStrings(const std::string& key, const std::vector<std::string>& v) {
    Str(kv_, key);
    Pod<uint32_t>(kv_, static_cast<uint32_t>(GgufType::kArray));
    Pod<uint32_t>(kv_, static_cast<uint32_t>(GgufType::kString));
    Pod<uint64_t>(kv_, v.size());
    for (const std::string& s : v) Str(kv_, s);
    ++num_kv_;
  }
  // An array header of n values of elem, then payload_bytes zero bytes.
  void KvArray(const std::string& key, GgufType elem, uint64_t n, size_t payload_bytes) {
    Str(kv_, key);
    Pod<uint32_t>(kv_, static_cast<uint32_t>(GgufType::kArray));
    Pod<uint32_t>(kv_, static_cast<uint32_t>(elem));
    Pod<uint64_t>(kv_, n);
    kv_.insert(kv_.end(), payload_bytes, std::byte{0});
    ++num_kv_;
  }
  // ne in ggml order (ne[0] contiguous).
  void Tensor(const std::string& name, GgmlType type, std::vector<uint64_t> ne,
              const std::vector<std::byte>& data) {
    Str(infos_, name);
    Pod<uint32_t>(infos_, static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) Pod<uint64_t>(infos_, n);
    Pod<uint32_t>(infos_, static_cast<uint32_t>(type));
    while (data_.size() % 32 != 0) data_.push_back(std::byte{0});
    Pod<uint64_t>(infos_, data_.size());
    data_.insert(data_.end(), data.begin(), data.end());
    ++num_tensors_;
  }
  std::vector<std::byte> Finish() {
    std::vector<std::byte> out;
    for (char c : std::string("GGUF")) out.push_back(static_cast<std::byte>(c));
    Pod<uint32_t>(out, 3);
    Pod<uint64_t>(out, num_tensors_);
    Pod<uint64_t>(out, num_kv_);
    out.insert(out.end(), kv_.begin(), kv_.end());
    out.insert(out.end(), infos_.begin(), infos_.end());
    while (out.size() % 32 != 0) out.push_back(std::byte{0});
    out.insert(out.end(), data_.begin(), data_.end());
    return out;
  }

 private:
  std::vector<std::byte> kv_, infos_, data_;
  uint64_t num_kv_ = 0, num_tensors_ = 0;
};

std::vector<std::byte> Bytes(const std::vector<float>& v) {
  std::vector<std::byte> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> Ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i) + 0.1f);
  return v;
}

absl::StatusOr<std::unique_ptr<GgufFile>> ParseBytes(std::vector<std::byte> bytes) {
  return GgufFile::Parse(MappedFile::FromBytes(std::move(bytes)));
}

// A 1-layer llama with hidden 64, 2 heads of 32 (kv 1 head): small but with
// every tensor kind LoadGgufWeights maps. Q/K are stored permuted the way
// llama.cpp's converter does, from `q_hf` / `k_hf` (HF row order).
std::vector<std::byte> TinyLlamaGguf(const std::vector<float>& q_hf, const std::vector<float>& k_hf,
                                     GgmlType qk_type) {
  constexpr int kHidden = 64, kHeadDim = 32;
  GgufWriter w;
  w.KvString("general.architecture", "llama");
  w.Kv<uint32_t>("llama.block_count", GgufType::kUint32, 1);
  w.Kv<uint32_t>("llama.context_length", GgufType::kUint32, 128);
  w.Kv<uint32_t>("llama.embedding_length", GgufType::kUint32, kHidden);
  w.Kv<uint32_t>("llama.feed_forward_length", GgufType::kUint32, 96);
  w.Kv<uint32_t>("llama.attention.head_count", GgufType::kUint32, 2);
  w.Kv<uint32_t>("llama.attention.head_count_kv", GgufType::kUint32, 1);
  w.Kv<float>("llama.rope.freq_base", GgufType::kFloat32, 10000.0f);
  w.Kv<float>("llama.attention.layer_norm_rms_epsilon", GgufType::kFloat32, 1e-5f);
  w.Kv<uint8_t>("test.u8", GgufType::kUint8, 200);
  w.Kv<int8_t>("test.i8", GgufType::kInt8, -5);
  w.Kv<uint16_t>("test.u16", GgufType::kUint16, 60000);
  w.Kv<int16_t>("test.i16", GgufType::kInt16, -30000);
  w.Kv<int32_t>("test.i32", GgufType::kInt32, -7);
  w.Kv<uint64_t>("test.u64", GgufType::kUint64, uint64_t{1} << 40);
  w.Kv<int64_t>("test.i64", GgufType::kInt64, -(int64_t{1} << 40));
  w.Kv<double>("test.f64", GgufType::kFloat64, 0.25);
  w.Kv<uint8_t>("test.bool", GgufType::kBool, 1);
  std::vector<std::string> tokens;
  for (int i = 0; i < 32; ++i) tokens.push_back(absl::StrCat("t", i));
  w.KvStrings("tokenizer.ggml.tokens", tokens);
  auto permute = [&](const std::vector<float>& hf) {
    const size_t rows = hf.size() / kHidden;
    std::vector<float> out(hf.size());
    for (size_t r = 0; r < rows; ++r) {
      const size_t hf_row = GgufRowToHfRow(static_cast<int64_t>(r), kHeadDim);
      std::memcpy(&out[r * kHidden], &hf[hf_row * kHidden], kHidden * sizeof(float));
    }
    return out;
  };
  auto encode = [&](const std::vector<float>& v) {
    if (qk_type == GgmlType::kF32) return Bytes(v);
    std::vector<std::byte> b(v.size() / kQuantBlock * sizeof(BlockQ4_1));
    QuantizeQ4_1(v, b);
    return b;
  };
  std::vector<float> emb = Ramp(32 * kHidden, 1.0f);
  std::vector<std::byte> emb_q8(emb.size() / kQuantBlock * sizeof(BlockQ8_0));
  QuantizeQ8_0(emb, emb_q8);
  w.Tensor("token_embd.weight", GgmlType::kQ8_0, {kHidden, 32}, emb_q8);
  w.Tensor("output_norm.weight", GgmlType::kF32, {kHidden}, Bytes(std::vector<float>(kHidden, 1)));
  w.Tensor("blk.0.attn_norm.weight", GgmlType::kF32, {kHidden}, Bytes(Ramp(kHidden, 1)));
  w.Tensor("blk.0.ffn_norm.weight", GgmlType::kF32, {kHidden}, Bytes(Ramp(kHidden, 1)));
  w.Tensor("blk.0.attn_q.weight", qk_type, {kHidden, 64}, encode(permute(q_hf)));
  w.Tensor("blk.0.attn_k.weight", qk_type, {kHidden, 32}, encode(permute(k_hf)));
  w.Tensor("blk.0.attn_v.weight", GgmlType::kF32, {kHidden, 32}, Bytes(Ramp(32 * kHidden, 1)));
  std::vector<uint16_t> o(64 * kHidden);
  for (size_t i = 0; i < o.size(); ++i) o[i] = FloatToHalf(0.01f * static_cast<float>(i % 97));
  std::vector<std::byte> o_bytes(o.size() * 2);
  std::memcpy(o_bytes.data(), o.data(), o_bytes.size());
  w.Tensor("blk.0.attn_output.weight", GgmlType::kF16, {64, kHidden}, o_bytes);
  std::vector<float> ffn = Ramp(96 * kHidden, 0.5f);
  std::vector<std::byte> q40(ffn.size() / kQuantBlock * sizeof(BlockQ4_0));
  QuantizeQ4_0(ffn, q40);
  w.Tensor("blk.0.ffn_gate.weight", GgmlType::kQ4_0, {kHidden, 96}, q40);
  w.Tensor("blk.0.ffn_up.weight", GgmlType::kQ4_0, {kHidden, 96}, q40);
  w.Tensor("blk.0.ffn_down.weight", GgmlType::kQ4_0, {96, kHidden}, q40);
  return w.Finish();
}

TEST(GgufTest, ParsesMetadataOfEveryType) {
  auto gguf = ParseBytes(TinyLlamaGguf(Ramp(64 * 64, 1), Ramp(32 * 64, 1), GgmlType::kF32));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const GgufFile& f = **gguf;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.GetInt("test.u8"), 200);
  EXPECT_EQ(f.GetInt("test.i8"), -5);
  EXPECT_EQ(f.GetInt("test.u16"), 60000);
  EXPECT_EQ(f.GetInt("test.i16"), -30000);
  EXPECT_EQ(f.GetInt("test.i32"), -7);
  EXPECT_EQ(f.GetInt("test.u64"), int64_t{1} << 40);
  EXPECT_EQ(f.GetInt("test.i64"), -(int64_t{1} << 40));
  EXPECT_EQ(f.GetFloat("test.f64"), 0.25);
  EXPECT_EQ(f.GetBool("test.bool"), true);
  EXPECT_EQ(f.GetString("general.architecture"), "llama");
  ASSERT_NE(f.GetArray("tokenizer.ggml.tokens"), nullptr);
  EXPECT_EQ(f.GetArray("tokenizer.ggml.tokens")->size(), 32u);
  EXPECT_EQ(f.tensors().size(), 11u);
  const GgufTensorInfo* q = f.FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->ne, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(q->data.size(), 64u * 64u * 4u);
}

TEST(GgufTest, SamplingDefaultsFromGeneralSamplingKeys) {
  GgufWriter w;
  w.KvString("general.architecture", "llama");
  w.Kv<float>("general.sampling.temp", GgufType::kFloat32, 0.6f);
  w.Kv<float>("general.sampling.top_p", GgufType::kFloat32, 0.95f);
  w.Kv<int32_t>("general.sampling.top_k", GgufType::kInt32, 20);
  w.Kv<float>("general.sampling.penalty_repeat", GgufType::kFloat32, 1.1f);
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = ParseBytes(w.Finish());
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const GenerationDefaults d = GenerationDefaultsFromGguf(**gguf);
  EXPECT_EQ(d.ToString(), "temperature=0.6 top_p=0.95 top_k=20 repetition_penalty=1.1");

  GgufWriter none;
  none.KvString("general.architecture", "llama");
  gguf = ParseBytes(none.Finish());
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  EXPECT_TRUE(GenerationDefaultsFromGguf(**gguf).empty());
}

TEST(GgufTest, ConfigAndWeightsUnderHuggingFaceNames) {
  auto gguf = ParseBytes(TinyLlamaGguf(Ramp(64 * 64, 1), Ramp(32 * 64, 1), GgmlType::kF32));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  absl::StatusOr<ModelConfig> config = ConfigFromGguf(**gguf);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, "LlamaForCausalLM");
  EXPECT_EQ(config->head_dim, 32);
  EXPECT_EQ(config->num_kv_heads, 1);
  EXPECT_EQ(config->vocab_size, 32);
  EXPECT_TRUE(config->tie_word_embeddings);
  absl::StatusOr<std::unique_ptr<WeightStore>> w = LoadGgufWeights(**gguf, *config);
  ASSERT_TRUE(w.ok()) << w.status();
  const Tensor* emb = (*w)->Find("model.embed_tokens.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dtype, DType::kQ8_0);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{32, 64}));
  std::vector<float> out(emb->num_elements());
  (*w)->ToFloat32(*emb, out);
  const std::vector<float> ref = Ramp(32 * 64, 1.0f);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], ref[i], 1.0f / 127) << i;
  const Tensor* gate = (*w)->Find("model.layers.0.mlp.gate_proj.weight");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->shape, (std::vector<int64_t>{96, 64}));
  std::vector<float> g(gate->num_elements());
  (*w)->ToFloat32(*gate, g);
  const std::vector<float> ffn = Ramp(96 * 64, 0.5f);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], ffn[i], 0.5f / 7) << i;
  const Tensor* o = (*w)->Find("model.layers.0.self_attn.o_proj.weight");
  ASSERT_NE(o, nullptr);
  std::vector<uint16_t> bf(o->num_elements());
  (*w)->ToBFloat16(*o, bf);
  EXPECT_NEAR(BFloat16ToFloat(bf[5]), 0.05f, 1e-3);
  EXPECT_EQ((*w)->Find("lm_head.weight"), nullptr);
}

TEST(GgufTest, QkRowsAreUnpermutedToHuggingFaceOrder) {
  const std::vector<float> q = Ramp(64 * 64, 1), k = Ramp(32 * 64, 2);
  for (GgmlType type : {GgmlType::kF32, GgmlType::kQ4_1}) {
    auto gguf = ParseBytes(TinyLlamaGguf(q, k, type));
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    auto config = ConfigFromGguf(**gguf);
    ASSERT_TRUE(config.ok());
    auto w = LoadGgufWeights(**gguf, *config);
    ASSERT_TRUE(w.ok()) << w.status();
    for (const auto& [name, ref] : {std::pair{"model.layers.0.self_attn.q_proj.weight", q},
                                    std::pair{"model.layers.0.self_attn.k_proj.weight", k}}) {
      const Tensor* t = (*w)->Find(name);
      ASSERT_NE(t, nullptr);
      std::vector<float> got(t->num_elements());
      (*w)->ToFloat32(*t, got);
      // Q4_1 is row-local, so the un-permuted rows must dequantize to the
      // quantization of the HF rows themselves.
      std::vector<float> expected = ref;
      if (type == GgmlType::kQ4_1) {
        std::vector<std::byte> b(ref.size() / kQuantBlock * sizeof(BlockQ4_1));
        QuantizeQ4_1(ref, b);
        DequantizeQ4_1(b, expected);
      }
      EXPECT_EQ(got, expected) << name;
    }
  }
}

// A type the loader does not decode is named by its ggml name, next to the
// ones it does.
TEST(GgufTest, UnsupportedTypeIsNamed) {
  constexpr auto kQ8_1 = static_cast<GgmlType>(9);
  auto gguf = ParseBytes(TinyLlamaGguf(Ramp(64 * 64, 1), Ramp(32 * 64, 1), kQ8_1));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  absl::StatusOr<ModelConfig> config = ConfigFromGguf(**gguf);
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<WeightStore>> w = LoadGgufWeights(**gguf, *config);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(),
              ::testing::HasSubstr("has ggml type Q8_1; supported: F32, F16, BF16, Q8_0, Q4_0, "
                                   "Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K"))
      << w.status();
}

// Every block type a Q4_K_M / Q5_K_M / Q6_K file holds loads with its ggml
// name and dequantizes with the kernels' decoders, row range by row range.
TEST(GgufTest, KQuantAndFiveBitTensorsLoad) {
  using kernels::cpu::QuantType;
  const std::pair<GgmlType, QuantType> kTypes[] = {
      {GgmlType::kQ5_0, QuantType::kQ5_0}, {GgmlType::kQ5_1, QuantType::kQ5_1},
      {GgmlType::kQ2_K, QuantType::kQ2_K}, {GgmlType::kQ3_K, QuantType::kQ3_K},
      {GgmlType::kQ4_K, QuantType::kQ4_K}, {GgmlType::kQ5_K, QuantType::kQ5_K},
      {GgmlType::kQ6_K, QuantType::kQ6_K}};
  constexpr int64_t kRows = 3, kCols = 512;
  GgufWriter writer;
  writer.KvString("general.architecture", "llama");
  std::vector<std::vector<std::byte>> blocks;
  for (const auto& [ggml, quant] : kTypes) {
    blocks.push_back(kernels::RandomBlocks(
        quant, kRows * kCols / kernels::cpu::QuantBlockValues(quant), static_cast<uint32_t>(ggml)));
    writer.Tensor(absl::StrCat("test.", kernels::cpu::QuantTypeName(quant)), ggml, {kCols, kRows},
                  blocks.back());
  }
  auto gguf = ParseBytes(writer.Finish());
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  ModelConfig config;
  config.architecture = "LlamaForCausalLM";
  config.head_dim = 64;
  auto store = LoadGgufWeights(**gguf, config);
  ASSERT_TRUE(store.ok()) << store.status();
  for (size_t i = 0; i < std::size(kTypes); ++i) {
    const QuantType quant = kTypes[i].second;
    SCOPED_TRACE(kernels::cpu::QuantTypeName(quant));
    const Tensor* t = (*store)->Find(absl::StrCat("test.", kernels::cpu::QuantTypeName(quant)));
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(QuantTypeOf(t->dtype), quant);
    EXPECT_EQ(t->shape, (std::vector<int64_t>{kRows, kCols}));
    std::vector<float> want(kRows * kCols);
    kernels::cpu::DequantizeBlocks(quant, blocks[i].data(), kRows * kCols, want.data());
    std::vector<float> got(kCols);
    (*store)->RowsToFloat32(*t, 1, 2, got);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data() + kCols, kCols * sizeof(float)));
  }
}

TEST(WeightsTest, HalfAndBFloat16Conversions) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);         // rounds to infinity
  EXPECT_EQ(FloatToHalf(0x1p-24f), 0x0001);         // smallest subnormal
  EXPECT_EQ(FloatToHalf(1.0f + 0x1p-11f), 0x3C00);  // tie to even
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0) continue;  // NaN payloads
    EXPECT_EQ(FloatToHalf(HalfToFloat(static_cast<uint16_t>(h))), h) << h;
  }
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3F80);
  EXPECT_EQ(BFloat16ToFloat(0xC040), -3.0f);
  EXPECT_EQ(FloatToBFloat16(1.0f + 0x1p-8f), 0x3F80);  // tie to even
}

TEST(GgufTest, RowMappingMatchesLlamaCppPermutation) {
  // llama.cpp: w.reshape(n_head, 2, hd/2, in).swapaxes(1, 2): GGUF row
  // (h, j, s) holds HF row (h, s, j).
  const int hd = 8;
  EXPECT_EQ(GgufRowToHfRow(0, hd), 0);
  EXPECT_EQ(GgufRowToHfRow(1, hd), 4);
  EXPECT_EQ(GgufRowToHfRow(2, hd), 1);
  EXPECT_EQ(GgufRowToHfRow(7, hd), 7);
  EXPECT_EQ(GgufRowToHfRow(9, hd), 12);
}

TEST(GgufTest, EveryTruncationIsAnError) {
  const std::vector<std::byte> full =
      TinyLlamaGguf(Ramp(64 * 64, 1), Ramp(32 * 64, 1), GgmlType::kQ4_1);
  ASSERT_TRUE(ParseBytes(full).ok());
  for (size_t n = 0; n < full.size(); n += (n < 2048 ? 1 : 97)) {
    EXPECT_FALSE(ParseBytes(std::vector<std::byte>(full.begin(), full.begin() + n)).ok()) << n;
  }
}

TEST(GgufTest, CorruptedHeadersNeverCrash) {
  const std::vector<std::byte> full =
      TinyLlamaGguf(Ramp(64 * 64, 1), Ramp(32 * 64, 1), GgmlType::kF32);
  std::mt19937 rng(1);
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::byte> bytes = full;
    for (int j = 0; j < 4; ++j) {
      bytes[rng() % 1500] = static_cast<std::byte>(rng());
    }
    (void)ParseBytes(std::move(bytes));  // a status either way; never a crash
  }
}

TEST(GgufTest, RejectsBadHeaders) {
  std::vector<std::byte> good = TinyLlamaGguf(Ramp(64 * 64, 1), Ramp(32 * 64, 1), GgmlType::kF32);
  auto with = [&](size_t offset, std::vector<uint8_t> patch) {
    std::vector<std::byte> b = good;
    for (size_t i = 0; i < patch.size(); ++i) b[offset + i] = static_cast<std::byte>(patch[i]);
    return ParseBytes(std::move(b)).status();
  };
  EXPECT_EQ(with(0, {'G', 'G', 'U', 'X'}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(with(4, {1, 0, 0, 0}).message().find("version"), absl::string_view::npos);
  EXPECT_FALSE(with(8, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}).ok());   // tensor count
  EXPECT_FALSE(with(16, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}).ok());  // kv count
  EXPECT_FALSE(with(24, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}).ok());  // key length
  EXPECT_FALSE(ParseBytes({}).ok());
}

// An array may not declare more values than the bytes left could hold at its
// element type's size: each value costs far more in memory than in the file.
TEST(GgufTest, ArrayLongerThanTheFileCouldHoldIsRejectedBeforeReading) {
  GgufWriter w;
  w.KvString("general.architecture", "llama");
  w.KvArray("huge", GgufType::kUint64, 1000, 4000);  // 1000 values need 8000 bytes
  const absl::Status status = ParseBytes(w.Finish()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("array of 1000 values is too long"), absl::string_view::npos)
      << status;
}

TEST(GgufTest, DefaultModel) {
  const std::string path = testing::DefaultGgufIfPresent();
  if (path.empty()) GTEST_SKIP() << "default model not fetched (scripts/setup)";
  auto gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  EXPECT_EQ((*gguf)->tensors().size(), 272u);
  auto config = ConfigFromGguf(**gguf);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, "LlamaForCausalLM");
  EXPECT_EQ(config->hidden_size, 576);
  EXPECT_EQ(config->intermediate_size, 1536);
  EXPECT_EQ(config->num_layers, 30);
  EXPECT_EQ(config->num_heads, 9);
  EXPECT_EQ(config->num_kv_heads, 3);
  EXPECT_EQ(config->head_dim, 64);
  EXPECT_EQ(config->vocab_size, 49152);
  EXPECT_EQ(config->max_position_embeddings, 8192);
  EXPECT_FLOAT_EQ(config->rope_theta, 100000.0f);
  EXPECT_NEAR(config->rms_norm_eps, 1e-5f, 1e-9f);
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_FALSE(config->attention_bias);
  EXPECT_EQ(config->bos_token_id, 1);
  EXPECT_EQ(config->eos_token_ids, std::vector<int32_t>{2});
  auto w = LoadGgufWeights(**gguf, *config);
  ASSERT_TRUE(w.ok()) << w.status();
  const Tensor* emb = (*w)->Find("model.embed_tokens.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dtype, DType::kQ8_0);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{49152, 576}));
  const Tensor* k = (*w)->Find("model.layers.29.self_attn.k_proj.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->dtype, DType::kQ4_1);
  EXPECT_EQ(k->shape, (std::vector<int64_t>{192, 576}));
  std::vector<float> row(576);
  (*w)->RowsToFloat32(*k, 100, 101, row);
  for (float v : row) EXPECT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace loom
