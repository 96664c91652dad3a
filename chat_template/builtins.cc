#include "chat_template/builtins.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "base/utf8.h"

namespace loom::jinja {

absl::Status TypeError(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("chat template error: ", what));
}

absl::Status Unsupported(absl::string_view kind, absl::string_view name) {
  return absl::UnimplementedError(
      absl::StrCat("chat template: unsupported ", kind, " '", name, "'"));
}

std::vector<std::string> Chars(const std::string& s) {
  std::vector<std::string> chars;
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8CharLength(s, i);
    chars.push_back(s.substr(i, n));
    i += n;
  }
  return chars;
}

namespace {

constexpr int64_t kMaxRange = 1'000'000;
// Deeper indents only pad the output; the bound keeps one tojson's output
// within a small multiple of its input.
constexpr int64_t kMaxJsonIndent = 16;

absl::StatusOr<Value> StringValue(absl::StatusOr<std::string> s) {
  LOOM_ASSIGN_OR_RETURN(std::string text, std::move(s));
  return Value(std::move(text));
}

bool IsStripChar(char c, const std::optional<std::string>& chars) {
  if (chars) return chars->find(c) != std::string::npos;
  return absl::ascii_isspace(static_cast<unsigned char>(c));
}

std::string Strip(const std::string& s, bool left, bool right,
                  const std::optional<std::string>& chars) {
  size_t b = 0, e = s.size();
  while (left && b < e && IsStripChar(s[b], chars)) ++b;
  while (right && e > b && IsStripChar(s[e - 1], chars)) --e;
  return s.substr(b, e - b);
}

// Python's str.title() (only_first = false) and str.capitalize() (true), ASCII only.
std::string Title(const std::string& s, bool only_first) {
  std::string out = absl::AsciiStrToLower(s);
  bool word_start = true;
  for (size_t i = 0; i < out.size(); ++i) {
    const unsigned char c = out[i];
    if (only_first) {
      if (i == 0) out[i] = absl::ascii_toupper(c);
      continue;
    }
    if (absl::ascii_isalpha(c) && word_start) out[i] = absl::ascii_toupper(c);
    word_start = !absl::ascii_isalpha(c);
  }
  return out;
}

std::optional<std::string> OptString(const std::vector<Value>& args, size_t i) {
  if (i < args.size() && args[i].is_string()) return args[i].as_string();
  return std::nullopt;
}

const Value* Kwarg(const Kwargs& kwargs, std::string_view name) {
  for (const auto& [k, v] : kwargs) {
    if (k == name) return &v;
  }
  return nullptr;
}

absl::StatusOr<int64_t> Length(const Value& v) {
  if (v.is_string()) return static_cast<int64_t>(Chars(v.as_string()).size());
  if (v.is_list()) return static_cast<int64_t>(v.list().size());
  if (v.is_dict()) return static_cast<int64_t>(v.dict().size());
  return TypeError(absl::StrCat("object of type ", v.TypeName(), " has no length"));
}

}  // namespace

namespace {

// A filter's call: args[0] is the filtered value, v; name tells aliases apart.
struct FilterCall {
  const std::string& name;
  const std::vector<Value>& args;
  const Kwargs& kwargs;
  const Value& v;
};
using FilterResult = absl::StatusOr<Value>;
using Filter = FilterResult (*)(const FilterCall&);

FilterResult FilterTrim(const FilterCall& c) {
  if (!c.v.is_string()) return TypeError("trim needs a string");
  return Value(Strip(c.v.as_string(), true, true, OptString(c.args, 1)));
}

FilterResult FilterLength(const FilterCall& c) {
  LOOM_ASSIGN_OR_RETURN(const int64_t n, Length(c.v));
  return Value(n);
}

// tojson(indent=None), as transformers defines it for chat templates.
FilterResult FilterToJson(const FilterCall& c) {
  const Value* indent = Kwarg(c.kwargs, "indent");
  if (indent == nullptr && c.args.size() > 1) indent = &c.args[1];
  if (indent == nullptr || indent->is_none()) return Value(c.v.ToJson());
  if (!indent->is_int() || indent->as_int() < 0 || indent->as_int() > kMaxJsonIndent) {
    return TypeError(absl::StrCat("tojson indent must be an integer in [0, ", kMaxJsonIndent, "]"));
  }
  return Value(c.v.ToJson(static_cast<int>(indent->as_int())));
}

FilterResult FilterInt(const FilterCall& c) {
  if (c.v.is_number()) return Value(static_cast<int64_t>(c.v.as_number()));
  if (c.v.is_string()) {
    return Value(static_cast<int64_t>(std::strtoll(c.v.as_string().c_str(), nullptr, 10)));
  }
  return Value(int64_t{0});
}

FilterResult FilterFloat(const FilterCall& c) {
  if (c.v.is_number()) return Value(c.v.as_number());
  if (c.v.is_string()) return Value(std::strtod(c.v.as_string().c_str(), nullptr));
  return Value(0.0);
}

FilterResult FilterDefault(const FilterCall& c) {
  const bool boolean = c.args.size() > 2 && c.args[2].Truthy();
  if (c.v.is_undefined() || (boolean && !c.v.Truthy())) {
    return c.args.size() > 1 ? c.args[1] : Value("");
  }
  return c.v;
}

// first and last.
FilterResult FilterEnd(const FilterCall& c) {
  const bool first = c.name == "first";
  if (c.v.is_list()) {
    if (c.v.list().empty()) return Value();
    return first ? c.v.list().front() : c.v.list().back();
  }
  if (c.v.is_string()) {
    std::vector<std::string> chars = Chars(c.v.as_string());
    if (chars.empty()) return Value();
    return Value(first ? chars.front() : chars.back());
  }
  return TypeError(absl::StrCat(c.name, " needs a list or string"));
}

FilterResult FilterJoin(const FilterCall& c) {
  if (!c.v.is_list()) return TypeError("join needs a list");
  std::vector<std::string> parts;
  for (const Value& item : c.v.list()) parts.push_back(item.ToString());
  return StringValue(JoinChecked(parts, OptString(c.args, 1).value_or("")));
}

FilterResult FilterReplace(const FilterCall& c) {
  const std::vector<Value>& args = c.args;
  if (args.size() < 3 || !args[1].is_string() || !args[2].is_string()) {
    return TypeError("replace needs two strings");
  }
  return StringValue(ReplaceChecked(c.v.ToString(), args[1].as_string(), args[2].as_string()));
}

FilterResult FilterList(const FilterCall& c) {
  if (c.v.is_list()) return c.v;
  Value::List items;
  if (c.v.is_string()) {
    for (std::string& ch : Chars(c.v.as_string())) items.emplace_back(std::move(ch));
  } else if (c.v.is_dict()) {
    for (const auto& [k, unused] : c.v.dict()) items.emplace_back(k);
  } else {
    return TypeError(absl::StrCat("cannot make a list of ", c.v.TypeName()));
  }
  return Value::MakeList(std::move(items));
}

FilterResult FilterReverse(const FilterCall& c) {
  if (c.v.is_list()) return Value::MakeList(Value::List(c.v.list().rbegin(), c.v.list().rend()));
  std::vector<std::string> chars = Chars(c.v.ToString());
  std::reverse(chars.begin(), chars.end());
  return Value(absl::StrJoin(chars, ""));
}

FilterResult FilterItems(const FilterCall& c) {
  if (!c.v.is_dict()) return TypeError("items needs a dict");
  return CallMethod(c.v, "items", {});
}

// selectattr and rejectattr: keep the items whose attribute passes the test
// (truthiness when none is named), or the ones that fail it.
FilterResult FilterSelectAttr(const FilterCall& c) {
  const std::vector<Value>& args = c.args;
  if (!c.v.is_list() || args.size() < 2 || !args[1].is_string()) {
    return TypeError(absl::StrCat(c.name, " needs a list and an attribute name"));
  }
  Value::List kept;
  for (const Value& item : c.v.list()) {
    const Value attr = GetItem(item, args[1]);
    bool pass = attr.Truthy();
    if (args.size() > 2) {
      std::vector<Value> test_args = {attr};
      test_args.insert(test_args.end(), args.begin() + 3, args.end());
      if (!args[2].is_string()) return TypeError("test name must be a string");
      LOOM_ASSIGN_OR_RETURN(pass, ApplyTest(args[2].as_string(), test_args));
    }
    if (pass == (c.name == "selectattr")) kept.push_back(item);
  }
  return Value::MakeList(std::move(kept));
}

// select and reject: keep the items that pass the test (truthiness when none
// is named), or the ones that fail it.
FilterResult FilterSelect(const FilterCall& c) {
  const std::vector<Value>& args = c.args;
  if (!c.v.is_list()) return TypeError(absl::StrCat(c.name, " needs a list"));
  if (args.size() > 1 && !args[1].is_string()) return TypeError("test name must be a string");
  Value::List kept;
  for (const Value& item : c.v.list()) {
    bool pass = item.Truthy();
    if (args.size() > 1) {
      std::vector<Value> test_args = {item};
      test_args.insert(test_args.end(), args.begin() + 2, args.end());
      LOOM_ASSIGN_OR_RETURN(pass, ApplyTest(args[1].as_string(), test_args));
    }
    if (pass == (c.name == "select")) kept.push_back(item);
  }
  return Value::MakeList(std::move(kept));
}

FilterResult FilterMap(const FilterCall& c) {
  const Value* attribute = Kwarg(c.kwargs, "attribute");
  if (!c.v.is_list() || attribute == nullptr)
    return Unsupported("filter", "map without attribute=");
  Value::List mapped;
  for (const Value& item : c.v.list()) mapped.push_back(GetItem(item, *attribute));
  return Value::MakeList(std::move(mapped));
}

// Every filter by name; aliases share a function.
constexpr std::pair<std::string_view, Filter> kFilters[] = {
    {"trim", FilterTrim},
    {"length", FilterLength},
    {"count", FilterLength},
    {"upper",
     [](const FilterCall& c) -> FilterResult {
       return Value(absl::AsciiStrToUpper(c.v.ToString()));
     }},
    {"lower",
     [](const FilterCall& c) -> FilterResult {
       return Value(absl::AsciiStrToLower(c.v.ToString()));
     }},
    {"title",
     [](const FilterCall& c) -> FilterResult { return Value(Title(c.v.ToString(), false)); }},
    {"capitalize",
     [](const FilterCall& c) -> FilterResult { return Value(Title(c.v.ToString(), true)); }},
    {"string", [](const FilterCall& c) -> FilterResult { return Value(c.v.ToString()); }},
    {"safe", [](const FilterCall& c) -> FilterResult { return c.v; }},
    {"tojson", FilterToJson},
    {"int", FilterInt},
    {"float", FilterFloat},
    {"default", FilterDefault},
    {"d", FilterDefault},
    {"first", FilterEnd},
    {"last", FilterEnd},
    {"join", FilterJoin},
    {"replace", FilterReplace},
    {"list", FilterList},
    {"reverse", FilterReverse},
    {"items", FilterItems},
    {"selectattr", FilterSelectAttr},
    {"rejectattr", FilterSelectAttr},
    {"select", FilterSelect},
    {"reject", FilterSelect},
    {"map", FilterMap},
};

}  // namespace

absl::StatusOr<Value> ApplyFilter(const std::string& name, const std::vector<Value>& args,
                                  const Kwargs& kwargs) {
  for (const auto& [filter_name, filter] : kFilters) {
    if (filter_name == name) return filter(FilterCall{name, args, kwargs, args[0]});
  }
  return Unsupported("filter", name);
}

absl::StatusOr<bool> ApplyTest(const std::string& name, const std::vector<Value>& args) {
  const Value& v = args[0];
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "mapping") return v.is_dict();
  if (name == "sequence") return v.is_list() || v.is_string() || v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_string() || v.is_dict();
  if (name == "odd" || name == "even") {
    if (!v.is_int()) return TypeError(absl::StrCat(name, " needs an integer"));
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "eq" || name == "equalto" || name == "==" || name == "ne" || name == "!=") {
    if (args.size() < 2) return TypeError(absl::StrCat(name, " needs an argument"));
    return v.Equals(args[1]) == (name != "ne" && name != "!=");
  }
  if (name == "in") {
    if (args.size() < 2) return TypeError("in needs an argument");
    LOOM_ASSIGN_OR_RETURN(const Value in, BinaryOp("in", v, args[1]));
    return in.as_bool();
  }
  return Unsupported("test", name);
}

absl::StatusOr<Value> CallMethod(const Value& object, const std::string& name,
                                 const std::vector<Value>& args) {
  if (object.is_string()) {
    const std::string& s = object.as_string();
    if (name == "strip") return Value(Strip(s, true, true, OptString(args, 0)));
    if (name == "lstrip") return Value(Strip(s, true, false, OptString(args, 0)));
    if (name == "rstrip") return Value(Strip(s, false, true, OptString(args, 0)));
    if (name == "upper") return Value(absl::AsciiStrToUpper(s));
    if (name == "lower") return Value(absl::AsciiStrToLower(s));
    if (name == "title") return Value(Title(s, false));
    if (name == "capitalize") return Value(Title(s, true));
    if (name == "startswith" || name == "endswith") {
      std::optional<std::string> x = OptString(args, 0);
      if (!x) return TypeError(absl::StrCat(name, " needs a string"));
      return Value(name == "startswith" ? s.starts_with(*x) : s.ends_with(*x));
    }
    if (name == "replace") {
      std::optional<std::string> from = OptString(args, 0), to = OptString(args, 1);
      if (!from || !to || from->empty()) return TypeError("replace needs two strings");
      return StringValue(ReplaceChecked(s, *from, *to));
    }
    if (name == "split") {
      Value::List parts;
      std::optional<std::string> sep = OptString(args, 0);
      if (sep && !sep->empty()) {
        for (absl::string_view p : absl::StrSplit(s, *sep)) parts.emplace_back(std::string(p));
      } else {
        for (absl::string_view p : absl::StrSplit(s, ' ', absl::SkipWhitespace())) {
          parts.emplace_back(std::string(p));
        }
      }
      return Value::MakeList(std::move(parts));
    }
    if (name == "join") {
      if (args.empty() || !args[0].is_list()) return TypeError("join needs a list");
      std::vector<std::string> parts;
      for (const Value& item : args[0].list()) parts.push_back(item.ToString());
      return StringValue(JoinChecked(parts, s));
    }
  }
  if (object.is_dict()) {
    if (name == "items" || name == "keys" || name == "values") {
      Value::List items;
      for (const auto& [k, v] : object.dict()) {
        if (name == "items") items.push_back(Value::MakeList({Value(k), v}));
        if (name == "keys") items.emplace_back(k);
        if (name == "values") items.push_back(v);
      }
      return Value::MakeList(std::move(items));
    }
    if (name == "get") {
      if (args.empty()) return TypeError("get needs a key");
      Value found = GetItem(object, args[0]);
      if (found.is_undefined()) return args.size() > 1 ? args[1] : Value(Value::None{});
      return found;
    }
  }
  return Unsupported("method", absl::StrCat(object.TypeName(), ".", name));
}

absl::StatusOr<Value> CallGlobal(const std::string& name, const std::vector<Value>& args,
                                 const Kwargs& kwargs) {
  if (name == "raise_exception") {
    return absl::InvalidArgumentError(args.empty() ? "chat template raised an exception"
                                                   : args[0].ToString());
  }
  if (name == "range") {
    int64_t start = 0, stop = 0, step = 1;
    for (const Value& a : args) {
      if (!a.is_int()) return TypeError("range needs integers");
    }
    if (args.size() == 1) stop = args[0].as_int();
    if (args.size() >= 2) {
      start = args[0].as_int();
      stop = args[1].as_int();
    }
    if (args.size() >= 3) step = args[2].as_int();
    if (step == 0 || args.empty() || args.size() > 3) return TypeError("bad range arguments");
    Value::List items;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (static_cast<int64_t>(items.size()) >= kMaxRange) return TypeError("range too long");
      items.emplace_back(i);
    }
    return Value::MakeList(std::move(items));
  }
  if (name == "namespace" || name == "dict") {
    Value::Dict fields;
    for (const auto& [k, v] : kwargs) fields[k] = v;
    return Value::MakeDict(std::move(fields));
  }
  if (name == "strftime_now") {
    std::optional<std::string> format = OptString(args, 0);
    if (!format) return TypeError("strftime_now needs a format");
    const std::time_t now = std::time(nullptr);
    std::tm tm;
    localtime_r(&now, &tm);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof(buf), format->c_str(), &tm);
    return Value(std::string(buf, n));
  }
  return Unsupported("function", name);
}

}  // namespace loom::jinja
