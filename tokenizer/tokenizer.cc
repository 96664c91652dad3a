#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "base/utf8.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"

namespace loom {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

void Tokenizer::Index() {
  std::sort(added_.begin(), added_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() != b.content.size() ? a.content.size() > b.content.size() : a.id < b.id;
  });
  added_by_first_byte_.assign(256, {});
  for (size_t i = 0; i < added_.size(); ++i) {
    if (added_[i].content.empty()) continue;
    added_by_first_byte_[static_cast<unsigned char>(added_[i].content[0])].push_back(
        static_cast<int32_t>(i));
  }
  special_.assign(model_->size(), false);
  added_id_.assign(model_->size(), false);
  for (const AddedToken& t : added_) {
    special_[t.id] = t.special;
    added_id_[t.id] = true;
  }
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  if (add_special_tokens && add_bos_ && bos_id_) ids.push_back(*bos_id_);
  size_t segment_begin = 0;  // start of the pending text segment
  size_t pos = 0;
  while (pos < text.size()) {
    const AddedToken* match = nullptr;
    for (int32_t i : added_by_first_byte_[static_cast<unsigned char>(text[pos])]) {
      if (text.substr(pos).starts_with(added_[i].content)) {
        match = &added_[i];
        break;
      }
    }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    size_t segment_end = pos;
    if (match->lstrip) {
      while (segment_end > segment_begin && IsSpace(text[segment_end - 1])) --segment_end;
    }
    EncodeSegment(text.substr(segment_begin, segment_end - segment_begin), segment_begin == 0, ids);
    ids.push_back(match->id);
    pos += match->content.size();
    if (match->rstrip) {
      while (pos < text.size() && IsSpace(text[pos])) ++pos;
    }
    segment_begin = pos;
  }
  EncodeSegment(text.substr(segment_begin), segment_begin == 0, ids);
  if (add_special_tokens && add_eos_ && !eos_ids_.empty()) ids.push_back(eos_ids_.front());
  return ids;
}

void Tokenizer::EncodeSegment(std::string_view text, bool at_start,
                              std::vector<int32_t>& out) const {
  if (text.empty()) return;
  if (model_->kind() == BpeKind::kByteLevel) {
    std::vector<std::string_view> words;
    pre_tokenizer_->Split(text, words);
    for (std::string_view w : words) model_->EncodeWord(w, out);
    return;
  }
  std::string normalized;
  if (space_prefix_ == SpacePrefix::kAlways || (space_prefix_ == SpacePrefix::kFirst && at_start)) {
    normalized = kSpaceMarker;
  }
  for (char c : text) {
    if (c == ' ') {
      normalized += kSpaceMarker;
    } else {
      normalized.push_back(c);
    }
  }
  if (!split_on_space_) {
    model_->EncodeWord(normalized, out);
    return;
  }
  // Metaspace split: each word starts at a U+2581.
  std::string_view rest = normalized;
  while (!rest.empty()) {
    size_t next = rest.find(kSpaceMarker, 1);
    if (next == std::string_view::npos) next = rest.size();
    model_->EncodeWord(rest.substr(0, next), out);
    rest.remove_prefix(next);
  }
}

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string bytes;
  for (int32_t id : ids) bytes += TokenBytes(id);
  if (strip_decoded_space_ && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
  return SanitizeUtf8(bytes);
}

std::string Tokenizer::TokenToPiece(int32_t id) const {
  if (id < 0 || id >= model_->size()) return "";
  return model_->Piece(id);
}

std::string Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= model_->size()) return "";
  if (added_id_[id]) return model_->Piece(id);
  return model_->TokenBytes(id);
}

std::optional<int32_t> Tokenizer::PieceToId(std::string_view piece) const {
  return model_->Find(piece);
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && id < static_cast<int32_t>(special_.size()) && special_[id];
}

int32_t Tokenizer::vocab_size() const { return model_->size(); }

std::string Tokenizer::bos_token() const { return bos_id_ ? TokenToPiece(*bos_id_) : ""; }

std::string Tokenizer::eos_token() const {
  return eos_ids_.empty() ? "" : TokenToPiece(eos_ids_.front());
}

}  // namespace loom
