// constraint_match KIND CONSTRAINT_FILE TEXT_FILE: whether the text is a
// complete output of the constraint (KIND json_schema, regex or grammar), as
// the engine's own automaton decides it over a vocabulary of single bytes.
// The integration tests check what loomd generated with it: exit status 0
// when the text matches, 1 when it does not, 2 on a usage or compile error.
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "constraint/constraint_compiler.h"
#include "constraint/constraint_spec.h"
#include "types/constraint.h"

namespace loom {
namespace {

constexpr int32_t kEos = 256;

ConstraintVocabulary Bytes() {
  ConstraintVocabulary v;
  for (int b = 0; b < 256; ++b) v.token_bytes.push_back(std::string(1, static_cast<char>(b)));
  v.token_bytes.push_back("");
  v.eos_token_ids = {kEos};
  v.vocab_size = kEos + 1;
  return v;
}

bool ReadFile(const char* path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return static_cast<bool>(in);
}

// The offset of the first byte the constraint refuses, or -1 when every byte
// is taken and the text may end (EOS allowed) after the last one.
int64_t FirstRefusedByte(const TokenConstraint& constraint, const std::string& text) {
  std::unique_ptr<ConstraintMatcher> matcher = constraint.NewMatcher();
  for (size_t i = 0; i < text.size(); ++i) {
    if (!matcher->AcceptToken(static_cast<unsigned char>(text[i]))) return static_cast<int64_t>(i);
  }
  return matcher->AcceptToken(kEos) ? -1 : static_cast<int64_t>(text.size());
}

int Run(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: constraint_match json_schema|regex|grammar CONSTRAINT_FILE TEXT_FILE\n";
    return 2;
  }
  const std::string kind = argv[1];
  ConstraintSpec spec;
  if (kind == "json_schema") {
    spec.kind = ConstraintKind::kJsonSchema;
  } else if (kind == "regex") {
    spec.kind = ConstraintKind::kRegex;
  } else if (kind == "grammar") {
    spec.kind = ConstraintKind::kGrammar;
  } else {
    std::cerr << "unknown kind " << kind << "\n";
    return 2;
  }
  std::string text;
  if (!ReadFile(argv[2], &spec.text) || !ReadFile(argv[3], &text)) {
    std::cerr << "cannot read " << argv[2] << " or " << argv[3] << "\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<ConstraintCompiler>> compiler =
      ConstraintCompiler::Create(Bytes());
  if (!compiler.ok()) {
    std::cerr << compiler.status() << "\n";
    return 2;
  }
  absl::StatusOr<std::shared_ptr<const TokenConstraint>> constraint = (*compiler)->Compile(spec);
  if (!constraint.ok()) {
    std::cerr << constraint.status() << "\n";
    return 2;
  }
  const int64_t refused = FirstRefusedByte(**constraint, text);
  if (refused < 0) return 0;
  std::cout << "refused at byte " << refused << " of " << text.size() << "\n";
  return 1;
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) { return loom::Run(argc, argv); }
