// The JSON Schema compiler on arbitrary schema text. Invariants: no crash and
// bounded work (the limits refuse what is too large); a schema the compiler
// takes also converts to GBNF that compiles; and the compiled automaton's
// masks agree with AcceptToken along a walk chosen by the input's bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "constraint/json_schema_to_grammar.h"
#include "fuzz/constraint_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* compiler = loom::fuzz::FuzzCompiler().release();
  const std::string schema(reinterpret_cast<const char*>(data), size);
  auto compiled = compiler->Compile({loom::ConstraintKind::kJsonSchema, schema, {}});
  const auto gbnf = loom::JsonSchemaToGrammar(schema, "root");
  if (!compiled.ok()) return 0;
  loom::fuzz::Check(gbnf.ok());
  auto reparsed = compiler->Compile({loom::ConstraintKind::kGrammar, *gbnf, {}});
  // The printed grammar may only fail on a limit, never as malformed.
  loom::fuzz::Check(reparsed.ok() || absl::StrContains(reparsed.status().message(), "limit"));
  loom::fuzz::CheckWalk(**compiled, data, size, 24);
  return 0;
}
