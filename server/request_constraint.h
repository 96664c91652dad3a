// The constraint a request's outputs must follow: its `constraint` oneof, or
// the tool-call grammar its messages force (tool_choice required or a named
// function, in the model's tool-call format), compiled by the loaded model's
// ConstraintCompiler. Every error is INVALID_ARGUMENT naming the field and
// the problem ("json_schema: at /properties/age: ..."), the compiler's limits
// included ("regex: the automaton exceeds the limit of 50000 states"): a
// constraint too large or too slow to compile is the request's fault.
#pragma once

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "constraint/constraint_compiler.h"
#include "constraint/constraint_spec.h"
#include "loom/v1/generation.pb.h"
#include "tool_calls/tool_call_format.h"
#include "types/constraint.h"

namespace loom {

struct StructuredOutputs {
  // Null: the server compiles nothing, and a constrained request is refused.
  ConstraintCompiler* compiler = nullptr;
  // How the model writes tool calls (--tool_call_parser or detected).
  ToolCallFormat tool_call_format = ToolCallFormat::kNone;
};

// What to compile for a validated request; nullopt when it is unconstrained.
absl::StatusOr<std::optional<ConstraintSpec>> ConstraintSpecOf(const v1::GenerateRequest& request,
                                                               ToolCallFormat tool_call_format);

// The compiled constraint, or null when the request is unconstrained;
// cache_scope keys the compiler's cache (ConstraintCompiler::Compile).
absl::StatusOr<std::shared_ptr<const TokenConstraint>> CompileRequestConstraint(
    const v1::GenerateRequest& request, const StructuredOutputs& outputs,
    std::string_view cache_scope = "");

}  // namespace loom
