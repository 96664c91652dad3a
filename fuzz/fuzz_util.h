// Helpers shared by the fuzz targets: a scratch file for loaders that only
// take paths, and a fixed text that exercises a tokenizer once it loaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace loom::fuzz {

// Writes data to <per-process scratch dir>/<name> and returns its path.
std::string WriteScratchFile(const std::string& name, const uint8_t* data, size_t size);

// Reads the first and last byte of a span that a parser handed out, so that
// ASan reports a span reaching outside its buffer.
void Touch(std::span<const std::byte> bytes);

// ASCII, digits, whitespace runs, multi-byte UTF-8, an emoji and special-token
// look-alikes: what pre-tokenizers and byte fallback split differently.
inline constexpr char kSampleText[] =
    "Hello, world! It's 2026: 12345 tokens.\n\n\t  caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 "
    "\xf0\x9f\xa6\x99 <s></s><|im_start|>user  end";

// A small valid byte-level BPE tokenizer.json (BOS <s> = 5, EOS </s> = 6),
// for targets that fuzz the files beside it.
inline constexpr std::string_view kTokenizerJson =
    R"({"added_tokens": [{"id": 5, "content": "<s>", "special": true},)"
    R"( {"id": 6, "content": "</s>", "special": true}],)"
    R"( "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},)"
    R"( "model": {"type": "BPE", "vocab": {"H": 0, "e": 1, "l": 2, "o": 3, "He": 4,)"
    R"( "<s>": 5, "</s>": 6}, "merges": [["H", "e"]]}})";

}  // namespace loom::fuzz
