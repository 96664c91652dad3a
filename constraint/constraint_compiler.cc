#include "constraint/constraint_compiler.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace loom {

class ConstraintCompiler::Impl {
 public:
  Impl(ConstraintVocabulary vocabulary, ConstraintLimits limits)
      : vocabulary_(std::move(vocabulary)), limits_(limits) {}
  const ConstraintVocabulary& vocabulary() const { return vocabulary_; }
  const ConstraintLimits& limits() const { return limits_; }

 private:
  ConstraintVocabulary vocabulary_;
  ConstraintLimits limits_;
};

absl::StatusOr<std::unique_ptr<ConstraintCompiler>> ConstraintCompiler::Create(
    ConstraintVocabulary vocabulary, ConstraintLimits limits) {
  return std::unique_ptr<ConstraintCompiler>(
      new ConstraintCompiler(std::make_unique<Impl>(std::move(vocabulary), limits)));
}

ConstraintCompiler::ConstraintCompiler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ConstraintCompiler::~ConstraintCompiler() = default;

absl::StatusOr<std::shared_ptr<const TokenConstraint>> ConstraintCompiler::Compile(
    const ConstraintSpec& spec) {
  return absl::UnimplementedError(absl::StrCat(std::string(ConstraintKindName(spec.kind)),
                                               ": the constraint compiler is not built yet"));
}

ConstraintCompiler::CacheStats ConstraintCompiler::cache_stats() const { return {}; }
const ConstraintLimits& ConstraintCompiler::limits() const { return impl_->limits(); }
int32_t ConstraintCompiler::vocab_size() const { return impl_->vocabulary().vocab_size; }

}  // namespace loom
