// Tokenizer construction from tokenizer.json (+ tokenizer_config.json) and
// from GGUF metadata.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "formats/gguf_file.h"
#include "nlohmann/json.hpp"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace loom {

using nlohmann::json;

class TokenizerBuilder {
 public:
  // Ids may reach max(vocab entries + added tokens, config_vocab_size) - 1:
  // a tiny file cannot make the tables huge.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(const json& tok,
                                                             const json& tok_config,
                                                             int64_t config_vocab_size = 0);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& gguf);
  static std::unique_ptr<Tokenizer> ByteFallback(int32_t vocab_size);

 private:
  static absl::Status ReadPreTokenizer(const json& pre, std::string& pattern, bool& split_digits,
                                       bool& prefix_space, bool& byte_level, Tokenizer& t);
  static absl::Status ReadNormalizer(const json& norm, Tokenizer& t);
  // FromJson's steps once the BPE model exists: the added tokens (each checked
  // against [0, id_limit)), and the BOS and EOS ids from the post-processor
  // and tokenizer_config.json.
  static absl::Status ReadAddedTokens(const json& added_tokens, int64_t id_limit, Tokenizer& t);
  static void ReadSpecialTokens(const json& post, const json& tok_config, Tokenizer& t);
};

namespace {

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer: ", what));
}

absl::Status IdOutOfRange(int64_t id, int64_t id_limit, absl::string_view what) {
  return Bad(absl::StrCat(what, " id ", id, " is out of range: ids must be in [0, ", id_limit,
                          ") (vocab entries plus added tokens, or config.json vocab_size)"));
}

// Ids may reach max(vocab entries + added tokens, config_vocab_size) - 1, and
// never 2^24: a tiny file cannot make the tables huge.
int64_t IdLimit(const json& vocab, const json& added_tokens, int64_t config_vocab_size) {
  const int64_t num_added = added_tokens.is_array() ? static_cast<int64_t>(added_tokens.size()) : 0;
  return std::min<int64_t>(
      std::max<int64_t>(static_cast<int64_t>(vocab.size()) + num_added, config_vocab_size),
      int64_t{1} << 24);
}

// model.vocab (piece -> id) as the piece of each id.
absl::StatusOr<std::vector<std::string>> ReadVocab(const json& vocab, int64_t id_limit) {
  std::vector<std::string> pieces;
  for (const auto& [piece, id] : vocab.items()) {
    if (!id.is_number_integer()) return Bad(absl::StrCat("bad id for ", piece));
    if (id.get<int64_t>() < 0 || id.get<int64_t>() >= id_limit) {
      return IdOutOfRange(id.get<int64_t>(), id_limit, absl::StrCat("model.vocab '", piece, "'"));
    }
    const size_t i = id.get<size_t>();
    if (i >= pieces.size()) pieces.resize(i + 1);
    pieces[i] = piece;
  }
  return pieces;
}

// model.merges, as "a b" strings or ["a", "b"] pairs.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadMerges(const json& entries) {
  std::vector<std::pair<std::string, std::string>> merges;
  for (const json& m : entries) {
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ', 1);
      if (space == std::string::npos) return Bad(absl::StrCat("bad merge '", s, "'"));
      merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return Bad("bad merge entry");
    }
  }
  return merges;
}

absl::StatusOr<json> ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, " is not JSON"));
  return j;
}

// tokenizer_config.json holds tokens as strings or as {"content": ...}.
std::string TokenString(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return "";
}

std::string GgufPrePattern(const std::string& pre, bool& split_digits) {
  split_digits = false;
  if (pre == "llama3" || pre == "llama-bpe" || pre == "llama-v3" || pre == "smaug-bpe") {
    return std::string(kLlama3Pattern);
  }
  if (pre == "qwen2") return std::string(kQwen2Pattern);
  if (pre == "smollm" || pre == "starcoder" || pre == "refact") split_digits = true;
  return std::string(kGpt2Pattern);
}

// Gemma's SentencePiece vocabulary (general.architecture gemma, gemma2,
// gemma3) needs two fixes that transformers applies to it as well.
bool IsGemma(const GgufFile& gguf) {
  const std::string arch = gguf.GetString("general.architecture").value_or("");
  return arch == "gemma" || arch == "gemma2" || arch == "gemma3";
}

// Gemma files store its whitespace tokens with real spaces, which its
// tokenizer (spaces normalized to U+2581) spells with U+2581: a piece of ASCII
// whitespace with a space in it becomes as many U+2581, as transformers
// respells it. True when the piece was respelled.
bool RespellSpaces(std::string& piece) {
  if (piece.find(' ') == std::string::npos ||
      piece.find_first_not_of(" \t\n\r\f\v") != std::string::npos) {
    return false;
  }
  std::string spelled;
  for (size_t i = 0; i < piece.size(); ++i) spelled += "\xE2\x96\x81";
  piece = std::move(spelled);
  return true;
}

}  // namespace

absl::Status TokenizerBuilder::ReadPreTokenizer(const json& pre, std::string& pattern,
                                                bool& split_digits, bool& prefix_space,
                                                bool& byte_level, Tokenizer& t) {
  if (pre.is_null()) return absl::OkStatus();
  const std::string type = pre.value("type", std::string());
  if (type == "Sequence") {
    for (const json& p : pre.value("pretokenizers", json::array())) {
      LOOM_RETURN_IF_ERROR(ReadPreTokenizer(p, pattern, split_digits, prefix_space, byte_level, t));
    }
  } else if (type == "ByteLevel") {
    byte_level = true;
    prefix_space = pre.value("add_prefix_space", false);
    if (pre.value("use_regex", true)) {
      if (!pattern.empty()) return Bad("two split patterns");
      pattern = kGpt2Pattern;
    }
  } else if (type == "Split") {
    const json& p = pre.value("pattern", json::object());
    if (!p.contains("Regex") || !p["Regex"].is_string() ||
        pre.value("behavior", std::string()) != "Isolated" || pre.value("invert", false)) {
      return absl::UnimplementedError("tokenizer: only isolated regex Split pre-tokenizers");
    }
    if (!pattern.empty()) return Bad("two split patterns");
    pattern = p["Regex"].get<std::string>();
  } else if (type == "Digits") {
    if (!pre.value("individual_digits", false)) {
      return absl::UnimplementedError("tokenizer: Digits without individual_digits");
    }
    split_digits = true;
  } else if (type == "Metaspace") {
    const std::string scheme = pre.value("prepend_scheme", std::string("always"));
    t.space_prefix_ = scheme == "first"   ? Tokenizer::SpacePrefix::kFirst
                      : scheme == "never" ? Tokenizer::SpacePrefix::kNever
                                          : Tokenizer::SpacePrefix::kAlways;
    t.split_on_space_ = pre.value("split", true);
  } else {
    return absl::UnimplementedError(absl::StrCat("tokenizer: pre-tokenizer ", type));
  }
  return absl::OkStatus();
}

// Normalizers Loom applies: the legacy Llama 2 pair Prepend("\u2581") +
// Replace(" ", "\u2581"), and NFC, which is taken as already satisfied (text
// reaching the server is NFC in practice; decomposed input may tokenize
// differently from Hugging Face).
absl::Status TokenizerBuilder::ReadNormalizer(const json& norm, Tokenizer& t) {
  if (norm.is_null()) return absl::OkStatus();
  const std::string type = norm.value("type", std::string());
  if (type == "Sequence") {
    for (const json& n : norm.value("normalizers", json::array())) {
      LOOM_RETURN_IF_ERROR(ReadNormalizer(n, t));
    }
    return absl::OkStatus();
  }
  if (type == "Prepend" && norm.value("prepend", std::string()) == "\u2581") {
    t.space_prefix_ = Tokenizer::SpacePrefix::kAlways;
    return absl::OkStatus();
  }
  if (type == "Replace" && norm.value("content", std::string()) == "\u2581" &&
      norm.value("pattern", json::object()).value("String", std::string()) == " ") {
    t.split_on_space_ = false;
    return absl::OkStatus();
  }
  if (type == "NFC") return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat("tokenizer: normalizer ", type));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerBuilder::FromJson(const json& tok,
                                                                      const json& tok_config,
                                                                      int64_t config_vocab_size) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  const json& model = tok.value("model", json::object());
  if (model.value("type", std::string("BPE")) != "BPE") {
    return absl::UnimplementedError(absl::StrCat(
        "tokenizer: model type ", model.value("type", std::string()), " (only BPE is supported)"));
  }
  const json& vocab = model.value("vocab", json::object());
  if (!vocab.is_object()) return Bad("model.vocab is not an object");
  const json& added_tokens = tok.value("added_tokens", json::array());
  const int64_t id_limit = IdLimit(vocab, added_tokens, config_vocab_size);
  LOOM_ASSIGN_OR_RETURN(std::vector<std::string> pieces, ReadVocab(vocab, id_limit));
  std::string pattern;
  bool split_digits = false, prefix_space = false, byte_level = false;
  LOOM_RETURN_IF_ERROR(ReadPreTokenizer(tok.value("pre_tokenizer", json()), pattern, split_digits,
                                        prefix_space, byte_level, *t));
  const json& norm = tok.value("normalizer", json());
  LOOM_RETURN_IF_ERROR(ReadNormalizer(norm, *t));
  const BpeKind kind = byte_level ? BpeKind::kByteLevel : BpeKind::kSentencePiece;
  if (kind == BpeKind::kSentencePiece && !norm.is_object() &&
      t->space_prefix_ == Tokenizer::SpacePrefix::kNever &&
      tok.value("pre_tokenizer", json()).is_null()) {
    return absl::UnimplementedError("tokenizer: neither byte-level nor SentencePiece BPE");
  }
  t->model_ = std::make_unique<BpeModel>(kind, std::move(pieces));
  LOOM_ASSIGN_OR_RETURN(const auto merges, ReadMerges(model.value("merges", json::array())));
  t->model_->SetMerges(merges);
  t->model_->set_byte_fallback(model.value("byte_fallback", false));
  t->model_->set_ignore_merges(model.value("ignore_merges", false));
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    t->model_->set_unk_id(t->model_->Find(model["unk_token"].get<std::string>()));
  }
  LOOM_RETURN_IF_ERROR(ReadAddedTokens(added_tokens, id_limit, *t));
  if (kind == BpeKind::kByteLevel) {
    LOOM_ASSIGN_OR_RETURN(t->pre_tokenizer_,
                          PreTokenizer::Create(pattern, split_digits, prefix_space));
  }
  const std::string decoder = tok.value("decoder", json()).dump();
  t->strip_decoded_space_ =
      kind == BpeKind::kSentencePiece && (decoder.find("\"Strip\"") != std::string::npos ||
                                          (decoder.find("\"Metaspace\"") != std::string::npos &&
                                           t->space_prefix_ != Tokenizer::SpacePrefix::kNever));
  ReadSpecialTokens(tok.value("post_processor", json()), tok_config, *t);
  t->Index();
  return t;
}

absl::Status TokenizerBuilder::ReadAddedTokens(const json& added_tokens, int64_t id_limit,
                                               Tokenizer& t) {
  for (const json& a : added_tokens) {
    if (!a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string()) {
      return Bad("bad added_tokens entry");
    }
    if (a["id"].get<int64_t>() < 0 || a["id"].get<int64_t>() >= id_limit) {
      return IdOutOfRange(a["id"].get<int64_t>(), id_limit, "added_tokens");
    }
    Tokenizer::AddedToken added;
    added.id = a["id"].get<int32_t>();
    added.content = a["content"].get<std::string>();
    added.lstrip = a.value("lstrip", false);
    added.rstrip = a.value("rstrip", false);
    added.special = a.value("special", true);
    if (added.id >= t.model_->size() || t.model_->Piece(added.id) != added.content) {
      t.model_->AddPiece(added.id, added.content);
    }
    t.added_.push_back(std::move(added));
  }
  return absl::OkStatus();
}

void TokenizerBuilder::ReadSpecialTokens(const json& post, const json& tok_config, Tokenizer& t) {
  // Which ids the post-processor puts around a single sequence: its own, or
  // those of the processors in a Sequence (json::value returns a copy, which
  // this list holds for the loop below).
  json processors = json::array();
  if (post.is_object() && post.value("type", std::string()) == "Sequence") {
    processors = post.value("processors", json::array());
  } else if (post.is_object()) {
    processors.push_back(post);
  }
  for (const json& p : processors) {
    if (p.value("type", std::string()) != "TemplateProcessing") continue;
    bool seen_sequence = false;
    for (const json& item : p.value("single", json::array())) {
      if (item.contains("Sequence")) seen_sequence = true;
      if (!item.contains("SpecialToken")) continue;
      const std::string name = item["SpecialToken"].value("id", std::string());
      std::optional<int32_t> id = t.model_->Find(name);
      if (!id) continue;
      if (seen_sequence) {
        t.add_eos_ = true;
        t.eos_ids_.push_back(*id);
      } else {
        t.add_bos_ = true;
        t.bos_id_ = *id;
      }
    }
  }
  if (std::string bos = TokenString(tok_config, "bos_token"); !bos.empty()) {
    if (auto id = t.model_->Find(bos)) t.bos_id_ = *id;
  }
  if (std::string eos = TokenString(tok_config, "eos_token"); !eos.empty()) {
    if (auto id = t.model_->Find(eos)) {
      if (std::find(t.eos_ids_.begin(), t.eos_ids_.end(), *id) == t.eos_ids_.end()) {
        t.eos_ids_.insert(t.eos_ids_.begin(), *id);
      }
    }
  }
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromTokenizerJson(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(const json tok, ReadJson(path));
  json config = json::object();
  const auto config_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (std::filesystem::exists(config_path, ec)) {
    LOOM_ASSIGN_OR_RETURN(json c, ReadJson(config_path.string()));
    if (c.is_object()) config = std::move(c);
  }
  // config.json's vocab_size, when it is there, may exceed the tokenizer's ids.
  int64_t config_vocab_size = 0;
  const auto model_config = std::filesystem::path(path).parent_path() / "config.json";
  if (std::filesystem::exists(model_config, ec)) {
    absl::StatusOr<json> c = ReadJson(model_config.string());
    if (c.ok() && c->is_object() && c->contains("vocab_size") &&
        (*c)["vocab_size"].is_number_integer()) {
      config_vocab_size = (*c)["vocab_size"].get<int64_t>();
    }
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> t;
  // nlohmann::json throws on a field of the wrong type: a malformed file.
  try {
    t = TokenizerBuilder::FromJson(tok, config, config_vocab_size);
  } catch (const json::exception& e) {
    t = Bad(e.what());
  }
  if (!t.ok())
    return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  return t;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerBuilder::FromGguf(const GgufFile& gguf) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  const std::string model = gguf.GetString("tokenizer.ggml.model").value_or("");
  if (model != "gpt2" && model != "llama") {
    return absl::UnimplementedError(
        absl::StrCat("tokenizer: GGUF tokenizer model '", model, "' (gpt2 and llama are)"));
  }
  const GgufValue::Array* tokens = gguf.GetArray("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->empty()) return Bad("GGUF has no tokenizer.ggml.tokens");
  std::vector<std::string> pieces;
  pieces.reserve(tokens->size());
  for (const GgufValue& v : *tokens) {
    if (v.AsString() == nullptr) return Bad("tokenizer.ggml.tokens holds a non-string");
    pieces.push_back(*v.AsString());
  }
  const size_t n = pieces.size();
  const GgufValue::Array* types = gguf.GetArray("tokenizer.ggml.token_type");
  if (types != nullptr && types->size() != n) return Bad("token_type length differs from tokens");
  const BpeKind kind = model == "gpt2" ? BpeKind::kByteLevel : BpeKind::kSentencePiece;
  const bool gemma = kind == BpeKind::kSentencePiece && IsGemma(gguf);
  // Respelled pieces are no longer what the text holds: they are not matched
  // before BPE (transformers adds only user-defined tokens it finds in the
  // respelled vocabulary).
  std::vector<bool> respelled(n, false);
  if (gemma) {
    for (size_t i = 0; i < n; ++i) respelled[i] = RespellSpaces(pieces[i]);
  }
  t->model_ = std::make_unique<BpeModel>(kind, pieces);
  if (kind == BpeKind::kByteLevel) {
    const GgufValue::Array* merges = gguf.GetArray("tokenizer.ggml.merges");
    if (merges == nullptr) return Bad("GGUF gpt2 tokenizer has no merges");
    std::vector<std::pair<std::string, std::string>> pairs;
    pairs.reserve(merges->size());
    for (const GgufValue& m : *merges) {
      const std::string* s = m.AsString();
      const size_t space = s ? s->find(' ', 1) : std::string::npos;
      if (space == std::string::npos) return Bad("bad entry in tokenizer.ggml.merges");
      pairs.emplace_back(s->substr(0, space), s->substr(space + 1));
    }
    t->model_->SetMerges(pairs);
    bool split_digits = false;
    const std::string pre_name = gguf.GetString("tokenizer.ggml.pre").value_or("default");
    std::string pattern = GgufPrePattern(pre_name, split_digits);
    // Llama 3 emits a pre-token that is itself a token whole (ignore_merges).
    t->model_->set_ignore_merges(pattern == kLlama3Pattern);
    LOOM_ASSIGN_OR_RETURN(t->pre_tokenizer_,
                          PreTokenizer::Create(pattern, split_digits, /*add_prefix_space=*/false));
  } else {
    const GgufValue::Array* scores = gguf.GetArray("tokenizer.ggml.scores");
    if (scores == nullptr || scores->size() != n) return Bad("GGUF llama tokenizer needs scores");
    std::vector<float> s;
    s.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      // Gemma's scores do not follow its merge order; the order of its tokens does.
      s.push_back(gemma ? -static_cast<float>(i)
                        : static_cast<float>((*scores)[i].AsFloat().value_or(0)));
    }
    t->model_->SetScores(std::move(s));
    t->model_->set_byte_fallback(true);
    if (gguf.GetBool("tokenizer.ggml.add_space_prefix").value_or(true)) {
      t->space_prefix_ = Tokenizer::SpacePrefix::kAlways;
      t->strip_decoded_space_ = true;
    }
  }
  // Control (3) and user-defined (4) tokens are matched in the text before
  // BPE; only control tokens are special (skipped in decoded text).
  for (size_t i = 0; types != nullptr && i < n; ++i) {
    const int64_t type = (*types)[i].AsInt().value_or(1);
    if ((type == 3 || type == 4) && !respelled[i]) {
      t->added_.push_back({pieces[i], static_cast<int32_t>(i), false, false, type == 3});
    }
  }
  auto id_in_range = [&](const char* key) -> std::optional<int32_t> {
    std::optional<int64_t> id = gguf.GetInt(key);
    if (!id || *id < 0 || *id >= static_cast<int64_t>(n)) return std::nullopt;
    return static_cast<int32_t>(*id);
  };
  t->model_->set_unk_id(id_in_range("tokenizer.ggml.unknown_token_id"));
  t->bos_id_ = id_in_range("tokenizer.ggml.bos_token_id");
  if (auto eos = id_in_range("tokenizer.ggml.eos_token_id")) t->eos_ids_.push_back(*eos);
  if (auto eot = id_in_range("tokenizer.ggml.eot_token_id")) {
    if (t->eos_ids_.empty() || t->eos_ids_[0] != *eot) t->eos_ids_.push_back(*eot);
  }
  t->add_bos_ =
      gguf.GetBool("tokenizer.ggml.add_bos_token").value_or(kind == BpeKind::kSentencePiece);
  t->add_eos_ = gguf.GetBool("tokenizer.ggml.add_eos_token").value_or(false);
  t->Index();
  return t;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& gguf) {
  return TokenizerBuilder::FromGguf(gguf);
}

std::unique_ptr<Tokenizer> TokenizerBuilder::ByteFallback(int32_t vocab_size) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.push_back(ByteToUnicode(static_cast<uint8_t>(b)));
  pieces.push_back("<s>");
  pieces.push_back("</s>");
  for (int32_t i = static_cast<int32_t>(pieces.size()); i < vocab_size; ++i) {
    pieces.push_back(absl::StrCat("<unused_", i, ">"));
  }
  t->model_ = std::make_unique<BpeModel>(BpeKind::kByteLevel, std::move(pieces));
  t->pre_tokenizer_ = *PreTokenizer::Create("", false, false);
  t->added_.push_back({"<s>", 256, false, false});
  t->added_.push_back({"</s>", 257, false, false});
  t->bos_id_ = 256;
  t->eos_ids_ = {257};
  t->add_bos_ = true;
  t->Index();
  return t;
}

std::unique_ptr<Tokenizer> Tokenizer::ByteFallback(int32_t vocab_size) {
  return TokenizerBuilder::ByteFallback(vocab_size);
}

}  // namespace loom
