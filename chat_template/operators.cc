// The operators and subscripts of the Jinja subset: comparison, arithmetic,
// concatenation, membership, item access and slicing.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "chat_template/ast.h"
#include "chat_template/builtins.h"

namespace loom::jinja {
namespace {

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
    LOOM_ASSIGN_OR_RETURN(const bool r, Compare(op, a, b));
    return Value(r);
  }
  if (op == "in" || op == "not in") {
    LOOM_ASSIGN_OR_RETURN(const bool r, Contains(b, a));
    return Value(r == (op == "in"));
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

}  // namespace loom::jinja
