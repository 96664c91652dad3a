// Renders a parsed chat template: scopes, loops, and the filters, tests,
// methods and global functions that chat templates use.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "chat_template/ast.h"
#include "chat_template/builtins.h"

namespace loom::jinja {
namespace {

absl::Status Exhausted(absl::string_view what, size_t limit) {
  return absl::ResourceExhaustedError(
      absl::StrCat("chat template: ", what, " exceeds the limit of ", limit));
}

// Bytes a freshly built value holds beyond shared lists and dicts.
size_t BuiltBytes(const Value& v) {
  auto item = [](const Value& x) {
    return sizeof(Value) + (x.is_string() ? x.as_string().size() : 0);
  };
  if (v.is_string()) return v.as_string().size();
  size_t bytes = 0;
  if (v.is_list()) {
    for (const Value& x : v.list()) bytes += item(x);
  } else if (v.is_dict()) {
    for (const auto& [k, x] : v.dict()) bytes += k.size() + item(x);
  }
  return bytes;
}

class Renderer {
 public:
  explicit Renderer(const Value::Dict& globals) { scopes_.push_back(globals); }

  absl::Status RenderNodes(const NodeList& nodes, std::string& out);
  absl::StatusOr<Value> Eval(const Expr& e);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  absl::Status RenderFor(const Node& n, std::string& out);
  absl::StatusOr<Value> EvalNode(const Expr& e);
  absl::Status Step();
  absl::Status Append(std::string_view text, std::string& out);
  // Counts bytes built against kMaxBuiltBytes.
  absl::Status Charge(size_t bytes);
  // EvalNode's cases, one per kind of expression (kAttr and kIndex share one).
  absl::StatusOr<Value> EvalDict(const Expr& e);
  absl::StatusOr<Value> EvalItem(const Expr& e);
  absl::StatusOr<Value> EvalSlice(const Expr& e);
  absl::StatusOr<Value> EvalFilterOrTest(const Expr& e);
  absl::StatusOr<Value> EvalUnary(const Expr& e);
  absl::StatusOr<Value> EvalBinary(const Expr& e);
  absl::StatusOr<Value> EvalCall(const Expr& e);
  // A macro's body rendered with its parameters bound: the call's value.
  absl::StatusOr<Value> CallMacro(const Node& macro, const std::vector<Value>& args,
                                  const Kwargs& kwargs);
  absl::StatusOr<Kwargs> EvalKwargs(const Expr& e);
  absl::StatusOr<std::vector<Value>> EvalArgs(const Expr& e, size_t first);
  Value Lookup(const std::string& name) const;

  std::vector<Value::Dict> scopes_;
  // The macros defined so far, by name (the nodes live in the program).
  std::map<std::string, const Node*, std::less<>> macros_;
  Flow flow_ = Flow::kNormal;
  int64_t steps_ = 0;
  int depth_ = 0;
  size_t built_ = 0;
};

absl::Status Renderer::Step() {
  if (++steps_ <= kMaxSteps) return absl::OkStatus();
  return Exhausted("the number of rendering steps", kMaxSteps);
}

absl::Status Renderer::Append(std::string_view text, std::string& out) {
  if (text.size() > kMaxOutputBytes - out.size()) {
    return Exhausted(absl::StrCat("output of ", out.size() + text.size(), " bytes"),
                     kMaxOutputBytes);
  }
  out += text;
  return absl::OkStatus();
}

absl::Status Renderer::Charge(size_t bytes) {
  if (bytes <= kMaxBuiltBytes - built_) {
    built_ += bytes;
    return absl::OkStatus();
  }
  return Exhausted("the bytes of strings and lists built in one render", kMaxBuiltBytes);
}

Value Renderer::Lookup(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto found = it->find(name);
    if (found != it->end()) return found->second;
  }
  return Value();
}

absl::Status Renderer::RenderNodes(const NodeList& nodes, std::string& out) {
  for (const Node& n : nodes) {
    if (flow_ != Flow::kNormal) return absl::OkStatus();
    LOOM_RETURN_IF_ERROR(Step());
    switch (n.kind) {
      case Node::Kind::kText:
        LOOM_RETURN_IF_ERROR(Append(n.text, out));
        break;
      case Node::Kind::kOutput: {
        LOOM_ASSIGN_OR_RETURN(const Value v, Eval(*n.expr));
        LOOM_RETURN_IF_ERROR(Append(v.ToString(), out));
        break;
      }
      case Node::Kind::kIf:
        for (const auto& [cond, body] : n.branches) {
          bool take = cond == nullptr;
          if (!take) {
            LOOM_ASSIGN_OR_RETURN(const Value v, Eval(*cond));
            take = v.Truthy();
          }
          if (take) {
            LOOM_RETURN_IF_ERROR(RenderNodes(body, out));
            break;
          }
        }
        break;
      case Node::Kind::kFor:
        LOOM_RETURN_IF_ERROR(RenderFor(n, out));
        break;
      case Node::Kind::kSet: {
        LOOM_ASSIGN_OR_RETURN(Value v, Eval(*n.expr));
        if (n.targets.size() == 1) {
          scopes_.back()[n.targets[0]] = std::move(v);
        } else {
          Value ns = Lookup(n.targets[0]);
          if (!ns.is_dict()) {
            return TypeError(absl::StrCat("cannot set an attribute of ", ns.TypeName()));
          }
          ns.dict()[n.targets[1]] = std::move(v);
        }
        break;
      }
      case Node::Kind::kMacro:
        macros_[n.text] = &n;
        break;
      case Node::Kind::kBreak:
        flow_ = Flow::kBreak;
        break;
      case Node::Kind::kContinue:
        flow_ = Flow::kContinue;
        break;
    }
  }
  return absl::OkStatus();
}

absl::Status Renderer::RenderFor(const Node& n, std::string& out) {
  LOOM_ASSIGN_OR_RETURN(const Value iterable, Eval(*n.expr));
  std::vector<Value> items;
  // A string iterates as one new value per byte; lists and dicts only copy
  // values that exist already.
  if (iterable.is_string()) {
    LOOM_RETURN_IF_ERROR(Charge(iterable.as_string().size() * sizeof(Value)));
  }
  if (iterable.is_list()) {
    items = iterable.list();
  } else if (iterable.is_dict()) {
    for (const auto& [k, v] : iterable.dict()) items.emplace_back(k);
  } else if (iterable.is_string()) {
    for (char c : iterable.as_string()) items.emplace_back(std::string(1, c));
  } else if (!iterable.is_undefined() && !iterable.is_none()) {
    return TypeError(absl::StrCat("cannot iterate over ", iterable.TypeName()));
  }
  scopes_.emplace_back();
  auto bind = [&](const Value& item) -> absl::Status {
    if (n.targets.size() == 1) {
      scopes_.back()[n.targets[0]] = item;
      return absl::OkStatus();
    }
    if (!item.is_list() || item.list().size() != n.targets.size()) {
      return TypeError("cannot unpack a loop item");
    }
    for (size_t i = 0; i < n.targets.size(); ++i) scopes_.back()[n.targets[i]] = item.list()[i];
    return absl::OkStatus();
  };
  if (n.filter != nullptr) {
    std::vector<Value> kept;
    for (const Value& item : items) {
      LOOM_RETURN_IF_ERROR(Step());
      LOOM_RETURN_IF_ERROR(bind(item));
      LOOM_ASSIGN_OR_RETURN(const Value keep, Eval(*n.filter));
      if (keep.Truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const int64_t length = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < length; ++i) {
    LOOM_RETURN_IF_ERROR(Step());
    LOOM_RETURN_IF_ERROR(bind(items[i]));
    Value::Dict loop = {{"index", Value(i + 1)},         {"index0", Value(i)},
                        {"revindex", Value(length - i)}, {"revindex0", Value(length - i - 1)},
                        {"first", Value(i == 0)},        {"last", Value(i == length - 1)},
                        {"length", Value(length)}};
    if (i > 0) loop["previtem"] = items[i - 1];
    if (i + 1 < length) loop["nextitem"] = items[i + 1];
    scopes_.back()["loop"] = Value::MakeDict(std::move(loop));
    LOOM_RETURN_IF_ERROR(RenderNodes(n.body, out));
    if (flow_ == Flow::kBreak) {
      flow_ = Flow::kNormal;
      break;
    }
    flow_ = Flow::kNormal;
  }
  scopes_.pop_back();
  if (length == 0) return RenderNodes(n.else_body, out);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Value>> Renderer::EvalArgs(const Expr& e, size_t first) {
  std::vector<Value> args;
  for (size_t i = first; i < e.args.size(); ++i) {
    LOOM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i]));
    args.push_back(std::move(v));
  }
  return args;
}

absl::StatusOr<Value> Renderer::Eval(const Expr& e) {
  LOOM_RETURN_IF_ERROR(Step());
  struct Depth {
    int& d;
    explicit Depth(int& depth) : d(depth) { ++d; }
    ~Depth() { --d; }
  } depth(depth_);
  if (depth_ > kMaxEvalDepth) {
    return TypeError(absl::StrCat("expression nested deeper than ", kMaxEvalDepth));
  }
  absl::StatusOr<Value> v = EvalNode(e);
  // Names, attributes and literals hand out values that exist already.
  const bool built = e.kind != Expr::Kind::kLiteral && e.kind != Expr::Kind::kName &&
                     e.kind != Expr::Kind::kAttr && e.kind != Expr::Kind::kIndex;
  if (!v.ok() || !built) return v;
  if (v->is_string()) {
    LOOM_RETURN_IF_ERROR(CheckStringSize(v->as_string().size()));
  }
  LOOM_RETURN_IF_ERROR(Charge(BuiltBytes(*v)));
  return v;
}

absl::StatusOr<Value> Renderer::EvalNode(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.value;
    case Expr::Kind::kName:
      return Lookup(e.name);
    case Expr::Kind::kList: {
      LOOM_ASSIGN_OR_RETURN(std::vector<Value> items, EvalArgs(e, 0));
      return Value::MakeList(std::move(items));
    }
    case Expr::Kind::kDict:
      return EvalDict(e);
    case Expr::Kind::kAttr:
    case Expr::Kind::kIndex:
      return EvalItem(e);
    case Expr::Kind::kSlice:
      return EvalSlice(e);
    case Expr::Kind::kCall:
      return EvalCall(e);
    case Expr::Kind::kFilter:
    case Expr::Kind::kTest:
      return EvalFilterOrTest(e);
    case Expr::Kind::kUnary:
      return EvalUnary(e);
    case Expr::Kind::kBinary:
      return EvalBinary(e);
    case Expr::Kind::kTernary: {
      LOOM_ASSIGN_OR_RETURN(const Value cond, Eval(*e.args[0]));
      if (cond.Truthy()) return Eval(*e.args[1]);
      if (e.args[2] == nullptr) return Value();
      return Eval(*e.args[2]);
    }
  }
  return TypeError("unknown expression");
}

absl::StatusOr<Value> Renderer::EvalDict(const Expr& e) {
  LOOM_ASSIGN_OR_RETURN(const std::vector<Value> kv, EvalArgs(e, 0));
  Value::Dict dict;
  for (size_t i = 0; i + 1 < kv.size(); i += 2) {
    if (!kv[i].is_string()) return TypeError("dict keys must be strings");
    dict[kv[i].as_string()] = kv[i + 1];
  }
  return Value::MakeDict(std::move(dict));
}

absl::StatusOr<Value> Renderer::EvalItem(const Expr& e) {
  LOOM_ASSIGN_OR_RETURN(const Value object, Eval(*e.args[0]));
  Value key(e.name);
  if (e.kind == Expr::Kind::kIndex) {
    LOOM_ASSIGN_OR_RETURN(key, Eval(*e.args[1]));
  }
  return GetItem(object, key);
}

absl::StatusOr<Value> Renderer::EvalSlice(const Expr& e) {
  LOOM_ASSIGN_OR_RETURN(const Value object, Eval(*e.args[0]));
  std::optional<int64_t> bounds[3];
  for (int i = 0; i < 3; ++i) {
    if (e.args[i + 1] == nullptr) continue;
    LOOM_ASSIGN_OR_RETURN(const Value v, Eval(*e.args[i + 1]));
    if (v.is_none()) continue;
    if (!v.is_int()) return TypeError("slice bounds must be integers");
    bounds[i] = v.as_int();
  }
  return Slice(object, bounds[0], bounds[1], bounds[2]);
}

absl::StatusOr<Kwargs> Renderer::EvalKwargs(const Expr& e) {
  Kwargs kwargs;
  for (const auto& [k, expr] : e.kwargs) {
    LOOM_ASSIGN_OR_RETURN(Value v, Eval(*expr));
    kwargs.emplace_back(k, std::move(v));
  }
  return kwargs;
}

absl::StatusOr<Value> Renderer::EvalFilterOrTest(const Expr& e) {
  LOOM_ASSIGN_OR_RETURN(const std::vector<Value> args, EvalArgs(e, 0));
  LOOM_ASSIGN_OR_RETURN(const Kwargs kwargs, EvalKwargs(e));
  if (e.kind == Expr::Kind::kFilter) return ApplyFilter(e.name, args, kwargs);
  LOOM_ASSIGN_OR_RETURN(const bool result, ApplyTest(e.name, args));
  return absl::StatusOr<Value>(absl::in_place, result != e.negated);
}

absl::StatusOr<Value> Renderer::EvalUnary(const Expr& e) {
  LOOM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
  if (e.name == "not") return Value(!v.Truthy());
  if (!v.is_number()) return TypeError(absl::StrCat("bad operand for unary ", e.name));
  if (e.name == "+") return v;
  return v.is_int() ? Value(-v.as_int()) : Value(-v.as_number());
}

absl::StatusOr<Value> Renderer::EvalBinary(const Expr& e) {
  absl::StatusOr<Value> left = Eval(*e.args[0]);
  if (!left.ok()) return left.status();
  if (e.name == "and" && !left->Truthy()) return left;
  if (e.name == "or" && left->Truthy()) return left;
  absl::StatusOr<Value> right = Eval(*e.args[1]);
  if (!right.ok()) return right.status();
  if (e.name == "and" || e.name == "or") return right;
  return BinaryOp(e.name, *left, *right);
}

absl::StatusOr<Value> Renderer::EvalCall(const Expr& e) {
  const Expr& callee = *e.args[0];
  LOOM_ASSIGN_OR_RETURN(const std::vector<Value> args, EvalArgs(e, 1));
  LOOM_ASSIGN_OR_RETURN(const Kwargs kwargs, EvalKwargs(e));
  if (callee.kind == Expr::Kind::kAttr) {
    LOOM_ASSIGN_OR_RETURN(const Value object, Eval(*callee.args[0]));
    return CallMethod(object, callee.name, args);
  }
  if (callee.kind == Expr::Kind::kName && Lookup(callee.name).is_undefined()) {
    const auto macro = macros_.find(callee.name);
    if (macro != macros_.end()) return CallMacro(*macro->second, args, kwargs);
    return CallGlobal(callee.name, args, kwargs);
  }
  return absl::UnimplementedError("chat template: calling a value that is not a function");
}

absl::StatusOr<Value> Renderer::CallMacro(const Node& macro, const std::vector<Value>& args,
                                          const Kwargs& kwargs) {
  if (args.size() > macro.params.size()) {
    return TypeError(absl::StrCat("macro ", macro.text, " takes ", macro.params.size(),
                                  " arguments; got ", args.size()));
  }
  Value::Dict bound;
  for (size_t i = 0; i < macro.params.size(); ++i) {
    const auto& [name, default_value] = macro.params[i];
    if (i < args.size()) {
      bound[name] = args[i];
    } else if (default_value != nullptr) {
      LOOM_ASSIGN_OR_RETURN(bound[name], Eval(*default_value));
    } else {
      bound[name] = Value();
    }
  }
  for (const auto& [name, value] : kwargs) {
    if (!bound.contains(name)) {
      return TypeError(absl::StrCat("macro ", macro.text, " has no parameter ", name));
    }
    bound[name] = value;
  }
  // The body sees the caller's scopes under its parameters, and leaves no
  // break or continue behind.
  scopes_.push_back(std::move(bound));
  std::string out;
  const absl::Status rendered = RenderNodes(macro.body, out);
  scopes_.pop_back();
  flow_ = Flow::kNormal;
  LOOM_RETURN_IF_ERROR(rendered);
  return Value(std::move(out));
}

}  // namespace

absl::StatusOr<std::string> Render(const NodeList& nodes, const Value::Dict& globals) {
  Renderer renderer(globals);
  std::string out;
  LOOM_RETURN_IF_ERROR(renderer.RenderNodes(nodes, out));
  return out;
}

}  // namespace loom::jinja
