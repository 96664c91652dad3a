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

  int32_t vocab_size() const;
  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::vector<int32_t> eos_ids() const { return eos_ids_; }
  // The text of BOS/EOS (for chat templates); empty when absent.
  std::string bos_token() const;
  std::string eos_token() const;

 private:
  Tokenizer();
  friend class TokenizerBuilder;

  std::unique_ptr<BpeModel> model_;
  std::optional<int32_t> bos_id_;
  std::vector<int32_t> eos_ids_;
  bool add_bos_ = false;
  bool add_eos_ = false;
};

}  // namespace loom
