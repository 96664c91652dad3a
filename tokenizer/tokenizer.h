// Text <-> token ids for Llama-family models: byte-level BPE (GPT-2, SmolLM,
// Llama 3, Qwen2 pre-tokenizers) and SentencePiece-style BPE with byte
// fallback (Llama 2, TinyLlama), loaded from tokenizer.json or GGUF metadata.
// Special and added tokens are split out of the text before BPE.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace loom {

class GgufFile;
class BpeModel;
class PreTokenizer;

class Tokenizer {
 public:
  // tokenizer.json (Hugging Face `tokenizers`); tokenizer_config.json next to
  // it, when present, supplies bos/eos tokens the json lacks.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromTokenizerJson(const std::string& path);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& gguf);
  // 256 byte tokens (id = byte value) plus BOS 256 and EOS 257: for dummy
  // models that come without a tokenizer.
  static std::unique_ptr<Tokenizer> ByteFallback(int32_t vocab_size);

  ~Tokenizer();

  // add_special_tokens: prepend BOS when the model wants it (and append EOS
  // when its post-processor does).
  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens) const;
  // Skips nothing; special tokens decode to their text.
  std::string Decode(std::span<const int32_t> ids) const;
  // The raw vocabulary string of a token (e.g. "Ġthe"); empty when out of range.
  std::string TokenToPiece(int32_t id) const;
  // The bytes a token decodes to on its own (may be part of a UTF-8 character).
  std::string TokenBytes(int32_t id) const;
  std::optional<int32_t> PieceToId(std::string_view piece) const;
  bool IsSpecial(int32_t id) const;
  // SentencePiece decoding drops the space that encoding put before the text.
  bool strips_leading_space() const { return strip_decoded_space_; }

  int32_t vocab_size() const;
  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::vector<int32_t> eos_ids() const { return eos_ids_; }
  // The text of BOS/EOS (for chat templates); empty when absent.
  std::string bos_token() const;
  std::string eos_token() const;

 private:
  // Tokens matched in the raw text before BPE (special and added tokens).
  struct AddedToken {
    std::string content;
    int32_t id = 0;
    bool lstrip = false;  // swallows the whitespace before it
    bool rstrip = false;  // swallows the whitespace after it
    // Control tokens (<start_of_turn>, <|im_end|>) are special: decoding for
    // text skips them. User-defined ones (Gemma's "\n", Qwen's <think>) are
    // text, as transformers' skip_special_tokens leaves them.
    bool special = true;
  };
  // SentencePiece normalization: spaces become U+2581, and a U+2581 goes in
  // front of every text segment (kAlways), only the text's start (kFirst) or none.
  enum class SpacePrefix { kNever, kFirst, kAlways };

  Tokenizer();
  friend class TokenizerBuilder;
  void EncodeSegment(std::string_view text, bool at_start, std::vector<int32_t>& out) const;
  // Finalizes lookup tables once the builder has filled the fields.
  void Index();

  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::vector<AddedToken> added_;
  std::vector<std::vector<int32_t>> added_by_first_byte_;  // indices into added_, longest first
  std::vector<bool> special_;                              // per id
  std::vector<bool> added_id_;  // per id: an added token, whose bytes are its text
  SpacePrefix space_prefix_ = SpacePrefix::kNever;
  bool split_on_space_ = false;       // SentencePiece Metaspace split
  bool strip_decoded_space_ = false;  // decoding drops one leading space
  std::optional<int32_t> bos_id_;
  std::vector<int32_t> eos_ids_;
  bool add_bos_ = false;
  bool add_eos_ = false;
};

}  // namespace loom
