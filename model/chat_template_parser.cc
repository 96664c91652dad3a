// Recursive-descent parser for the Jinja subset of chat templates.
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "model/chat_template_ast.h"
#include "model/chat_template_lexer.h"

namespace loom::jinja {

// Recursive descent over the token stream, following Jinja's precedence:
// ternary < or < and < not < comparison < ~ < + - < * / // % < ** < unary <
// postfix (attribute, index, call) with filters and tests.
class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  absl::StatusOr<NodeList> ParseTemplate() {
    NodeList nodes;
    std::string end_tag;
    if (absl::Status s = ParseBody(nodes, {}, end_tag); !s.ok()) return s;
    if (!end_tag.empty()) return SyntaxError(Peek().pos, absl::StrCat("unexpected ", end_tag));
    return nodes;
  }

 private:
  const Token& Peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& Next() { return tokens_[std::min(pos_++, tokens_.size() - 1)]; }
  bool IsOp(std::string_view op, size_t ahead = 0) const {
    return Peek(ahead).type == Token::Type::kOp && Peek(ahead).text == op;
  }
  bool IsName(std::string_view name, size_t ahead = 0) const {
    return Peek(ahead).type == Token::Type::kName && Peek(ahead).text == name;
  }
  absl::Status Expect(Token::Type type, std::string_view text, std::string_view what) {
    const Token& t = Next();
    if (t.type != type || (!text.empty() && t.text != text)) {
      return SyntaxError(t.pos, absl::StrCat("expected ", std::string(what)));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    const Token& t = Next();
    if (t.type != Token::Type::kName) return SyntaxError(t.pos, "expected a name");
    return t.text;
  }

  // Parses nodes until one of `end_tags` opens a block tag (consumed up to the
  // tag name, which is returned in end_tag) or the template ends.
  absl::Status ParseBody(NodeList& nodes, const std::vector<std::string_view>& end_tags,
                         std::string& end_tag);
  absl::Status ParseStatement(NodeList& nodes, const std::string& keyword);

  absl::StatusOr<ExprPtr> ParseExpression();
  // A left-associative chain `operand (op operand)*` of a keyword operator.
  absl::StatusOr<ExprPtr> ParseKeywordChain(std::string_view op,
                                            absl::StatusOr<ExprPtr> (Parser::*operand)());
  absl::StatusOr<ExprPtr> ParseOr();
  absl::StatusOr<ExprPtr> ParseAnd();
  absl::StatusOr<ExprPtr> ParseNot();
  absl::StatusOr<ExprPtr> ParseCompare();
  absl::StatusOr<ExprPtr> ParseBinary(int level);
  absl::StatusOr<ExprPtr> ParseUnary();
  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseFilters(ExprPtr node);
  absl::StatusOr<ExprPtr> ParsePrimary();
  absl::Status ParseArgs(Expr& call);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

namespace {

ExprPtr MakeExpr(Expr::Kind kind, std::string name = "") {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->name = std::move(name);
  return e;
}

// Bounds recursion on hostile input.
class DepthGuard {
 public:
  explicit DepthGuard(int& depth) : depth_(depth) { ++depth_; }
  ~DepthGuard() { --depth_; }
  bool exceeded() const { return depth_ > kMaxParseDepth; }

 private:
  int& depth_;
};

// Left-associative chains (a + b + c, x.y.z, x|f|g) nest one level per link.
class ChainGuard {
 public:
  explicit ChainGuard(int& depth) : depth_(depth) {}
  ~ChainGuard() { depth_ -= links_; }
  bool Extend() {
    ++links_;
    return ++depth_ <= kMaxParseDepth;
  }

 private:
  int& depth_;
  int links_ = 0;
};

}  // namespace

absl::Status Parser::ParseBody(NodeList& nodes, const std::vector<std::string_view>& end_tags,
                               std::string& end_tag) {
  DepthGuard guard(depth_);
  if (guard.exceeded()) return SyntaxError(Peek().pos, "blocks nested too deep");
  while (Peek().type != Token::Type::kEnd) {
    const Token& t = Next();
    if (t.type == Token::Type::kText) {
      Node n;
      n.kind = Node::Kind::kText;
      n.text = t.text;
      nodes.push_back(std::move(n));
    } else if (t.type == Token::Type::kVarBegin) {
      absl::StatusOr<ExprPtr> e = ParseExpression();
      if (!e.ok()) return e.status();
      if (absl::Status s = Expect(Token::Type::kVarEnd, "", "}}"); !s.ok()) return s;
      Node n;
      n.kind = Node::Kind::kOutput;
      n.expr = *std::move(e);
      nodes.push_back(std::move(n));
    } else if (t.type == Token::Type::kBlockBegin) {
      absl::StatusOr<std::string> keyword = ExpectName();
      if (!keyword.ok()) return keyword.status();
      for (std::string_view end : end_tags) {
        if (*keyword == end) {
          end_tag = *keyword;
          return absl::OkStatus();
        }
      }
      if (absl::Status s = ParseStatement(nodes, *keyword); !s.ok()) return s;
    } else {
      return SyntaxError(t.pos, "unexpected token");
    }
  }
  if (!end_tags.empty()) {
    return SyntaxError(Peek().pos,
                       absl::StrCat("missing {% ", std::string(end_tags.back()), " %}"));
  }
  end_tag.clear();
  return absl::OkStatus();
}

absl::Status Parser::ParseStatement(NodeList& nodes, const std::string& keyword) {
  Node n;
  std::string end_tag;
  if (keyword == "if") {
    n.kind = Node::Kind::kIf;
    absl::StatusOr<ExprPtr> cond = ParseExpression();
    while (true) {
      if (!cond.ok()) return cond.status();
      if (absl::Status s = Expect(Token::Type::kBlockEnd, "", "%}"); !s.ok()) return s;
      NodeList body;
      if (absl::Status s = ParseBody(body, {"elif", "else", "endif"}, end_tag); !s.ok()) return s;
      n.branches.emplace_back(*std::move(cond), std::move(body));
      if (end_tag == "elif") {
        cond = ParseExpression();
        continue;
      }
      if (end_tag == "else") {
        if (absl::Status s = Expect(Token::Type::kBlockEnd, "", "%}"); !s.ok()) return s;
        NodeList else_body;
        if (absl::Status s = ParseBody(else_body, {"endif"}, end_tag); !s.ok()) return s;
        n.branches.emplace_back(nullptr, std::move(else_body));
      }
      break;
    }
  } else if (keyword == "for") {
    n.kind = Node::Kind::kFor;
    do {
      absl::StatusOr<std::string> target = ExpectName();
      if (!target.ok()) return target.status();
      n.targets.push_back(*target);
    } while (IsOp(",") && (Next(), true));
    if (absl::Status s = Expect(Token::Type::kName, "in", "in"); !s.ok()) return s;
    // The iterable stops before a trailing "if" filter.
    absl::StatusOr<ExprPtr> iter = ParseOr();
    if (!iter.ok()) return iter.status();
    n.expr = *std::move(iter);
    if (IsName("if")) {
      Next();
      absl::StatusOr<ExprPtr> filter = ParseOr();
      if (!filter.ok()) return filter.status();
      n.filter = *std::move(filter);
    }
    if (IsName("recursive")) return absl::UnimplementedError("chat template: recursive loops");
    if (absl::Status s = Expect(Token::Type::kBlockEnd, "", "%}"); !s.ok()) return s;
    if (absl::Status s = ParseBody(n.body, {"else", "endfor"}, end_tag); !s.ok()) return s;
    if (end_tag == "else") {
      if (absl::Status s = Expect(Token::Type::kBlockEnd, "", "%}"); !s.ok()) return s;
      if (absl::Status s = ParseBody(n.else_body, {"endfor"}, end_tag); !s.ok()) return s;
    }
  } else if (keyword == "set") {
    n.kind = Node::Kind::kSet;
    absl::StatusOr<std::string> target = ExpectName();
    if (!target.ok()) return target.status();
    n.targets.push_back(*target);
    if (IsOp(".")) {
      Next();
      absl::StatusOr<std::string> attr = ExpectName();
      if (!attr.ok()) return attr.status();
      n.targets.push_back(*attr);
    }
    if (!IsOp("=")) return absl::UnimplementedError("chat template: block set and tuple set");
    Next();
    absl::StatusOr<ExprPtr> value = ParseExpression();
    if (!value.ok()) return value.status();
    n.expr = *std::move(value);
    if (IsOp(",")) return absl::UnimplementedError("chat template: tuple set");
  } else if (keyword == "break" || keyword == "continue") {
    n.kind = keyword == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
  } else {
    return absl::UnimplementedError(
        absl::StrCat("chat template: unsupported tag {% ", keyword, " %}"));
  }
  if (n.kind == Node::Kind::kSet || n.kind == Node::Kind::kBreak ||
      n.kind == Node::Kind::kContinue || !end_tag.empty()) {
    if (absl::Status s = Expect(Token::Type::kBlockEnd, "", "%}"); !s.ok()) return s;
  }
  nodes.push_back(std::move(n));
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> Parser::ParseExpression() {
  DepthGuard guard(depth_);
  if (guard.exceeded()) return SyntaxError(Peek().pos, "expression nested too deep");
  absl::StatusOr<ExprPtr> value = ParseOr();
  if (!value.ok() || !IsName("if")) return value;
  Next();
  absl::StatusOr<ExprPtr> cond = ParseOr();
  if (!cond.ok()) return cond.status();
  ExprPtr e = MakeExpr(Expr::Kind::kTernary);
  e->args.push_back(*std::move(cond));
  e->args.push_back(*std::move(value));
  if (IsName("else")) {
    Next();
    absl::StatusOr<ExprPtr> other = ParseExpression();
    if (!other.ok()) return other.status();
    e->args.push_back(*std::move(other));
  } else {
    e->args.push_back(nullptr);
  }
  return e;
}

absl::StatusOr<ExprPtr> Parser::ParseKeywordChain(std::string_view op,
                                                  absl::StatusOr<ExprPtr> (Parser::*operand)()) {
  absl::StatusOr<ExprPtr> left = (this->*operand)();
  ChainGuard chain(depth_);
  while (left.ok() && IsName(op)) {
    if (!chain.Extend()) return SyntaxError(Peek().pos, "expression nested too deep");
    Next();
    absl::StatusOr<ExprPtr> right = (this->*operand)();
    if (!right.ok()) return right.status();
    ExprPtr e = MakeExpr(Expr::Kind::kBinary, std::string(op));
    e->args.push_back(*std::move(left));
    e->args.push_back(*std::move(right));
    left = std::move(e);
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseOr() { return ParseKeywordChain("or", &Parser::ParseAnd); }

absl::StatusOr<ExprPtr> Parser::ParseAnd() { return ParseKeywordChain("and", &Parser::ParseNot); }

absl::StatusOr<ExprPtr> Parser::ParseNot() {
  if (!IsName("not")) return ParseCompare();
  DepthGuard guard(depth_);
  if (guard.exceeded()) return SyntaxError(Peek().pos, "expression nested too deep");
  Next();
  absl::StatusOr<ExprPtr> operand = ParseNot();
  if (!operand.ok()) return operand.status();
  ExprPtr e = MakeExpr(Expr::Kind::kUnary, "not");
  e->args.push_back(*std::move(operand));
  return e;
}

absl::StatusOr<ExprPtr> Parser::ParseCompare() {
  absl::StatusOr<ExprPtr> left = ParseBinary(0);
  ChainGuard chain(depth_);
  while (left.ok()) {
    if (!chain.Extend()) return SyntaxError(Peek().pos, "expression nested too deep");
    std::string op;
    if (IsOp("==") || IsOp("!=") || IsOp("<") || IsOp(">") || IsOp("<=") || IsOp(">=")) {
      op = Next().text;
    } else if (IsName("in")) {
      Next();
      op = "in";
    } else if (IsName("not") && IsName("in", 1)) {
      Next();
      Next();
      op = "not in";
    } else {
      break;
    }
    absl::StatusOr<ExprPtr> right = ParseBinary(0);
    if (!right.ok()) return right.status();
    ExprPtr e = MakeExpr(Expr::Kind::kBinary, op);
    e->args.push_back(*std::move(left));
    e->args.push_back(*std::move(right));
    left = std::move(e);
  }
  return left;
}

// Levels: 0 "~", 1 "+ -", 2 "* / // %", 3 "**".
absl::StatusOr<ExprPtr> Parser::ParseBinary(int level) {
  static const std::vector<std::vector<std::string_view>> kLevels = {
      {"~"}, {"+", "-"}, {"*", "/", "//", "%"}, {"**"}};
  if (level == static_cast<int>(kLevels.size())) return ParseUnary();
  absl::StatusOr<ExprPtr> left = ParseBinary(level + 1);
  ChainGuard chain(depth_);
  while (left.ok()) {
    if (!chain.Extend()) return SyntaxError(Peek().pos, "expression nested too deep");
    std::string op;
    for (std::string_view candidate : kLevels[level]) {
      if (IsOp(candidate)) op = candidate;
    }
    if (op.empty()) break;
    Next();
    absl::StatusOr<ExprPtr> right = ParseBinary(level + 1);
    if (!right.ok()) return right.status();
    ExprPtr e = MakeExpr(Expr::Kind::kBinary, op);
    e->args.push_back(*std::move(left));
    e->args.push_back(*std::move(right));
    left = std::move(e);
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseUnary() {
  if (IsOp("-") || IsOp("+")) {
    DepthGuard guard(depth_);
    if (guard.exceeded()) return SyntaxError(Peek().pos, "expression nested too deep");
    ExprPtr e = MakeExpr(Expr::Kind::kUnary, Next().text);
    absl::StatusOr<ExprPtr> operand = ParseUnary();
    if (!operand.ok()) return operand.status();
    e->args.push_back(*std::move(operand));
    return e;
  }
  absl::StatusOr<ExprPtr> primary = ParsePrimary();
  if (!primary.ok()) return primary.status();
  absl::StatusOr<ExprPtr> postfix = ParsePostfix(*std::move(primary));
  if (!postfix.ok()) return postfix.status();
  return ParseFilters(*std::move(postfix));
}

absl::Status Parser::ParseArgs(Expr& call) {
  // After "(": positional then keyword arguments, up to ")".
  while (!IsOp(")")) {
    if (Peek().type == Token::Type::kName && IsOp("=", 1)) {
      std::string key = Next().text;
      Next();
      absl::StatusOr<ExprPtr> value = ParseExpression();
      if (!value.ok()) return value.status();
      call.kwargs.emplace_back(std::move(key), *std::move(value));
    } else {
      absl::StatusOr<ExprPtr> value = ParseExpression();
      if (!value.ok()) return value.status();
      call.args.push_back(*std::move(value));
    }
    if (!IsOp(",")) break;
    Next();
  }
  return Expect(Token::Type::kOp, ")", ")");
}

absl::StatusOr<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  ChainGuard chain(depth_);
  while (true) {
    if (!chain.Extend()) return SyntaxError(Peek().pos, "expression nested too deep");
    if (IsOp(".")) {
      Next();
      absl::StatusOr<std::string> attr = ExpectName();
      if (!attr.ok()) return attr.status();
      ExprPtr e = MakeExpr(Expr::Kind::kAttr, *attr);
      e->args.push_back(std::move(node));
      node = std::move(e);
    } else if (IsOp("[")) {
      Next();
      ExprPtr parts[3];
      int num_parts = 1;
      for (int i = 0; i < 3; ++i) {
        if (!IsOp(":") && !IsOp("]")) {
          absl::StatusOr<ExprPtr> part = ParseExpression();
          if (!part.ok()) return part.status();
          parts[i] = *std::move(part);
        }
        if (!IsOp(":") || i == 2) break;
        Next();
        ++num_parts;
      }
      if (absl::Status s = Expect(Token::Type::kOp, "]", "]"); !s.ok()) return s;
      ExprPtr e = MakeExpr(num_parts == 1 ? Expr::Kind::kIndex : Expr::Kind::kSlice);
      if (num_parts == 1 && parts[0] == nullptr) return SyntaxError(Peek().pos, "empty index");
      e->args.push_back(std::move(node));
      for (int i = 0; i < (num_parts == 1 ? 1 : 3); ++i) e->args.push_back(std::move(parts[i]));
      node = std::move(e);
    } else if (IsOp("(")) {
      Next();
      ExprPtr e = MakeExpr(Expr::Kind::kCall);
      e->args.push_back(std::move(node));
      if (absl::Status s = ParseArgs(*e); !s.ok()) return s;
      node = std::move(e);
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> Parser::ParseFilters(ExprPtr node) {
  ChainGuard chain(depth_);
  while (true) {
    if (!chain.Extend()) return SyntaxError(Peek().pos, "expression nested too deep");
    if (IsOp("|")) {
      Next();
      absl::StatusOr<std::string> name = ExpectName();
      if (!name.ok()) return name.status();
      ExprPtr e = MakeExpr(Expr::Kind::kFilter, *name);
      e->args.push_back(std::move(node));
      if (IsOp("(")) {
        Next();
        if (absl::Status s = ParseArgs(*e); !s.ok()) return s;
      }
      node = std::move(e);
    } else if (IsName("is")) {
      Next();
      ExprPtr e = MakeExpr(Expr::Kind::kTest);
      if (IsName("not")) {
        Next();
        e->negated = true;
      }
      absl::StatusOr<std::string> name = ExpectName();
      if (!name.ok()) return name.status();
      e->name = *name;
      e->args.push_back(std::move(node));
      if (IsOp("(")) {
        Next();
        if (absl::Status s = ParseArgs(*e); !s.ok()) return s;
      } else if (Peek().type == Token::Type::kString || Peek().type == Token::Type::kInt ||
                 Peek().type == Token::Type::kFloat) {
        // "x is equalto 3": a test takes one bare argument.
        absl::StatusOr<ExprPtr> arg = ParsePrimary();
        if (!arg.ok()) return arg.status();
        e->args.push_back(*std::move(arg));
      }
      node = std::move(e);
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> Parser::ParsePrimary() {
  DepthGuard guard(depth_);
  if (guard.exceeded()) return SyntaxError(Peek().pos, "expression nested too deep");
  const Token& t = Next();
  switch (t.type) {
    case Token::Type::kString: {
      ExprPtr e = MakeExpr(Expr::Kind::kLiteral);
      std::string s = t.text;
      // Adjacent string literals concatenate, as in Python.
      while (Peek().type == Token::Type::kString) s += Next().text;
      e->value = Value(std::move(s));
      return e;
    }
    case Token::Type::kInt: {
      ExprPtr e = MakeExpr(Expr::Kind::kLiteral);
      e->value = Value(static_cast<int64_t>(std::strtoll(t.text.c_str(), nullptr, 10)));
      return e;
    }
    case Token::Type::kFloat: {
      ExprPtr e = MakeExpr(Expr::Kind::kLiteral);
      e->value = Value(std::strtod(t.text.c_str(), nullptr));
      return e;
    }
    case Token::Type::kName: {
      ExprPtr e = MakeExpr(Expr::Kind::kLiteral);
      if (t.text == "true" || t.text == "True") {
        e->value = Value(true);
      } else if (t.text == "false" || t.text == "False") {
        e->value = Value(false);
      } else if (t.text == "none" || t.text == "None") {
        e->value = Value(Value::None{});
      } else {
        e = MakeExpr(Expr::Kind::kName, t.text);
      }
      return e;
    }
    case Token::Type::kOp:
      if (t.text == "(") {
        absl::StatusOr<ExprPtr> inner = ParseExpression();
        if (!inner.ok()) return inner.status();
        if (IsOp(",")) return absl::UnimplementedError("chat template: tuples");
        if (absl::Status s = Expect(Token::Type::kOp, ")", ")"); !s.ok()) return s;
        return inner;
      }
      if (t.text == "[" || t.text == "{") {
        const bool is_list = t.text == "[";
        ExprPtr e = MakeExpr(is_list ? Expr::Kind::kList : Expr::Kind::kDict);
        const std::string close = is_list ? "]" : "}";
        while (!IsOp(close)) {
          absl::StatusOr<ExprPtr> item = ParseExpression();
          if (!item.ok()) return item.status();
          e->args.push_back(*std::move(item));
          if (!is_list) {
            if (absl::Status s = Expect(Token::Type::kOp, ":", ":"); !s.ok()) return s;
            absl::StatusOr<ExprPtr> value = ParseExpression();
            if (!value.ok()) return value.status();
            e->args.push_back(*std::move(value));
          }
          if (!IsOp(",")) break;
          Next();
        }
        if (absl::Status s = Expect(Token::Type::kOp, close, close); !s.ok()) return s;
        return e;
      }
      break;
    default:
      break;
  }
  return SyntaxError(t.pos, "expected a value");
}

absl::StatusOr<NodeList> Parse(std::string_view source) {
  absl::StatusOr<std::vector<Token>> tokens = Lex(source);
  if (!tokens.ok()) return tokens.status();
  return Parser(*std::move(tokens)).ParseTemplate();
}

}  // namespace loom::jinja
