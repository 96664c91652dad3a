#include "constraint/json_schema_strings.h"

#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "constraint/regex_parser.h"

namespace loom::constraint {
namespace {

using Json = nlohmann::ordered_json;

// The largest magnitude a bound may have: beyond it doubles lose integers.
constexpr double kMaxBound = 9007199254740991.0;  // 2^53 - 1

absl::Status Error(const std::string& path, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat("at ", path.empty() ? "/" : path, ": ", problem));
}

// Characters a JSON string must escape: never produced from a pattern.
std::vector<CodepointRange> JsonEscaped() { return {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}; }

std::vector<CodepointRange> Subtract(const std::vector<CodepointRange>& ranges,
                                     const std::vector<CodepointRange>& minus) {
  std::vector<CodepointRange> out;
  for (CodepointRange r : ranges) {
    for (const CodepointRange& m : minus) {
      if (m.hi < r.lo || m.lo > r.hi) continue;
      if (m.lo > r.lo) out.push_back({r.lo, m.lo - 1});
      if (m.hi >= r.hi) {
        r.lo = 1;
        r.hi = 0;
        break;
      }
      r.lo = m.hi + 1;
    }
    if (r.lo <= r.hi) out.push_back(r);
  }
  return NormalizeRanges(std::move(out));
}

const std::pair<const char*, const char*> kFormats[] = {
    {"date", "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"},
    {"time",
     "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]"
     ")"},
    {"date-time",
     "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
     "(\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
    {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
    {"ipv4",
     "((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9]"
     ")"},
    // What the jsonschema package checks ("@"), kept small: bounded parts
    // would multiply the automaton's states.
    {"email", "[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)+"},
};

// The bound under `key`, or nullopt; draft-4's boolean exclusiveMinimum and
// exclusiveMaximum make the plain bound exclusive.
struct Bound {
  double value = 0;
  bool exclusive = false;
};

absl::StatusOr<std::optional<Bound>> ReadBound(const Json& s, const char* plain,
                                               const char* exclusive, const std::string& path,
                                               bool lower) {
  std::optional<Bound> bound;
  auto tighter = [&](Bound b) {
    if (!bound || (lower ? b.value > bound->value : b.value < bound->value) ||
        (b.value == bound->value && b.exclusive)) {
      bound = b;
    }
  };
  const bool draft4 = s.contains(exclusive) && s[exclusive].is_boolean();
  for (const char* key : {plain, exclusive}) {
    if (!s.contains(key) || (draft4 && key == exclusive)) continue;
    const Json& v = s[key];
    if (!v.is_number() || std::fabs(v.get<double>()) > kMaxBound) {
      return Error(absl::StrCat(path, "/", key),
                   absl::StrCat(key, " must be a number of magnitude at most 2^53 - 1"));
    }
    tighter({v.get<double>(), key == exclusive || (draft4 && s[exclusive].get<bool>())});
  }
  return bound;
}

}  // namespace

absl::StatusOr<int32_t> JsonSchemaStrings::Visit(const Json& s, const std::string& path) {
  int32_t min = 0, max = kUnbounded;
  for (const char* key : {"minLength", "maxLength"}) {
    if (!s.contains(key)) continue;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxRepetition) {
      return Error(absl::StrCat(path, "/", key),
                   absl::StrCat(key, " must be an integer in [0, ", kMaxRepetition, "]"));
    }
    (std::string_view(key) == "minLength" ? min : max) = static_cast<int32_t>(v.get<int64_t>());
  }
  if (max != kUnbounded && min > max) return Error(path, "minLength is above maxLength");
  const bool bounded = min != 0 || max != kUnbounded;
  if (s.contains("pattern") || s.contains("format")) {
    if (bounded)
      return Error(path, "minLength/maxLength beside pattern or format are not supported");
    if (s.contains("pattern") && s.contains("format")) {
      return Error(path, "pattern beside format is not supported");
    }
    const char* key = s.contains("pattern") ? "pattern" : "format";
    if (!s[key].is_string()) return Error(absl::StrCat(path, "/", key), "must be a string");
    const std::string text = s[key].get<std::string>();
    LOOM_ASSIGN_OR_RETURN(const int32_t inner, s.contains("pattern")
                                                   ? Pattern(text, path + "/pattern")
                                                   : Format(text, path + "/format"));
    return b_.Seq({b_.Lit("\""), inner, b_.Lit("\"")});
  }
  return b_.String(min, max);
}

absl::StatusOr<int32_t> JsonSchemaStrings::Pattern(const std::string& pattern,
                                                   const std::string& path) {
  Grammar& g = b_.grammar();
  const size_t first = g.exprs.size();
  absl::StatusOr<RegexParse> parse = ParseRegexInto(pattern, g);
  if (!parse.ok())
    return Error(path, absl::StrCat("regex ", std::string(parse.status().message())));
  for (size_t e = first; e < g.exprs.size(); ++e) {
    Expr& x = g.exprs[e];
    if (x.kind == Expr::Kind::kClass) {
      if (x.negated) {
        std::vector<CodepointRange> ranges = x.ranges;
        for (const CodepointRange& r : JsonEscaped()) ranges.push_back(r);
        x.ranges = NormalizeRanges(std::move(ranges));
      } else {
        x.ranges = Subtract(x.ranges, JsonEscaped());
      }
    } else if (x.kind == Expr::Kind::kLiteral) {
      for (const unsigned char c : x.text) {
        if (c < 0x20 || c == '"' || c == '\\') {
          x = Expr{};
          x.kind = Expr::Kind::kClass;  // matches nothing
          break;
        }
      }
    }
  }
  const int32_t any = b_.Repeat(b_.Class(JsonEscaped(), /*negated=*/true), 0, kUnbounded);
  std::vector<int32_t> parts;
  if (!parse->anchored_start) parts.push_back(any);
  parts.push_back(parse->expr);
  if (!parse->anchored_end) parts.push_back(any);
  return b_.Seq(std::move(parts));
}

absl::StatusOr<int32_t> JsonSchemaStrings::Format(const std::string& format,
                                                  const std::string& path) {
  for (const auto& [name, regex] : kFormats) {
    if (format != name) continue;
    absl::StatusOr<RegexParse> parse = ParseRegexInto(regex, b_.grammar());
    if (!parse.ok()) return parse.status();
    return parse->expr;
  }
  return Error(path, absl::StrCat("unsupported format \"", format, "\""));
}

absl::StatusOr<int32_t> JsonSchemaStrings::VisitInteger(const Json& s, const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(const std::optional<Bound> lower,
                        ReadBound(s, "minimum", "exclusiveMinimum", path, true));
  LOOM_ASSIGN_OR_RETURN(const std::optional<Bound> upper,
                        ReadBound(s, "maximum", "exclusiveMaximum", path, false));
  int64_t lo = -JsonGrammarBuilder::kMaxInteger, hi = JsonGrammarBuilder::kMaxInteger;
  if (lower) {
    lo = static_cast<int64_t>(lower->exclusive ? std::floor(lower->value) + 1
                                               : std::ceil(lower->value));
  }
  if (upper) {
    hi = static_cast<int64_t>(upper->exclusive ? std::ceil(upper->value) - 1
                                               : std::floor(upper->value));
  }
  if (lo > hi) return Error(path, "no integer lies within the bounds");
  return b_.Integer(lo, hi);
}

absl::StatusOr<int32_t> JsonSchemaStrings::VisitNumber(const Json& s, const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(const std::optional<Bound> lower,
                        ReadBound(s, "minimum", "exclusiveMinimum", path, true));
  LOOM_ASSIGN_OR_RETURN(const std::optional<Bound> upper,
                        ReadBound(s, "maximum", "exclusiveMaximum", path, false));
  if (!lower && !upper) return b_.Number();
  const bool integral = (!lower || lower->value == std::floor(lower->value)) &&
                        (!upper || upper->value == std::floor(upper->value));
  if (!lower || lower->value < 0 || !integral) {
    return Error(path,
                 "number bounds are supported as integers with a minimum at or above 0; use "
                 "type integer otherwise");
  }
  const auto lo = static_cast<int64_t>(lower->value);
  const int32_t digit = b_.Class({{'0', '9'}});
  const int32_t any_fraction = b_.Opt(b_.Seq({b_.Lit("."), b_.Repeat(digit, 1, 16)}));
  const int32_t zero_fraction = b_.Opt(b_.Seq({b_.Lit("."), b_.Repeat(b_.Lit("0"), 1, 16)}));
  // Zeros up to the first other digit, so that the automaton stays small.
  const int32_t some_fraction = b_.Seq({b_.Lit("."), b_.Repeat(b_.Lit("0"), 0, 15),
                                        b_.Class({{'1', '9'}}), b_.Repeat(digit, 0, 15)});
  // Integer part i: lo itself (a fraction above zero when lo is exclusive),
  // the integers strictly between, and hi (only a zero fraction).
  const int64_t hi = upper ? static_cast<int64_t>(upper->value) : JsonGrammarBuilder::kMaxInteger;
  const bool hi_exclusive = upper && upper->exclusive;
  if (hi < lo || (hi == lo && (lower->exclusive || hi_exclusive))) {
    return Error(path, "no number lies within the bounds");
  }
  if (hi == lo) return b_.Seq({b_.Integer(lo, lo), zero_fraction});
  std::vector<int32_t> parts;
  parts.push_back(b_.Seq({b_.Integer(lo, lo), lower->exclusive ? some_fraction : any_fraction}));
  if (hi > lo + 1) parts.push_back(b_.Seq({b_.Integer(lo + 1, hi - 1), any_fraction}));
  if (!hi_exclusive) parts.push_back(b_.Seq({b_.Integer(hi, hi), zero_fraction}));
  return b_.Alt(std::move(parts));
}

}  // namespace loom::constraint
