#include "constraint/json_schema_grammar.h"

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "constraint/json_grammar_builder.h"
#include "constraint/json_schema_strings.h"
#include "nlohmann/json.hpp"

namespace loom::constraint {
namespace {

using Json = nlohmann::ordered_json;

const absl::flat_hash_set<std::string>& KnownKeywords() {
  static const auto* known = new absl::flat_hash_set<std::string>{
      // Annotations, which constrain nothing.
      "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
      "readOnly", "writeOnly", "$defs", "definitions",
      // Applied.
      "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "properties", "required",
      "additionalProperties", "items", "prefixItems", "minItems", "maxItems", "minLength",
      "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
      "exclusiveMaximum"};
  return *known;
}

bool IsAnnotation(const std::string& key) {
  static const auto* annotations = new absl::flat_hash_set<std::string>{
      "title",    "description", "default",  "examples",  "$schema", "$id",
      "$comment", "deprecated",  "readOnly", "writeOnly", "$defs",   "definitions"};
  return annotations->contains(key);
}

std::string PointerEscape(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

// Rule-name suffix from a $ref's last segment: [A-Za-z0-9-] only.
std::string RuleSuffix(const std::string& ref) {
  std::string name = "ref";
  const size_t slash = ref.rfind('/');
  const std::string last = slash == std::string::npos ? ref : ref.substr(slash + 1);
  if (!last.empty() && last != "#") name += "-";
  for (char c : last) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (c != '#') name += word ? c : '-';
  }
  return name;
}

class SchemaConverter {
 public:
  SchemaConverter(const Json& root, Grammar& grammar, std::string_view root_rule)
      : root_(root), b_(grammar, std::string(root_rule)), strings_(b_) {}

  absl::Status Run() {
    const int32_t rule = b_.NewRule("");
    b_.grammar().root = rule;
    refs_["#"] = rule;
    LOOM_ASSIGN_OR_RETURN(const int32_t body, Visit(root_, "", 0));
    b_.SetBody(rule, body);
    return absl::OkStatus();
  }

 private:
  static absl::Status Error(const std::string& path, const std::string& problem) {
    return absl::InvalidArgumentError(
        absl::StrCat("at ", path.empty() ? "/" : path, ": ", problem));
  }

  absl::StatusOr<int32_t> Visit(const Json& s, const std::string& path, int depth) {
    if (depth > kMaxSchemaDepth) {
      return Error(path, absl::StrCat("schemas nested deeper than ", kMaxSchemaDepth));
    }
    if (s.is_boolean()) {
      if (s.get<bool>()) return b_.AnyValue();
      return Error(path, "the schema false matches no value");
    }
    if (!s.is_object()) return Error(path, "a schema must be an object or a boolean");
    bool applies_only_annotations = true;
    for (const auto& [key, value] : s.items()) {
      if (!KnownKeywords().contains(key)) {
        return Error(path, absl::StrCat("unsupported keyword \"", key, "\""));
      }
      if (!IsAnnotation(key)) applies_only_annotations = false;
    }
    if (applies_only_annotations) return b_.AnyValue();
    if (s.contains("$ref")) return VisitRef(s, path, depth);
    if (s.contains("const")) return b_.Lit(s["const"].dump());
    if (s.contains("enum")) return VisitEnum(s["enum"], path + "/enum");
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
      if (s.contains(key)) return VisitCombinator(s, key, path, depth);
    }
    return VisitTypes(s, path, depth);
  }

  // The keywords beside a combinator or $ref must be annotations only.
  static absl::Status OnlyAnnotationsBeside(const Json& s, const std::string& path,
                                            const std::string& keyword) {
    for (const auto& [key, value] : s.items()) {
      if (key != keyword && !IsAnnotation(key)) {
        return Error(path, absl::StrCat("\"", keyword, "\" beside \"", key, "\" is not supported"));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int32_t> VisitRef(const Json& s, const std::string& path, int depth) {
    LOOM_RETURN_IF_ERROR(OnlyAnnotationsBeside(s, path, "$ref"));
    if (!s["$ref"].is_string()) return Error(path + "/$ref", "$ref must be a string");
    const std::string ref = s["$ref"].get<std::string>();
    if (auto it = refs_.find(ref); it != refs_.end()) return b_.Ref(it->second);
    if (ref.empty() || ref[0] != '#') {
      return Error(path + "/$ref",
                   absl::StrCat("only local references (#...) are supported: ", ref));
    }
    const Json* target = nullptr;
    try {
      target = &root_.at(Json::json_pointer(ref.substr(1)));
    } catch (const Json::exception&) {
      return Error(path + "/$ref", absl::StrCat("unresolvable reference ", ref));
    }
    const int32_t rule = b_.NewRule(RuleSuffix(ref));
    refs_[ref] = rule;
    LOOM_ASSIGN_OR_RETURN(const int32_t body, Visit(*target, ref.substr(1), depth + 1));
    b_.SetBody(rule, body);
    return b_.Ref(rule);
  }

  absl::StatusOr<int32_t> VisitEnum(const Json& values, const std::string& path) {
    if (!values.is_array() || values.empty()) return Error(path, "enum must be a non-empty array");
    std::vector<int32_t> alternatives;
    for (const Json& v : values) alternatives.push_back(b_.Lit(v.dump()));
    return b_.Alt(std::move(alternatives));
  }

  absl::StatusOr<int32_t> VisitCombinator(const Json& s, const std::string& key,
                                          const std::string& path, int depth) {
    LOOM_RETURN_IF_ERROR(OnlyAnnotationsBeside(s, path, key));
    const Json& list = s[key];
    const std::string at = absl::StrCat(path, "/", key);
    if (!list.is_array() || list.empty()) return Error(at, key + " must be a non-empty array");
    if (key == "allOf" && list.size() != 1) {
      return Error(at, "allOf with more than one schema is not supported");
    }
    std::vector<int32_t> alternatives;
    for (size_t i = 0; i < list.size(); ++i) {
      LOOM_ASSIGN_OR_RETURN(const int32_t alt, Visit(list[i], absl::StrCat(at, "/", i), depth + 1));
      alternatives.push_back(alt);
    }
    return b_.Alt(std::move(alternatives));
  }

  // The type, or the types, a schema without combinators allows.
  absl::StatusOr<int32_t> VisitTypes(const Json& s, const std::string& path, int depth) {
    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const Json& item : t) {
          if (!item.is_string()) return Error(path + "/type", "type must name types");
          types.push_back(item.get<std::string>());
        }
      } else {
        return Error(path + "/type", "type must be a string or a non-empty array");
      }
    } else {
      types.push_back(InferType(s));
    }
    std::vector<int32_t> alternatives;
    for (const std::string& type : types) {
      LOOM_ASSIGN_OR_RETURN(const int32_t alt, VisitType(s, type, path, depth));
      alternatives.push_back(alt);
    }
    return b_.Alt(std::move(alternatives));
  }

  static std::string InferType(const Json& s) {
    for (const char* k : {"properties", "required", "additionalProperties"}) {
      if (s.contains(k)) return "object";
    }
    for (const char* k : {"items", "prefixItems", "minItems", "maxItems"}) {
      if (s.contains(k)) return "array";
    }
    for (const char* k : {"minLength", "maxLength", "pattern", "format"}) {
      if (s.contains(k)) return "string";
    }
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (s.contains(k)) return "number";
    }
    return "any";
  }

  absl::StatusOr<int32_t> VisitType(const Json& s, const std::string& type, const std::string& path,
                                    int depth) {
    if (type == "object") return VisitObject(s, path, depth);
    if (type == "array") return VisitArray(s, path, depth);
    if (type == "string") return strings_.Visit(s, path);
    if (type == "integer") return strings_.VisitInteger(s, path);
    if (type == "number") return strings_.VisitNumber(s, path);
    if (type == "boolean") return b_.Boolean();
    if (type == "null") return b_.Null();
    if (type == "any") return b_.AnyValue();
    return Error(path + "/type", absl::StrCat("unknown type \"", type, "\""));
  }

  absl::StatusOr<int32_t> VisitObject(const Json& s, const std::string& path, int depth);
  absl::StatusOr<int32_t> VisitArray(const Json& s, const std::string& path, int depth);
  absl::StatusOr<std::optional<int32_t>> CountBound(const Json& s, const char* key,
                                                    const std::string& path);

  const Json& root_;
  JsonGrammarBuilder b_;
  JsonSchemaStrings strings_;
  absl::flat_hash_map<std::string, int32_t> refs_;  // $ref -> its rule
};

absl::StatusOr<std::optional<int32_t>> SchemaConverter::CountBound(const Json& s, const char* key,
                                                                   const std::string& path) {
  if (!s.contains(key)) return std::optional<int32_t>();
  const Json& v = s[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxRepetition) {
    return Error(absl::StrCat(path, "/", key),
                 absl::StrCat(key, " must be an integer in [0, ", kMaxRepetition, "]"));
  }
  return std::optional<int32_t>(static_cast<int32_t>(v.get<int64_t>()));
}

absl::StatusOr<int32_t> SchemaConverter::VisitObject(const Json& s, const std::string& path,
                                                     int depth) {
  const Json empty = Json::object();
  const Json& properties = s.contains("properties") ? s["properties"] : empty;
  if (!properties.is_object()) return Error(path + "/properties", "properties must be an object");
  absl::flat_hash_set<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) return Error(path + "/required", "required must be an array");
    for (const Json& name : s["required"]) {
      if (!name.is_string()) return Error(path + "/required", "required must list names");
      if (!properties.contains(name.get<std::string>())) {
        return Error(path + "/required",
                     absl::StrCat("required property \"", name.get<std::string>(),
                                  "\" is not in properties"));
      }
      required.insert(name.get<std::string>());
    }
  }
  if (properties.empty()) {
    const Json& extra = s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
    if (extra.is_boolean() && !extra.get<bool>()) {
      return b_.Seq({b_.Lit("{"), b_.Ws(), b_.Lit("}")});
    }
    if (extra.is_boolean()) return b_.AnyObject();
    LOOM_ASSIGN_OR_RETURN(const int32_t value,
                          Visit(extra, path + "/additionalProperties", depth + 1));
    return b_.ObjectOf(b_.String(0, kUnbounded), value);
  }
  struct Member {
    int32_t expr;
    bool required;
  };
  std::vector<Member> members;
  for (const auto& [name, schema] : properties.items()) {
    LOOM_ASSIGN_OR_RETURN(
        const int32_t value,
        Visit(schema, absl::StrCat(path, "/properties/", PointerEscape(name)), depth + 1));
    members.push_back(
        {b_.Seq({b_.Lit(Json(name).dump()), b_.ColonWs(), value}), required.contains(name)});
  }
  // tail[i]: the members from i on, after at least one was written; some[i]:
  // from i on, at least one (which the required ones force).
  const size_t n = members.size();
  std::vector<int32_t> tail(n + 1), some(n + 1);
  tail[n] = b_.Seq({});
  some[n] = b_.Nothing();
  for (size_t i = n; i-- > 0;) {
    const int32_t written = b_.Seq({b_.Lit(","), b_.Ws(), members[i].expr});
    tail[i] = b_.Seq({members[i].required ? written : b_.Opt(written), tail[i + 1]});
    const int32_t first = b_.Seq({members[i].expr, tail[i + 1]});
    some[i] = members[i].required ? first : b_.Alt({first, some[i + 1]});
  }
  const int32_t body = b_.Seq({some[0], b_.Ws()});
  return b_.Seq({b_.Lit("{"), b_.Ws(), required.empty() ? b_.Opt(body) : body, b_.Lit("}")});
}

absl::StatusOr<int32_t> SchemaConverter::VisitArray(const Json& s, const std::string& path,
                                                    int depth) {
  LOOM_ASSIGN_OR_RETURN(const std::optional<int32_t> min_items, CountBound(s, "minItems", path));
  LOOM_ASSIGN_OR_RETURN(const std::optional<int32_t> max_items, CountBound(s, "maxItems", path));
  const int32_t min = min_items.value_or(0);
  int32_t max = max_items.value_or(kUnbounded);
  std::vector<int32_t> prefix;
  if (s.contains("prefixItems")) {
    const Json& list = s["prefixItems"];
    if (!list.is_array()) return Error(path + "/prefixItems", "prefixItems must be an array");
    for (size_t i = 0; i < list.size(); ++i) {
      LOOM_ASSIGN_OR_RETURN(const int32_t item,
                            Visit(list[i], absl::StrCat(path, "/prefixItems/", i), depth + 1));
      prefix.push_back(item);
    }
  }
  int32_t rest = b_.AnyValue();  // -1: no items past the prefix
  if (s.contains("items")) {
    if (s["items"].is_boolean() && !s["items"].get<bool>()) {
      rest = -1;
      const int32_t p = static_cast<int32_t>(prefix.size());
      max = max == kUnbounded ? p : std::min(max, p);
    } else {
      LOOM_ASSIGN_OR_RETURN(rest, Visit(s["items"], path + "/items", depth + 1));
    }
  }
  if (max != kUnbounded && min > max) {
    return Error(path, "no array satisfies minItems, maxItems and items together");
  }
  if (max == 0) return b_.Seq({b_.Lit("["), b_.Ws(), b_.Lit("]")});
  if (prefix.empty()) {
    return rest >= 0 ? b_.ArrayOf(rest, min, max) : b_.Seq({b_.Lit("["), b_.Ws(), b_.Lit("]")});
  }
  // after(k): the items after the first k, prefix items first.
  const int32_t p = static_cast<int32_t>(prefix.size());
  auto more = [&](int32_t item) { return b_.Seq({b_.Lit(","), b_.Ws(), item}); };
  int32_t after = -1;
  for (int32_t k = std::min(p, max == kUnbounded ? p : max); k >= 1; --k) {
    int32_t next;
    if (k == max) {
      next = b_.Seq({});
    } else if (k == p) {
      next = rest >= 0 ? b_.Repeat(more(rest), std::max(min - k, 0),
                                   max == kUnbounded ? kUnbounded : max - k)
                       : b_.Seq({});
    } else {
      const int32_t step = b_.Seq({more(prefix[k]), after});
      next = k >= min ? b_.Opt(step) : step;
    }
    after = next;
  }
  const int32_t items = b_.Seq({prefix[0], after, b_.Ws()});
  return b_.Seq({b_.Lit("["), b_.Ws(), min > 0 ? items : b_.Opt(items), b_.Lit("]")});
}

}  // namespace

absl::StatusOr<Grammar> JsonSchemaGrammar(std::string_view schema_json,
                                          std::string_view root_rule) {
  const Json schema = Json::parse(schema_json, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded())
    return absl::InvalidArgumentError("at /: the schema is not valid JSON");
  Grammar grammar;
  SchemaConverter converter(schema, grammar, root_rule);
  LOOM_RETURN_IF_ERROR(converter.Run());
  return grammar;
}

Grammar JsonObjectGrammar(std::string_view root_rule) {
  Grammar grammar;
  JsonGrammarBuilder b(grammar, std::string(root_rule));
  const int32_t root = b.NewRule("");
  grammar.root = root;
  b.SetBody(root, b.AnyObject());
  return grammar;
}

}  // namespace loom::constraint
