#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "chat_template/ast.h"

namespace loom::jinja {
namespace {

std::string FormatFloat(double d) {
  // Python prints floats with a ".0" when they are whole.
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e16) {
    return absl::StrCat(static_cast<int64_t>(d), ".0");
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", d);
  // Shortest representation that round-trips, as Python's repr.
  for (int precision = 1; precision <= 17; ++precision) {
    char shorter[32];
    std::snprintf(shorter, sizeof(shorter), "%.*g", precision, d);
    if (std::strtod(shorter, nullptr) == d) return shorter;
  }
  return buf;
}

std::string QuoteRepr(const std::string& s) {
  const char quote =
      s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    if (c == '\\' || c == quote) out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  out.push_back(quote);
  return out;
}

void AppendJsonString(const std::string& s, std::string& out) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

}  // namespace

Value Value::MakeList(List items) {
  Value v;
  v.data_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::MakeDict(Dict items) {
  Value v;
  v.data_ = std::make_shared<Dict>(std::move(items));
  return v;
}

bool Value::Truthy() const {
  if (is_bool()) return as_bool();
  if (is_int()) return as_int() != 0;
  if (is_float()) return as_number() != 0.0;
  if (is_string()) return !as_string().empty();
  if (is_list()) return !list().empty();
  if (is_dict()) return !dict().empty();
  return false;  // undefined, none
}

std::string Value::ToString() const {
  if (is_undefined()) return "";
  if (is_string()) return as_string();
  return Repr();
}

namespace {

// A list as "[a, b]" or a dict as "{k: v, ...}", elements written by `element`
// and keys appended by `key`.
template <typename Element, typename Key>
std::string FormatContainer(const Value& value, const Element& element, const Key& key) {
  std::string out;
  if (value.is_list()) {
    out = "[";
    for (size_t i = 0; i < value.list().size(); ++i) {
      if (i > 0) out += ", ";
      out += element(value.list()[i]);
    }
    return out + "]";
  }
  out = "{";
  bool first = true;
  for (const auto& [k, v] : value.dict()) {
    if (!first) out += ", ";
    first = false;
    key(k, out);
    absl::StrAppend(&out, ": ", element(v));
  }
  return out + "}";
}

}  // namespace

std::string Value::Repr() const {
  if (is_undefined()) return "";
  if (is_none()) return "None";
  if (is_bool()) return as_bool() ? "True" : "False";
  if (is_int()) return absl::StrCat(as_int());
  if (is_float()) return FormatFloat(as_number());
  if (is_string()) return QuoteRepr(as_string());
  return FormatContainer(
      *this, [](const Value& v) { return v.Repr(); },
      [](const std::string& key, std::string& out) { out += QuoteRepr(key); });
}

namespace {

void AppendJson(const Value& value, int indent, int level, std::string& out);

// A line break and the indentation of `level` when indenting, else nothing.
void AppendBreak(int indent, int level, std::string& out) {
  if (indent < 0) return;
  out.push_back('\n');
  out.append(static_cast<size_t>(indent) * static_cast<size_t>(level), ' ');
}

template <typename Items, typename AppendItem>
void AppendJsonContainer(const Items& items, char open, char close, int indent, int level,
                         const AppendItem& append_item, std::string& out) {
  out.push_back(open);
  if (items.empty()) {
    out.push_back(close);
    return;
  }
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += indent < 0 ? ", " : ",";
    first = false;
    AppendBreak(indent, level + 1, out);
    append_item(item);
  }
  AppendBreak(indent, level, out);
  out.push_back(close);
}

void AppendJson(const Value& value, int indent, int level, std::string& out) {
  if (value.is_list()) {
    AppendJsonContainer(
        value.list(), '[', ']', indent, level,
        [&](const Value& v) { AppendJson(v, indent, level + 1, out); }, out);
  } else if (value.is_dict()) {
    AppendJsonContainer(
        value.dict(), '{', '}', indent, level,
        [&](const OrderedDict::Item& item) {
          AppendJsonString(item.first, out);
          out += ": ";
          AppendJson(item.second, indent, level + 1, out);
        },
        out);
  } else if (value.is_string()) {
    AppendJsonString(value.as_string(), out);
  } else if (value.is_bool()) {
    out += value.as_bool() ? "true" : "false";
  } else if (value.is_int()) {
    absl::StrAppend(&out, value.as_int());
  } else if (value.is_float()) {
    out += FormatFloat(value.as_number());
  } else {
    out += "null";
  }
}

}  // namespace

std::string Value::ToJson(int indent) const {
  std::string out;
  AppendJson(*this, indent, 0, out);
  return out;
}

OrderedDict::OrderedDict(std::initializer_list<Item> items) {
  for (const Item& item : items) (*this)[item.first] = item.second;
}

Value& OrderedDict::operator[](const std::string& key) {
  const iterator it = find(key);
  if (it != end()) return it->second;
  items_.emplace_back(key, Value());
  return items_.back().second;
}

OrderedDict::iterator OrderedDict::find(std::string_view key) {
  return std::find_if(begin(), end(), [key](const Item& item) { return item.first == key; });
}

OrderedDict::const_iterator OrderedDict::find(std::string_view key) const {
  return std::find_if(begin(), end(), [key](const Item& item) { return item.first == key; });
}

bool Value::Equals(const Value& other) const {
  if (is_number() && other.is_number()) return as_number() == other.as_number();
  if (is_bool() && other.is_bool()) return as_bool() == other.as_bool();
  if (is_string() && other.is_string()) return as_string() == other.as_string();
  if (is_none() && other.is_none()) return true;
  if (is_undefined() && other.is_undefined()) return true;
  if (is_list() && other.is_list()) {
    if (list().size() != other.list().size()) return false;
    for (size_t i = 0; i < list().size(); ++i) {
      if (!list()[i].Equals(other.list()[i])) return false;
    }
    return true;
  }
  if (is_dict() && other.is_dict()) {
    if (dict().size() != other.dict().size()) return false;
    for (const auto& [k, v] : dict()) {
      auto it = other.dict().find(k);
      if (it == other.dict().end() || !v.Equals(it->second)) return false;
    }
    return true;
  }
  return false;
}

const char* Value::TypeName() const {
  if (is_undefined()) return "undefined";
  if (is_none()) return "none";
  if (is_bool()) return "bool";
  if (is_int()) return "int";
  if (is_float()) return "float";
  if (is_string()) return "string";
  if (is_list()) return "list";
  return "dict";
}

absl::Status CheckStringSize(size_t bytes) {
  if (bytes <= kMaxStringBytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat("chat template: a string of ", bytes,
                                                   " bytes exceeds the limit of ", kMaxStringBytes,
                                                   " bytes"));
}

absl::StatusOr<std::string> JoinChecked(const std::vector<std::string>& parts,
                                        absl::string_view sep) {
  size_t bytes = parts.empty() ? 0 : sep.size() * (parts.size() - 1);
  for (const std::string& p : parts) bytes += p.size();
  LOOM_RETURN_IF_ERROR(CheckStringSize(bytes));
  return absl::StrJoin(parts, sep);
}

absl::StatusOr<std::string> ReplaceChecked(absl::string_view s, absl::string_view from,
                                           absl::string_view to) {
  // absl (like the filter) leaves an empty `from` alone: only longer `to` grows.
  if (!from.empty() && to.size() > from.size()) {
    size_t matches = 0;
    for (size_t at = s.find(from); at != absl::string_view::npos;
         at = s.find(from, at + from.size())) {
      ++matches;
    }
    size_t bytes = 0;
    if (__builtin_mul_overflow(matches, to.size() - from.size(), &bytes) ||
        __builtin_add_overflow(bytes, s.size(), &bytes)) {
      bytes = SIZE_MAX;
    }
    LOOM_RETURN_IF_ERROR(CheckStringSize(bytes));
  }
  return absl::StrReplaceAll(s, {{from, to}});
}

}  // namespace loom::jinja
