#include "server/request_constraint.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tool_calls/tool_call_grammar.h"

namespace loom {
namespace {

bool ForcesToolCalls(const v1::GenerateRequest& request) {
  if (!request.has_messages()) return false;
  const v1::ToolChoice choice = request.messages().tool_choice();
  return choice == v1::TOOL_CHOICE_REQUIRED || choice == v1::TOOL_CHOICE_FUNCTION;
}

absl::StatusOr<ConstraintSpec> ToolCallSpec(const v1::ChatMessages& messages,
                                            ToolCallFormat format) {
  const bool named = messages.tool_choice() == v1::TOOL_CHOICE_FUNCTION;
  std::vector<ToolFunction> functions;
  for (int i = 0; i < messages.tools_size(); ++i) {
    const v1::Tool& tool = messages.tools(i);
    if (named && tool.name() != messages.tool_choice_function()) continue;
    functions.push_back({tool.name(), tool.parameters(), static_cast<size_t>(i)});
  }
  absl::StatusOr<std::string> grammar = ToolCallGrammar(ForcedCallFormat(format), functions, named);
  if (!grammar.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("messages.", grammar.status().message()));
  }
  return ConstraintSpec{ConstraintKind::kGrammar, *std::move(grammar), {}};
}

}  // namespace

absl::StatusOr<std::optional<ConstraintSpec>> ConstraintSpecOf(const v1::GenerateRequest& request,
                                                               ToolCallFormat tool_call_format) {
  const bool forces_calls = ForcesToolCalls(request);
  const auto constraint = request.constraint_case();
  if (forces_calls && constraint != v1::GenerateRequest::CONSTRAINT_NOT_SET) {
    return absl::InvalidArgumentError(
        "messages.tool_choice forces tool calls, which is a constraint of its own: the request "
        "cannot also set json_schema, regex, grammar, json_object or choice");
  }
  if (forces_calls) return ToolCallSpec(request.messages(), tool_call_format);
  switch (constraint) {
    case v1::GenerateRequest::kJsonSchema:
      return ConstraintSpec{ConstraintKind::kJsonSchema, request.json_schema(), {}};
    case v1::GenerateRequest::kRegex:
      return ConstraintSpec{ConstraintKind::kRegex, request.regex(), {}};
    case v1::GenerateRequest::kGrammar:
      return ConstraintSpec{ConstraintKind::kGrammar, request.grammar(), {}};
    case v1::GenerateRequest::kJsonObject:
      return ConstraintSpec{ConstraintKind::kJsonObject, "", {}};
    case v1::GenerateRequest::kChoice:
      return ConstraintSpec{ConstraintKind::kChoice,
                            "",
                            {request.choice().choices().begin(), request.choice().choices().end()}};
    case v1::GenerateRequest::CONSTRAINT_NOT_SET:
      break;
  }
  return std::nullopt;
}

absl::StatusOr<std::shared_ptr<const TokenConstraint>> CompileRequestConstraint(
    const v1::GenerateRequest& request, const StructuredOutputs& outputs,
    std::string_view cache_scope) {
  LOOM_ASSIGN_OR_RETURN(std::optional<ConstraintSpec> spec,
                        ConstraintSpecOf(request, outputs.tool_call_format));
  if (!spec.has_value()) return nullptr;
  if (outputs.compiler == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(ConstraintKindName(spec->kind)),
                                                   ": this server compiles no constraints"));
  }
  absl::StatusOr<std::shared_ptr<const TokenConstraint>> compiled =
      outputs.compiler->Compile(*spec, cache_scope);
  // A grammar Loom composed for tool calls is the tools' doing, not a
  // grammar the client sent.
  if (compiled.status().code() == absl::StatusCode::kInvalidArgument && ForcesToolCalls(request)) {
    return absl::InvalidArgumentError(
        absl::StrCat("messages.tools: the tool-call grammar: ", compiled.status().message()));
  }
  return compiled;
}

}  // namespace loom
