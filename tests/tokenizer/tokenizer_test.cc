#include "tokenizer/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_replace.h"
#include "base/utf8.h"
#include "formats/gguf_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fixtures/fixture_util.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_detokenizer.h"

namespace loom {
namespace {

using ::loom::testing::DefaultGgufIfPresent;
using ::loom::testing::FixturePath;
using ::loom::testing::ReadFixtureJson;
using ::testing::ElementsAre;

// Every fixture case: ids exactly as Hugging Face tokenizers, the decoded text,
// and streaming detokenization that adds up to the same text in whole characters.
void ExpectMatchesFixture(const Tokenizer& tok, const std::string& fixture) {
  const nlohmann::json cases = ReadFixtureJson(fixture)["cases"];
  ASSERT_FALSE(cases.empty());
  for (const nlohmann::json& c : cases) {
    const std::string text = c["text"];
    const bool add_special = c["add_special_tokens"];
    const std::vector<int32_t> expected = c["ids"];
    EXPECT_EQ(tok.Encode(text, add_special), expected)
        << fixture << ": '" << text << "' add_special_tokens=" << add_special;
    EXPECT_EQ(tok.Decode(expected), c["decoded"].get<std::string>()) << fixture << ": " << text;
    IncrementalDetokenizer detok(tok);
    std::string streamed;
    for (int32_t id : expected) {
      std::string delta = detok.Append(id);
      EXPECT_EQ(SanitizeUtf8(delta), delta) << "half a character in a delta of '" << text << "'";
      streamed += delta;
    }
    streamed += detok.Flush();
    EXPECT_EQ(streamed, c["decoded"].get<std::string>()) << fixture << ": " << text;
  }
}

class TinyTokenizerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyTokenizerTest, MatchesHuggingFace) {
  const std::string dir = "tiny/" + GetParam();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      Tokenizer::FromTokenizerJson(FixturePath(dir + "/tokenizer.json"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  ExpectMatchesFixture(**tok, dir + "/tokens.json");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TinyTokenizerTest,
                         ::testing::Values("llama3", "llama32_tied", "llama2", "mistral", "qwen2"));

// The same tokenizers as GGUF metadata (tools/golden/tokenizer_ggufs.py):
// SentencePiece scored by merge rank, and byte-level with llama.cpp's
// pre-tokenizer names.
class TinyGgufTokenizerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyGgufTokenizerTest, MatchesHuggingFace) {
  const std::string dir = "tiny/" + GetParam();
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf =
      GgufFile::Open(FixturePath(dir + "/tokenizer.gguf"));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status();
  ExpectMatchesFixture(**tok, dir + "/tokens.json");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TinyGgufTokenizerTest,
                         ::testing::Values("llama2", "llama3", "qwen2"));

TEST(TokenizerTest, TinyBosAndEos) {
  auto llama3 = Tokenizer::FromTokenizerJson(FixturePath("tiny/llama3/tokenizer.json"));
  ASSERT_TRUE(llama3.ok()) << llama3.status();
  EXPECT_EQ((*llama3)->bos_token(), "<|begin_of_text|>");
  EXPECT_EQ((*llama3)->eos_token(), "<|eot_id|>");
  auto qwen2 = Tokenizer::FromTokenizerJson(FixturePath("tiny/qwen2/tokenizer.json"));
  ASSERT_TRUE(qwen2.ok()) << qwen2.status();
  EXPECT_FALSE((*qwen2)->Encode("hi", true).empty());
  EXPECT_EQ((*qwen2)->Encode("hi", true), (*qwen2)->Encode("hi", false));  // no BOS
  auto llama2 = Tokenizer::FromTokenizerJson(FixturePath("tiny/llama2/tokenizer.json"));
  ASSERT_TRUE(llama2.ok()) << llama2.status();
  EXPECT_EQ((*llama2)->bos_id(), 1);
  EXPECT_EQ((*llama2)->Encode("hi", true).front(), 1);
  EXPECT_EQ((*llama2)->TokenToPiece(3), "<0x00>");
}

TEST(TokenizerTest, DefaultGgufMatchesHuggingFace) {
  const std::string path = DefaultGgufIfPresent();
  if (path.empty()) GTEST_SKIP() << "default model not fetched (scripts/setup)";
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 49152);
  EXPECT_EQ((*tok)->bos_id(), 1);
  EXPECT_THAT((*tok)->eos_ids(), ElementsAre(2));
  EXPECT_EQ((*tok)->TokenToPiece(2), "<|im_end|>");
  ExpectMatchesFixture(**tok, "smollm2/tokens.json");
}

// Gemma 3's SentencePiece vocabulary from its GGUF: merges in vocabulary
// order, whitespace runs respelled, user-defined tokens (newline and tab runs,
// HTML tags) matched whole, as transformers builds it.
TEST(TokenizerTest, Gemma3GgufMatchesTransformers) {
  const std::string path = ::loom::testing::Gemma3GgufIfPresent();
  if (path.empty()) GTEST_SKIP() << "Gemma 3 model not fetched (scripts/setup)";
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 262144);
  EXPECT_EQ((*tok)->bos_id(), 2);
  EXPECT_EQ((*tok)->PieceToId("\xE2\x96\x81\xE2\x96\x81"), 138);  // two spaces
  ExpectMatchesFixture(**tok, "gemma3/tokens.json");
}

// What a client gets: TokenizerDetokenizer's stream (the engine's), which
// skips special tokens as transformers' skip_special_tokens does. Against the
// GGUF's own token types: every control token (type 3) streams nothing,
// every user-defined one (type 4: Gemma's newline runs, [multimodal]) its
// text, and each fixture case streams Decode of its ids less the control
// tokens (Decode matches transformers, above). Gemma's newline (id 107) was
// once skipped as special, losing every newline of generated text.
void ExpectStreamKeepsAllButControlTokens(const GgufFile& gguf, const std::string& fixture) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> loaded = Tokenizer::FromGguf(gguf);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::shared_ptr<const Tokenizer> tok = *std::move(loaded);
  const GgufValue::Array* types = gguf.GetArray("tokenizer.ggml.token_type");
  const GgufValue::Array* pieces = gguf.GetArray("tokenizer.ggml.tokens");
  ASSERT_NE(types, nullptr);
  ASSERT_NE(pieces, nullptr);
  const TokenizerDetokenizer detokenizer(tok);
  auto stream = [&](const std::vector<int32_t>& ids) {
    std::unique_ptr<StreamDecoder> decoder = detokenizer.NewStream();
    std::string text;
    for (int32_t id : ids) text += decoder->Append(id);
    return text + decoder->Flush();
  };
  int control = 0, user_defined = 0;
  for (int32_t id = 0; id < static_cast<int32_t>(types->size()); ++id) {
    const int64_t type = (*types)[id].AsInt().value_or(1);
    if (type == 3) {
      ++control;
      EXPECT_EQ(stream({id}), "") << "control token " << id;
    } else if (type == 4) {
      ++user_defined;
      // Its text: the GGUF's piece, with SentencePiece's U+2581 for a space.
      EXPECT_EQ(stream({id}),
                absl::StrReplaceAll(*(*pieces)[id].AsString(), {{"\xE2\x96\x81", " "}}))
          << "user-defined token " << id;
    }
  }
  EXPECT_GT(control, 0);
  const nlohmann::json cases = ReadFixtureJson(fixture)["cases"];
  ASSERT_FALSE(cases.empty());
  for (const nlohmann::json& c : cases) {
    const std::vector<int32_t> ids = c["ids"];
    std::vector<int32_t> kept;
    for (int32_t id : ids) {
      if ((*types)[id].AsInt().value_or(1) != 3) kept.push_back(id);
    }
    EXPECT_EQ(stream(ids), tok->Decode(kept)) << fixture << ": " << c["text"].get<std::string>();
  }
}

TEST(TokenizerTest, Gemma3StreamKeepsNewlinesAndSkipsControlTokens) {
  const std::string path = ::loom::testing::Gemma3GgufIfPresent();
  if (path.empty()) GTEST_SKIP() << "Gemma 3 model not fetched (scripts/setup)";
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  ExpectStreamKeepsAllButControlTokens(**gguf, "gemma3/tokens.json");
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<int32_t> ids = (*tok)->Encode("1. apples\n2. pears\n3.", false);
  std::unique_ptr<StreamDecoder> decoder =
      TokenizerDetokenizer(std::shared_ptr<const Tokenizer>(*std::move(tok))).NewStream();
  std::string text;
  for (int32_t id : ids) text += decoder->Append(id);
  EXPECT_EQ(text + decoder->Flush(), "1. apples\n2. pears\n3.");
}

TEST(TokenizerTest, DefaultGgufStreamSkipsOnlyControlTokens) {
  const std::string path = DefaultGgufIfPresent();
  if (path.empty()) GTEST_SKIP() << "default model not fetched (scripts/setup)";
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  ExpectStreamKeepsAllButControlTokens(**gguf, "smollm2/tokens.json");
}

std::vector<std::string> Split(const PreTokenizer& pre, std::string_view text) {
  std::vector<std::string_view> views;
  pre.Split(text, views);
  return std::vector<std::string>(views.begin(), views.end());
}

// A tiny file cannot make the tables huge: ids are bounded by the vocab
// entries plus added tokens, or by config.json's vocab_size beside it.
TEST(TokenizerTest, HugeIdsAreRejectedUnlessConfigVocabSizeAllowsThem) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "loom_tokenizer_huge_ids";
  std::filesystem::create_directories(dir);
  const auto write = [&dir](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
  };
  write("tokenizer.json",
        R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 2000000000}, "merges": []},)"
        R"( "pre_tokenizer": {"type": "ByteLevel"}})");
  absl::StatusOr<std::unique_ptr<Tokenizer>> huge =
      Tokenizer::FromTokenizerJson((dir / "tokenizer.json").string());
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(std::string(huge.status().message()),
              ::testing::HasSubstr("model.vocab 'b' id 2000000000 is out of range: ids must be "
                                   "in [0, 2)"));

  write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 9}, "merges": []},)"
                          R"( "pre_tokenizer": {"type": "ByteLevel"}})");
  EXPECT_FALSE(Tokenizer::FromTokenizerJson((dir / "tokenizer.json").string()).ok());
  write("config.json", R"({"vocab_size": 10})");
  EXPECT_TRUE(Tokenizer::FromTokenizerJson((dir / "tokenizer.json").string()).ok());
  std::filesystem::remove_all(dir);
}

// Llama 3.1's tokenizer.json wraps its TemplateProcessing in a Sequence
// post-processor; the BOS it names is still added.
TEST(TokenizerTest, SequencePostProcessorAddsBos) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "loom_tokenizer_sequence_post";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json")
      << R"({"model": {"type": "BPE", "vocab": {"a": 0, "<s>": 1}, "merges": []},)"
         R"( "added_tokens": [{"id": 1, "content": "<s>"}],)"
         R"( "pre_tokenizer": {"type": "ByteLevel"},)"
         R"( "post_processor": {"type": "Sequence", "processors": [)"
         R"(   {"type": "ByteLevel"},)"
         R"(   {"type": "TemplateProcessing",)"
         R"(    "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}]}]}})";
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      Tokenizer::FromTokenizerJson((dir / "tokenizer.json").string());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->bos_id(), 1);
  EXPECT_THAT((*tok)->Encode("a", true), ElementsAre(1, 0));
  EXPECT_THAT((*tok)->Encode("a", false), ElementsAre(0));
}

TEST(PreTokenizerTest, TrailingSpaceRuleLeavesLastSpaceToTheWord) {
  auto pre = PreTokenizer::Create(kGpt2Pattern, false, false);
  ASSERT_TRUE(pre.ok()) << pre.status();
  EXPECT_THAT(Split(**pre, "a   b  "), ElementsAre("a", "  ", " b", "  "));
  // Only a plain space joins the following word.
  EXPECT_THAT(Split(**pre, "x\n\ny"), ElementsAre("x", "\n", "\n", "y"));
  EXPECT_THAT(Split(**pre, "it's 42"), ElementsAre("it", "'s", " 42"));
}

TEST(PreTokenizerTest, UnicodeWhitespaceCountsAsSpace) {
  auto pre = PreTokenizer::Create(kGpt2Pattern, false, false);
  ASSERT_TRUE(pre.ok()) << pre.status();
  // U+3000 IDEOGRAPHIC SPACE run followed by a word.
  EXPECT_THAT(Split(**pre, "a\u3000\u3000b"), ElementsAre("a", "\u3000", "\u3000", "b"));
}

TEST(PreTokenizerTest, Llama3GroupsDigitsByThree) {
  auto pre = PreTokenizer::Create(kLlama3Pattern, false, false);
  ASSERT_TRUE(pre.ok()) << pre.status();
  EXPECT_THAT(Split(**pre, "1234567"), ElementsAre("123", "456", "7"));
  EXPECT_THAT(Split(**pre, "I'M ok"), ElementsAre("I", "'M", " ok"));
}

TEST(PreTokenizerTest, SplitDigitsFirst) {
  auto pre = PreTokenizer::Create(kGpt2Pattern, true, false);
  ASSERT_TRUE(pre.ok()) << pre.status();
  EXPECT_THAT(Split(**pre, "ab 12"), ElementsAre("ab", " ", "1", "2"));
}

TEST(PreTokenizerTest, RejectsLookaroundItCannotTranslate) {
  EXPECT_EQ(PreTokenizer::Create("(?=a)b", false, false).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST(DetokenizerTest, HoldsBackHalfACharacter) {
  std::unique_ptr<Tokenizer> tok = Tokenizer::ByteFallback(300);
  IncrementalDetokenizer detok(*tok);
  EXPECT_EQ(detok.Append('a'), "a");
  EXPECT_EQ(detok.Append(0xE2), "");
  EXPECT_EQ(detok.Append(0x82), "");
  EXPECT_EQ(detok.Append(0xAC), "\u20AC");
  EXPECT_EQ(detok.Append(0xF0), "");
  EXPECT_EQ(detok.Flush(), "\uFFFD");
}

TEST(DetokenizerTest, InvalidBytesAreReplacedNotHeld) {
  std::unique_ptr<Tokenizer> tok = Tokenizer::ByteFallback(300);
  IncrementalDetokenizer detok(*tok);
  EXPECT_EQ(detok.Append(0xFF), "\uFFFD");
  EXPECT_EQ(detok.Append(0x80), "\uFFFD");
  EXPECT_EQ(detok.Append('z'), "z");
}

// gRPC threads tokenize concurrently with one shared Tokenizer.
TEST(TokenizerTest, ConcurrentEncodeIsSafe) {
  auto tok = Tokenizer::FromTokenizerJson(FixturePath("tiny/llama3/tokenizer.json"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  const nlohmann::json cases = ReadFixtureJson("tiny/llama3/tokens.json")["cases"];
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (const nlohmann::json& c : cases) {
          if ((*tok)->Encode(c["text"].get<std::string>(), c["add_special_tokens"].get<bool>()) !=
              c["ids"].get<std::vector<int32_t>>()) {
            ++mismatches[t];
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_THAT(mismatches, ::testing::Each(0));
}

TEST(TokenizerTest, ByteFallbackRoundTrips) {
  std::unique_ptr<Tokenizer> tok = Tokenizer::ByteFallback(512);
  const std::string text = "h\xC3\xA9llo <s> w\xF0\x9F\x98\x80";
  std::vector<int32_t> ids = tok->Encode(text, true);
  EXPECT_EQ(ids.front(), 256);
  EXPECT_EQ(tok->Decode(ids), "<s>" + text);
  EXPECT_EQ(tok->vocab_size(), 512);
}

TEST(TokenizerTest, MalformedTokenizerJsonIsAnError) {
  const std::string path = ::testing::TempDir() + "/bad_tokenizer.json";
  for (
      const char* body :
      {"not json", "[]", R"({"model": {"type": "Unigram"}})",
       R"({"model": {"type": "BPE", "vocab": {"a": "x"}}})",
       R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [5]}, "pre_tokenizer": {"type": "ByteLevel"}})",
       R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "pre_tokenizer": {"type": "ByteLevel"}, "added_tokens": [{"id": -4, "content": "x"}]})"}) {
    std::ofstream(path) << body;
    EXPECT_FALSE(Tokenizer::FromTokenizerJson(path).ok()) << body;
  }
  EXPECT_EQ(Tokenizer::FromTokenizerJson("/nonexistent/tokenizer.json").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace loom
