#include "model/chat_template_builtins.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "model/tokenizer_utf8.h"

namespace loom::jinja {
namespace {

constexpr int64_t kMaxRange = 1'000'000;

absl::Status TypeError(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("chat template error: ", what));
}

absl::StatusOr<Value> StringValue(absl::StatusOr<std::string> s) {
  if (!s.ok()) return s.status();
  return Value(*std::move(s));
}

absl::Status Unsupported(absl::string_view kind, absl::string_view name) {
  return absl::UnimplementedError(
      absl::StrCat("chat template: unsupported ", kind, " '", name, "'"));
}

// Code point boundaries, so that strings index and slice by character.
std::vector<std::string> Chars(const std::string& s) {
  std::vector<std::string> chars;
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8CharLength(s, i);
    chars.push_back(s.substr(i, n));
    i += n;
  }
  return chars;
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

absl::StatusOr<bool> Compare(const std::string& op, const Value& a, const Value& b) {
  int cmp;
  if (a.is_number() && b.is_number()) {
    cmp = a.as_number() < b.as_number() ? -1 : (a.as_number() > b.as_number() ? 1 : 0);
  } else if (a.is_string() && b.is_string()) {
    cmp = a.as_string().compare(b.as_string());
  } else {
    return TypeError(absl::StrCat("cannot compare ", a.TypeName(), " and ", b.TypeName()));
  }
  if (op == "<") return cmp < 0;
  if (op == ">") return cmp > 0;
  if (op == "<=") return cmp <= 0;
  return cmp >= 0;
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  if (container.is_string() && item.is_string()) {
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_list()) {
    return std::any_of(container.list().begin(), container.list().end(),
                       [&](const Value& v) { return v.Equals(item); });
  }
  if (container.is_dict() && item.is_string()) return container.dict().contains(item.as_string());
  return TypeError(absl::StrCat("'in' needs a string, list or dict, not ", container.TypeName()));
}

}  // namespace

Value GetItem(const Value& object, const Value& key) {
  if (object.is_dict() && key.is_string()) {
    auto it = object.dict().find(key.as_string());
    return it == object.dict().end() ? Value() : it->second;
  }
  if ((object.is_list() || object.is_string()) && key.is_int()) {
    const std::vector<std::string> chars =
        object.is_string() ? Chars(object.as_string()) : std::vector<std::string>();
    const int64_t n = object.is_list() ? static_cast<int64_t>(object.list().size())
                                       : static_cast<int64_t>(chars.size());
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value();
    return object.is_list() ? object.list()[i] : Value(chars[i]);
  }
  return Value();
}

absl::StatusOr<Value> Slice(const Value& object, std::optional<int64_t> start,
                            std::optional<int64_t> stop, std::optional<int64_t> step) {
  if (!object.is_list() && !object.is_string()) {
    return TypeError(absl::StrCat("cannot slice ", object.TypeName()));
  }
  const std::vector<std::string> chars =
      object.is_string() ? Chars(object.as_string()) : std::vector<std::string>();
  const int64_t n = object.is_list() ? static_cast<int64_t>(object.list().size())
                                     : static_cast<int64_t>(chars.size());
  const int64_t s = step.value_or(1);
  if (s == 0) return TypeError("slice step cannot be zero");
  // Python's slice bounds: negatives count from the end, then clamp.
  auto norm = [&](std::optional<int64_t> v, int64_t fallback, int64_t lo, int64_t hi) {
    if (!v) return fallback;
    int64_t x = *v < 0 ? *v + n : *v;
    return std::clamp(x, lo, hi);
  };
  const int64_t b = s > 0 ? norm(start, 0, 0, n) : norm(start, n - 1, -1, n - 1);
  const int64_t e = s > 0 ? norm(stop, n, 0, n) : norm(stop, -1, -1, n - 1);
  Value::List items;
  std::string text;
  for (int64_t i = b; s > 0 ? i < e : i > e; i += s) {
    if (object.is_list()) {
      items.push_back(object.list()[i]);
    } else {
      text += chars[i];
    }
  }
  return object.is_list() ? Value::MakeList(std::move(items)) : Value(std::move(text));
}

absl::StatusOr<Value> BinaryOp(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Value(a.Equals(b));
  if (op == "!=") return Value(!a.Equals(b));
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    absl::StatusOr<bool> r = Compare(op, a, b);
    if (!r.ok()) return r.status();
    return Value(*r);
  }
  if (op == "in" || op == "not in") {
    absl::StatusOr<bool> r = Contains(b, a);
    if (!r.ok()) return r.status();
    return Value(*r == (op == "in"));
  }
  if (op == "~") return Value(a.ToString() + b.ToString());
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list()) {
      Value::List items = a.list();
      items.insert(items.end(), b.list().begin(), b.list().end());
      return Value::MakeList(std::move(items));
    }
  }
  if (op == "*" && a.is_string() && b.is_int()) {
    const size_t times = static_cast<size_t>(std::max<int64_t>(b.as_int(), 0));
    const size_t unit = a.as_string().size();
    if (unit > 0 && times > kMaxStringBytes / unit) {
      return CheckStringSize(times > SIZE_MAX / unit ? SIZE_MAX : unit * times);
    }
    std::string out;
    out.reserve(unit * times);
    for (size_t i = 0; i < times; ++i) out += a.as_string();
    return Value(std::move(out));
  }
  if (!a.is_number() || !b.is_number() || a.is_bool() || b.is_bool()) {
    return TypeError(absl::StrCat("unsupported operand types for ", op, ": ", a.TypeName(), " and ",
                                  b.TypeName()));
  }
  const bool ints = a.is_int() && b.is_int();
  const double x = a.as_number(), y = b.as_number();
  // Templates are untrusted input: integer results that do not fit in 64 bits
  // are an error, never undefined behaviour.
  if (ints && (op == "+" || op == "-" || op == "*")) {
    int64_t r = 0;
    const bool overflow = op == "+"   ? __builtin_add_overflow(a.as_int(), b.as_int(), &r)
                          : op == "-" ? __builtin_sub_overflow(a.as_int(), b.as_int(), &r)
                                      : __builtin_mul_overflow(a.as_int(), b.as_int(), &r);
    if (overflow) return TypeError(absl::StrCat("integer overflow in ", op));
    return Value(r);
  }
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "**") {
    const double p = std::pow(x, y);
    if (!ints || b.as_int() < 0) return Value(p);
    if (!(std::fabs(p) < 9.2e18)) return TypeError("integer overflow in **");
    return Value(static_cast<int64_t>(p));
  }
  if (y == 0) return TypeError("division by zero");
  if (op == "/") return Value(x / y);
  if (op == "//") {
    const double q = std::floor(x / y);
    if (!ints) return Value(q);
    if (!(std::fabs(q) < 9.2e18)) return TypeError("integer overflow in //");
    return Value(static_cast<int64_t>(q));
  }
  if (op == "%") {
    if (ints) {
      if (b.as_int() == -1) return Value(int64_t{0});  // INT64_MIN % -1 overflows
      int64_t r = a.as_int() % b.as_int();
      if (r != 0 && ((r < 0) != (b.as_int() < 0))) r += b.as_int();  // Python's sign rule
      return Value(r);
    }
    return Value(x - y * std::floor(x / y));
  }
  return Unsupported("operator", op);
}

absl::StatusOr<Value> ApplyFilter(const std::string& name, const std::vector<Value>& args,
                                  const Kwargs& kwargs) {
  const Value& v = args[0];
  if (name == "trim") {
    if (!v.is_string()) return TypeError("trim needs a string");
    return Value(Strip(v.as_string(), true, true, OptString(args, 1)));
  }
  if (name == "length" || name == "count") {
    absl::StatusOr<int64_t> n = Length(v);
    if (!n.ok()) return n.status();
    return Value(*n);
  }
  if (name == "upper") return Value(absl::AsciiStrToUpper(v.ToString()));
  if (name == "lower") return Value(absl::AsciiStrToLower(v.ToString()));
  if (name == "title") return Value(Title(v.ToString(), false));
  if (name == "capitalize") return Value(Title(v.ToString(), true));
  if (name == "string") return Value(v.ToString());
  if (name == "safe") return v;
  if (name == "tojson") {
    if (Kwarg(kwargs, "indent") != nullptr) return Unsupported("filter argument", "tojson(indent)");
    return Value(v.ToJson());
  }
  if (name == "int") {
    if (v.is_number()) return Value(static_cast<int64_t>(v.as_number()));
    if (v.is_string())
      return Value(static_cast<int64_t>(std::strtoll(v.as_string().c_str(), nullptr, 10)));
    return Value(int64_t{0});
  }
  if (name == "float") {
    if (v.is_number()) return Value(v.as_number());
    if (v.is_string()) return Value(std::strtod(v.as_string().c_str(), nullptr));
    return Value(0.0);
  }
  if (name == "default" || name == "d") {
    const bool boolean = args.size() > 2 && args[2].Truthy();
    if (v.is_undefined() || (boolean && !v.Truthy())) return args.size() > 1 ? args[1] : Value("");
    return v;
  }
  if (name == "first" || name == "last") {
    if (v.is_list()) {
      if (v.list().empty()) return Value();
      return name == "first" ? v.list().front() : v.list().back();
    }
    if (v.is_string()) {
      std::vector<std::string> chars = Chars(v.as_string());
      if (chars.empty()) return Value();
      return Value(name == "first" ? chars.front() : chars.back());
    }
    return TypeError(absl::StrCat(name, " needs a list or string"));
  }
  if (name == "join") {
    if (!v.is_list()) return TypeError("join needs a list");
    std::vector<std::string> parts;
    for (const Value& item : v.list()) parts.push_back(item.ToString());
    return StringValue(JoinChecked(parts, OptString(args, 1).value_or("")));
  }
  if (name == "replace") {
    if (args.size() < 3 || !args[1].is_string() || !args[2].is_string()) {
      return TypeError("replace needs two strings");
    }
    return StringValue(ReplaceChecked(v.ToString(), args[1].as_string(), args[2].as_string()));
  }
  if (name == "list") {
    if (v.is_list()) return v;
    Value::List items;
    if (v.is_string()) {
      for (std::string& c : Chars(v.as_string())) items.emplace_back(std::move(c));
    } else if (v.is_dict()) {
      for (const auto& [k, unused] : v.dict()) items.emplace_back(k);
    } else {
      return TypeError(absl::StrCat("cannot make a list of ", v.TypeName()));
    }
    return Value::MakeList(std::move(items));
  }
  if (name == "reverse") {
    if (v.is_list()) {
      Value::List items(v.list().rbegin(), v.list().rend());
      return Value::MakeList(std::move(items));
    }
    std::vector<std::string> chars = Chars(v.ToString());
    std::reverse(chars.begin(), chars.end());
    return Value(absl::StrJoin(chars, ""));
  }
  if (name == "items") {
    if (!v.is_dict()) return TypeError("items needs a dict");
    return CallMethod(v, "items", {});
  }
  if (name == "selectattr" || name == "rejectattr") {
    if (!v.is_list() || args.size() < 2 || !args[1].is_string()) {
      return TypeError(absl::StrCat(name, " needs a list and an attribute name"));
    }
    Value::List kept;
    for (const Value& item : v.list()) {
      const Value attr = GetItem(item, args[1]);
      bool pass = attr.Truthy();
      if (args.size() > 2) {
        std::vector<Value> test_args = {attr};
        test_args.insert(test_args.end(), args.begin() + 3, args.end());
        if (!args[2].is_string()) return TypeError("test name must be a string");
        absl::StatusOr<bool> r = ApplyTest(args[2].as_string(), test_args);
        if (!r.ok()) return r.status();
        pass = *r;
      }
      if (pass == (name == "selectattr")) kept.push_back(item);
    }
    return Value::MakeList(std::move(kept));
  }
  if (name == "map") {
    const Value* attribute = Kwarg(kwargs, "attribute");
    if (!v.is_list() || attribute == nullptr)
      return Unsupported("filter", "map without attribute=");
    Value::List mapped;
    for (const Value& item : v.list()) mapped.push_back(GetItem(item, *attribute));
    return Value::MakeList(std::move(mapped));
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
    return Contains(args[1], v);
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
