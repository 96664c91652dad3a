#include "tokenizer/bpe.h"

#include <algorithm>
#include <array>
#include <cstdio>

#include "absl/strings/str_format.h"
#include "base/utf8.h"

namespace loom {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581

struct ByteTables {
  std::array<std::string, 256> to_unicode;
  std::unordered_map<char32_t, uint8_t> to_byte;
};

const ByteTables& Tables() {
  static const ByteTables* tables = [] {
    auto* t = new ByteTables();
    // Printable bytes map to themselves; the rest to U+0100 upwards in order.
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t c = printable ? static_cast<char32_t>(b) : next++;
      t->to_unicode[b] = EncodeUtf8(c);
      t->to_byte[c] = static_cast<uint8_t>(b);
    }
    return t;
  }();
  return *tables;
}

// Marks a symbol absorbed by its left neighbour (unknown symbols are -1).
constexpr int32_t kMerged = -2;

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

}  // namespace

const std::string& ByteToUnicode(uint8_t byte) { return Tables().to_unicode[byte]; }

std::optional<uint8_t> UnicodeToByte(char32_t c) {
  auto it = Tables().to_byte.find(c);
  if (it == Tables().to_byte.end()) return std::nullopt;
  return it->second;
}

BpeModel::BpeModel(BpeKind kind, std::vector<std::string> pieces)
    : kind_(kind), pieces_(std::move(pieces)) {
  ids_.reserve(pieces_.size());
  for (size_t i = 0; i < pieces_.size(); ++i) {
    ids_.emplace(pieces_[i], static_cast<int32_t>(i));  // first id wins on duplicates
  }
  for (int b = 0; b < 256; ++b) {
    std::optional<int32_t> id = Find(absl::StrFormat("<0x%02X>", b));
    byte_token_ids_[b] = id.value_or(-1);
  }
}

void BpeModel::AddPiece(int32_t id, std::string piece) {
  if (id >= static_cast<int32_t>(pieces_.size())) pieces_.resize(id + 1);
  ids_.emplace(piece, id);
  pieces_[id] = std::move(piece);
}

void BpeModel::SetMerges(const std::vector<std::pair<std::string, std::string>>& merges) {
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    std::optional<int32_t> a = Find(merges[rank].first), b = Find(merges[rank].second);
    std::optional<int32_t> ab = Find(merges[rank].first + merges[rank].second);
    if (!a || !b || !ab) continue;
    merges_.emplace(PairKey(*a, *b), Merge{{-static_cast<double>(rank), 0, 0, 0}, *ab});
  }
}

void BpeModel::SetScores(std::vector<float> scores) {
  scores_ = std::move(scores);
  scores_.resize(pieces_.size(), 0.0f);
  char_lens_.resize(pieces_.size());
  for (size_t i = 0; i < pieces_.size(); ++i) {
    int32_t n = 0;
    for (size_t b = 0; b < pieces_[i].size(); b += Utf8CharLength(pieces_[i], b)) ++n;
    char_lens_[i] = n;
  }
}

std::optional<int32_t> BpeModel::Find(std::string_view piece) const {
  auto it = ids_.find(std::string(piece));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

std::optional<BpeModel::Merge> BpeModel::FindMerge(int32_t left, int32_t right) const {
  if (!scores_.empty()) {
    std::optional<int32_t> id = Find(pieces_[left] + pieces_[right]);
    if (!id) return std::nullopt;
    return Merge{{scores_[*id], char_lens_[left], char_lens_[right], *id}, *id};
  }
  auto it = merges_.find(PairKey(left, right));
  if (it == merges_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::AppendUnknown(std::string_view symbol, std::vector<int32_t>& out) const {
  if (byte_fallback_) {
    bool all = true;
    for (unsigned char c : symbol) all = all && byte_token_ids_[c] >= 0;
    if (all) {
      for (unsigned char c : symbol) out.push_back(byte_token_ids_[c]);
      return;
    }
  }
  if (unk_id_) out.push_back(*unk_id_);
}

// Applies merges best-first (leftmost among equals), as Hugging Face does,
// over a linked list of symbols with a heap of candidate pairs: O(n log n),
// so that a long run without spaces stays cheap. Heap entries go stale when
// a neighbour merges; they are checked against the current symbols on pop.
void BpeModel::MergeSymbols(std::vector<int32_t>& syms) const {
  const int n = static_cast<int>(syms.size());
  if (n < 2) return;
  struct Candidate {
    Rank rank;
    int left;
    int32_t left_id, right_id, merged_id;
  };
  auto worse = [](const Candidate& a, const Candidate& b) {
    return a.rank == b.rank ? a.left > b.left : a.rank < b.rank;
  };
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  std::vector<Candidate> heap;
  auto push = [&](int left) {
    const int right = left >= 0 ? next[left] : -1;
    if (left < 0 || right < 0 || syms[left] < 0 || syms[right] < 0) return;
    if (std::optional<Merge> m = FindMerge(syms[left], syms[right])) {
      heap.push_back({m->rank, left, syms[left], syms[right], m->merged_id});
      std::push_heap(heap.begin(), heap.end(), worse);
    }
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    const Candidate c = heap.back();
    heap.pop_back();
    const int right = next[c.left];
    if (syms[c.left] != c.left_id || right < 0 || syms[right] != c.right_id) continue;
    syms[c.left] = c.merged_id;
    syms[right] = kMerged;
    next[c.left] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.left;
    push(prev[c.left]);
    push(c.left);
  }
  size_t kept = 0;
  for (int i = 0; i >= 0 && i < n; i = next[i]) syms[kept++] = syms[i];
  syms.resize(kept);
}

void BpeModel::EncodeWord(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  std::string mapped;
  if (kind_ == BpeKind::kByteLevel) {
    for (unsigned char c : word) mapped += ByteToUnicode(c);
    word = mapped;
  }
  if (ignore_merges_) {
    if (std::optional<int32_t> id = Find(word)) {
      out.push_back(*id);
      return;
    }
  }
  // Symbols start as single characters; unknown ones (-1) never merge.
  std::vector<int32_t> syms;
  std::vector<std::string_view> unknown;  // text of each -1 symbol, in order
  for (size_t i = 0; i < word.size();) {
    const size_t len = Utf8CharLength(word, i);
    std::string_view ch = word.substr(i, len);
    std::optional<int32_t> id = Find(ch);
    syms.push_back(id.value_or(-1));
    if (!id) unknown.push_back(ch);
    i += len;
  }
  MergeSymbols(syms);
  size_t next_unknown = 0;
  for (int32_t id : syms) {
    if (id >= 0) {
      out.push_back(id);
    } else {
      AppendUnknown(unknown[next_unknown++], out);
    }
  }
}

std::string BpeModel::TokenBytes(int32_t id) const {
  if (id < 0 || id >= size()) return "";
  const std::string& piece = pieces_[id];
  std::string bytes;
  if (kind_ == BpeKind::kByteLevel) {
    for (size_t i = 0; i < piece.size();) {
      const size_t len = Utf8CharLength(piece, i);
      std::optional<uint8_t> b = UnicodeToByte(DecodeUtf8(piece.substr(i, len)));
      if (b) {
        bytes.push_back(static_cast<char>(*b));
      } else {
        bytes.append(piece, i, len);
      }
      i += len;
    }
    return bytes;
  }
  unsigned int byte;
  if (piece.size() == 6 && std::sscanf(piece.c_str(), "<0x%2X>", &byte) == 1) {
    return std::string(1, static_cast<char>(byte));
  }
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kSpaceMarker.size(), kSpaceMarker) == 0) {
      bytes.push_back(' ');
      i += kSpaceMarker.size();
    } else {
      bytes.push_back(piece[i++]);
    }
  }
  return bytes;
}

}  // namespace loom
