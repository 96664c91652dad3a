// The BPE model shared by both tokenizer families: a vocabulary and merge
// priorities applied to one pre-token at a time. Byte-level BPE works on
// GPT-2's byte-to-unicode alphabet; SentencePiece BPE on characters, with
// "<0xAB>" byte tokens for characters outside the vocabulary.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace loom {

enum class BpeKind { kByteLevel, kSentencePiece };

class BpeModel {
 public:
  BpeModel(BpeKind kind, std::vector<std::string> pieces);

  // Merge priorities, either from merges in rank order (pieces that are not
  // in the vocabulary are skipped, as Hugging Face does) or from per-token
  // scores (SentencePiece GGUF files: the merge whose result scores highest
  // goes first; among equal scores the longer left piece, then the longer
  // right piece, then the lower result id, the order transformers gives the
  // merges it derives from a GGUF vocabulary).
  void SetMerges(const std::vector<std::pair<std::string, std::string>>& merges);
  void SetScores(std::vector<float> scores);
  void set_unk_id(std::optional<int32_t> id) { unk_id_ = id; }
  void set_byte_fallback(bool on) { byte_fallback_ = on; }
  // A pre-token that is itself in the vocabulary is emitted whole (Llama 3).
  void set_ignore_merges(bool on) { ignore_merges_ = on; }
  // Ids past the vocabulary (added tokens) extend it.
  void AddPiece(int32_t id, std::string piece);

  // Appends the ids of one pre-token: raw bytes for byte-level BPE, the
  // normalized text (spaces as U+2581) for SentencePiece.
  void EncodeWord(std::string_view word, std::vector<int32_t>& out) const;

  BpeKind kind() const { return kind_; }
  int32_t size() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& Piece(int32_t id) const { return pieces_[id]; }
  std::optional<int32_t> Find(std::string_view piece) const;
  // The bytes a token stands for (byte-level alphabet and U+2581 undone).
  std::string TokenBytes(int32_t id) const;

 private:
  // Higher ranks merge first: by score, then by the lengths (in characters)
  // of the left and right pieces, then by the lower result id.
  struct Rank {
    double score;
    int32_t left_len;
    int32_t right_len;
    int32_t merged_id;
    bool operator<(const Rank& o) const {
      if (score != o.score) return score < o.score;
      if (left_len != o.left_len) return left_len < o.left_len;
      if (right_len != o.right_len) return right_len < o.right_len;
      return merged_id > o.merged_id;
    }
    bool operator==(const Rank& o) const = default;
  };
  struct Merge {
    Rank rank;
    int32_t merged_id;
  };
  std::optional<Merge> FindMerge(int32_t left, int32_t right) const;
  void MergeSymbols(std::vector<int32_t>& syms) const;
  void AppendUnknown(std::string_view symbol, std::vector<int32_t>& out) const;

  BpeKind kind_;
  std::vector<std::string> pieces_;
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<float> scores_;
  std::vector<int32_t> char_lens_;  // per piece, with scores_
  std::optional<int32_t> unk_id_;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  int32_t byte_token_ids_[256];  // SentencePiece "<0xAB>" ids, -1 when absent
};

// GPT-2's reversible map from bytes to printable characters, as UTF-8.
const std::string& ByteToUnicode(uint8_t byte);
// The inverse; nullopt for characters outside the map.
std::optional<uint8_t> UnicodeToByte(char32_t c);

}  // namespace loom
