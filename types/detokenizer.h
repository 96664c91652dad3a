// Turns sampled token ids into text, one stream per sample: the interface the
// engine decodes through. The engine owns no tokenizer: loomd hands it the
// tokenizer module's TokenizerDetokenizer (tests hand it fakes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace loom {

// Incremental decoding of one sample's generated tokens.
class StreamDecoder {
 public:
  virtual ~StreamDecoder() = default;
  // Returns the text that token_id completes: only whole UTF-8 characters, so
  // bytes of a character split across tokens come out with its last token.
  virtual std::string Append(int32_t token_id) = 0;
  // Whatever is still held when the sample ends (an incomplete UTF-8 tail,
  // made printable by the implementation).
  virtual std::string Flush() = 0;
};

class Detokenizer {
 public:
  virtual ~Detokenizer() = default;
  // Called on the engine thread, once per sample; must be cheap.
  virtual std::unique_ptr<StreamDecoder> NewStream() const = 0;
};

}  // namespace loom
