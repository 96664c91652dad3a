// The GBNF grammar parser and the regex parser on arbitrary text, through
// the whole compiler. Input: byte 0 selects GBNF (even) or a regular
// expression (odd); the rest is the text. Invariants: no crash and bounded
// work; an accepted grammar prints (PrintGbnf) to a grammar that parses
// again; the masks agree with AcceptToken along a walk chosen by the input.
#include <cstddef>
#include <cstdint>
#include <string>

#include "constraint/gbnf_parser.h"
#include "constraint/gbnf_printer.h"
#include "constraint/regex_parser.h"
#include "fuzz/constraint_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static auto* compiler = loom::fuzz::FuzzCompiler().release();
  const bool regex = (data[0] & 1) != 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (text.size() > 8192) return 0;
  auto parsed = regex ? loom::constraint::ParseRegex(text) : loom::constraint::ParseGbnf(text);
  if (parsed.ok()) {
    loom::fuzz::Check(loom::constraint::ParseGbnf(loom::constraint::PrintGbnf(*parsed)).ok());
  }
  auto compiled = compiler->Compile(
      {regex ? loom::ConstraintKind::kRegex : loom::ConstraintKind::kGrammar, text, {}});
  if (!compiled.ok()) return 0;
  loom::fuzz::CheckWalk(**compiled, data, size, 24);
  return 0;
}
