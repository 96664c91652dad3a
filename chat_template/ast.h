// The Jinja subset behind ChatTemplate: values, the syntax tree, and the
// parse/render entry points. Internal to the chat template implementation.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace loom::jinja {

class OrderedDict;

// A Jinja value. Lists and dicts are shared, so that namespace() objects can
// be updated through `set ns.attr = ...` from inside loops.
class Value {
 public:
  struct Undefined {};
  struct None {};
  using List = std::vector<Value>;
  using Dict = OrderedDict;
  using Data = std::variant<Undefined, None, bool, int64_t, double, std::string,
                            std::shared_ptr<List>, std::shared_ptr<Dict>>;

  Value() = default;
  Value(None) : data_(None{}) {}
  Value(bool b) : data_(b) {}
  Value(int64_t i) : data_(i) {}
  Value(double d) : data_(d) {}
  Value(std::string s) : data_(std::move(s)) {}
  Value(const char* s) : data_(std::string(s)) {}
  static Value MakeList(List items = {});
  static Value MakeDict(Dict items);

  bool is_undefined() const { return std::holds_alternative<Undefined>(data_); }
  bool is_none() const { return std::holds_alternative<None>(data_); }
  bool is_bool() const { return std::holds_alternative<bool>(data_); }
  bool is_int() const { return std::holds_alternative<int64_t>(data_); }
  bool is_float() const { return std::holds_alternative<double>(data_); }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return std::holds_alternative<std::string>(data_); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<List>>(data_); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<Dict>>(data_); }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return std::get<int64_t>(data_); }
  double as_number() const {
    return is_int() ? static_cast<double>(as_int()) : std::get<double>(data_);
  }
  const std::string& as_string() const { return std::get<std::string>(data_); }
  List& list() const { return *std::get<std::shared_ptr<List>>(data_); }
  Dict& dict() const { return *std::get<std::shared_ptr<Dict>>(data_); }

  bool Truthy() const;
  // What {{ value }} prints (Python's str()).
  std::string ToString() const;
  // Python's repr(), for lists and dicts printed whole.
  std::string Repr() const;
  // json.dumps as transformers' tojson calls it: no key sorting, non-ASCII
  // kept; indent < 0 writes one line with ", " and ": ", indent >= 0 one
  // item per line indented by that many spaces per level.
  std::string ToJson(int indent = -1) const;
  bool Equals(const Value& other) const;
  const char* TypeName() const;

 private:
  Data data_;
};

// A dict that keeps its keys in insertion order, as Python's does: templates
// print tool schemas with `tojson` and iterate `items()`, and both must follow
// the order the client wrote. Lookups scan, which suits the small dicts of
// templates (message fields, loop variables, a function's parameters).
class OrderedDict {
 public:
  using Item = std::pair<std::string, Value>;
  using iterator = std::vector<Item>::iterator;
  using const_iterator = std::vector<Item>::const_iterator;

  OrderedDict() = default;
  OrderedDict(std::initializer_list<Item> items);

  // The value under key, inserted as undefined at the end when absent.
  Value& operator[](const std::string& key);
  iterator find(std::string_view key);
  const_iterator find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != end(); }

  iterator begin() { return items_.begin(); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }

 private:
  std::vector<Item> items_;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // value
    kName,     // name
    kList,     // args
    kDict,     // args: key0, value0, key1, value1, ...
    kAttr,     // args[0].name
    kIndex,    // args[0][args[1]]
    kSlice,    // args[0][args[1]:args[2]:args[3]], null parts absent
    kCall,     // args[0](args[1..], kwargs)
    kFilter,   // args[0] | name(args[1..], kwargs)
    kTest,     // args[0] is [not] name(args[1..])
    kUnary,    // name in {"not", "-", "+"}: args[0]
    kBinary,   // args[0] name args[1]
    kTernary,  // args[1] if args[0] else args[2] (args[2] may be null)
  };
  Kind kind = Kind::kLiteral;
  Value value;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // kTest
};

struct Node;
using NodeList = std::vector<Node>;

struct Node {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kBreak, kContinue, kMacro };
  Kind kind = Kind::kText;
  std::string text;                  // kText
  ExprPtr expr;                      // kOutput, kSet value, kFor iterable
  std::vector<std::string> targets;  // kFor loop variables; kSet: name, or {namespace, attr}
  // kIf: (condition, body) pairs in order; the else branch has a null condition.
  std::vector<std::pair<ExprPtr, NodeList>> branches;
  NodeList body;       // kFor, kMacro
  NodeList else_body;  // kFor: when the iterable is empty
  ExprPtr filter;      // kFor ... if filter
  // kMacro: its name is text; parameters in order, each with its default
  // (null when it has none).
  std::vector<std::pair<std::string, ExprPtr>> params;
};

struct Program {
  NodeList nodes;
};

// Limits on what an untrusted template may do. Exceeding one is
// RESOURCE_EXHAUSTED (INVALID_ARGUMENT for nesting), naming the limit.
inline constexpr size_t kMaxSourceBytes = 1u << 20;   // template source
inline constexpr int kMaxParseDepth = 128;            // block and expression nesting
inline constexpr int kMaxEvalDepth = 256;             // expression evaluation
inline constexpr int64_t kMaxSteps = 1'000'000;       // nodes, loop iterations, evaluations
inline constexpr size_t kMaxStringBytes = 64u << 20;  // any one string value
inline constexpr size_t kMaxOutputBytes = 64u << 20;  // the rendered prompt
// Bytes of strings and list items built by one render, in total.
inline constexpr size_t kMaxBuiltBytes = 256u << 20;

// OK when a string of `bytes` may be built.
absl::Status CheckStringSize(size_t bytes);
// parts joined by sep, or RESOURCE_EXHAUSTED before building a string over
// kMaxStringBytes.
absl::StatusOr<std::string> JoinChecked(const std::vector<std::string>& parts,
                                        absl::string_view sep);
// Every occurrence of from (not empty) in s replaced by to, checked likewise.
absl::StatusOr<std::string> ReplaceChecked(absl::string_view s, absl::string_view from,
                                           absl::string_view to);

// Parses template source with transformers' settings (trim_blocks,
// lstrip_blocks). UNIMPLEMENTED for tags outside the subset.
absl::StatusOr<NodeList> Parse(std::string_view source);

// Renders with the given globals (messages, add_generation_prompt, ...).
absl::StatusOr<std::string> Render(const NodeList& nodes, const Value::Dict& globals);

}  // namespace loom::jinja
