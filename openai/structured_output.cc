#include "openai/structured_output.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "openai/json_fields.h"
#include "openai/openai_error.h"

namespace loom::openai {
namespace {

constexpr char kResponseFormat[] = "response_format";
constexpr char kStructuredOutputs[] = "structured_outputs";

// The proto fields of the constraint oneof, as compile errors start.
constexpr absl::string_view kConstraintFields[] = {"json_schema", "regex", "grammar", "json_object",
                                                   "choice"};

absl::Status ReadJsonSchemaFormat(const Json& format, v1::GenerateRequest* request,
                                  OpenAiOptions* options) {
  const Json* json_schema = FindField(format, "json_schema");
  if (json_schema == nullptr || !json_schema->is_object()) {
    return TypeError("response_format.json_schema", "an object with name and schema");
  }
  const Json* name = FindField(*json_schema, "name");
  if (name == nullptr || !name->is_string()) {
    return TypeError("response_format.json_schema.name", "a string");
  }
  LOOM_RETURN_IF_ERROR(ReadBool(*json_schema, "strict", [](bool) {}));
  const Json* schema = FindField(*json_schema, "schema");
  if (schema == nullptr) {
    // A format without a schema asks for JSON, as json_object does.
    request->set_json_object(true);
    options->constraint_field = "response_format.json_schema";
    return absl::OkStatus();
  }
  if (!schema->is_object()) return TypeError("response_format.json_schema.schema", "an object");
  request->set_json_schema(schema->dump());
  options->constraint_field = "response_format.json_schema.schema";
  return absl::OkStatus();
}

absl::Status ReadResponseFormat(const Json& body, v1::GenerateRequest* request,
                                OpenAiOptions* options) {
  const Json* format = FindField(body, kResponseFormat);
  if (format == nullptr) return absl::OkStatus();
  const Json* type = format->is_object() ? FindField(*format, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    return TypeError("response_format", "an object with a type");
  }
  const std::string& kind = type->get_ref<const std::string&>();
  if (kind == "text") return absl::OkStatus();
  if (kind == "json_object") {
    request->set_json_object(true);
    options->constraint_field = kResponseFormat;
    return absl::OkStatus();
  }
  if (kind == "json_schema") return ReadJsonSchemaFormat(*format, request, options);
  return InvalidParam(kResponseFormat,
                      absl::StrCat("response_format.type must be one of text, json_object, "
                                   "json_schema; got \"",
                                   kind, "\""));
}

// structured_outputs' one constraint; `set` counts the ones given.
absl::Status ReadStructuredOutputs(const Json& outputs, v1::GenerateRequest* request,
                                   OpenAiOptions* options, int* set) {
  auto field = [&](absl::string_view name) -> const Json* {
    const Json* value = FindField(outputs, name);
    if (value != nullptr) {
      ++*set;
      options->constraint_field = absl::StrCat(kStructuredOutputs, ".", name);
    }
    return value;
  };
  if (const Json* json = field("json")) {
    if (json->is_string()) {
      request->set_json_schema(json->get<std::string>());
    } else if (json->is_object()) {
      request->set_json_schema(json->dump());
    } else {
      return TypeError("structured_outputs.json", "a JSON Schema (an object or its text)");
    }
  }
  if (const Json* regex = field("regex")) {
    if (!regex->is_string()) return TypeError("structured_outputs.regex", "a string");
    request->set_regex(regex->get<std::string>());
  }
  if (const Json* grammar = field("grammar")) {
    if (!grammar->is_string()) return TypeError("structured_outputs.grammar", "a string");
    request->set_grammar(grammar->get<std::string>());
  }
  if (const Json* choice = field("choice")) {
    if (!choice->is_array()) return TypeError("structured_outputs.choice", "an array of strings");
    v1::Choices* choices = request->mutable_choice();
    for (const Json& item : *choice) {
      if (!item.is_string()) return TypeError("structured_outputs.choice", "an array of strings");
      choices->add_choices(item.get<std::string>());
    }
  }
  // json_object: false asks for nothing.
  const Json* json_object = FindField(outputs, "json_object");
  if (json_object != nullptr && !json_object->is_boolean()) {
    return TypeError("structured_outputs.json_object", "a boolean");
  }
  if (json_object != nullptr && json_object->get<bool>()) {
    field("json_object");
    request->set_json_object(true);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadStructuredOutput(const Json& body, v1::GenerateRequest* request,
                                  OpenAiOptions* options) {
  LOOM_RETURN_IF_ERROR(ReadResponseFormat(body, request, options));
  const Json* outputs = FindField(body, kStructuredOutputs);
  if (outputs == nullptr) return absl::OkStatus();
  if (!outputs->is_object()) return TypeError(kStructuredOutputs, "an object");
  if (request->constraint_case() != v1::GenerateRequest::CONSTRAINT_NOT_SET) {
    return InvalidParam(kStructuredOutputs,
                        "structured_outputs and response_format cannot both constrain the output");
  }
  int set = 0;
  LOOM_RETURN_IF_ERROR(ReadStructuredOutputs(*outputs, request, options, &set));
  if (set != 1) {
    request->clear_constraint();
    options->constraint_field.clear();
    return InvalidParam(kStructuredOutputs,
                        absl::StrCat("structured_outputs must set exactly one of json, regex, "
                                     "choice, grammar, json_object; got ",
                                     set));
  }
  return absl::OkStatus();
}

absl::Status RenameConstraintError(const absl::Status& status, const OpenAiOptions& options) {
  if (status.code() != absl::StatusCode::kInvalidArgument || options.constraint_field.empty()) {
    return status;
  }
  const absl::string_view message = status.message();
  for (absl::string_view field : kConstraintFields) {
    if (absl::StartsWith(message, field) && message.size() > field.size() &&
        (message[field.size()] == ':' || message[field.size()] == ' ' ||
         message[field.size()] == '[' || message[field.size()] == '.')) {
      const absl::string_view param = absl::StartsWith(options.constraint_field, kResponseFormat)
                                          ? kResponseFormat
                                          : kStructuredOutputs;
      return InvalidParam(param,
                          absl::StrCat(options.constraint_field, message.substr(field.size())));
    }
  }
  return status;
}

}  // namespace loom::openai
