#include "tokenizer/tokenizer_detokenizer.h"

#include <memory>

#include "gtest/gtest.h"
#include "tokenizer/tokenizer.h"

namespace loom {
namespace {

// ByteFallback: token id = byte value, BOS 256, EOS 257.
TEST(TokenizerDetokenizerTest, ReleasesWholeCharactersAndSkipsSpecialTokens) {
  std::shared_ptr<const Tokenizer> tokenizer = Tokenizer::ByteFallback(300);
  TokenizerDetokenizer detokenizer(tokenizer);
  std::unique_ptr<StreamDecoder> stream = detokenizer.NewStream();
  EXPECT_EQ(stream->Append('h'), "h");
  EXPECT_EQ(stream->Append(0xC3), "");  // first byte of "é"
  EXPECT_EQ(stream->Append(0xA9), "\xC3\xA9");
  EXPECT_EQ(stream->Append(257), "");  // EOS
  EXPECT_EQ(stream->Append('!'), "!");
  EXPECT_EQ(stream->Flush(), "");
}

TEST(TokenizerDetokenizerTest, StreamsAreIndependent) {
  std::shared_ptr<const Tokenizer> tokenizer = Tokenizer::ByteFallback(300);
  TokenizerDetokenizer detokenizer(tokenizer);
  std::unique_ptr<StreamDecoder> a = detokenizer.NewStream();
  std::unique_ptr<StreamDecoder> b = detokenizer.NewStream();
  EXPECT_EQ(a->Append(0xC3), "");
  EXPECT_EQ(b->Append('x'), "x");
  EXPECT_EQ(a->Append(0xA9), "\xC3\xA9");
  tokenizer.reset();  // the streams keep the tokenizer alive
  EXPECT_EQ(b->Append('y'), "y");
}

}  // namespace
}  // namespace loom
