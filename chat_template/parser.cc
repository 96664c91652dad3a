// Recursive-descent parser for the Jinja subset of chat templates.
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "chat_template/ast.h"
#include "chat_template/lexer.h"

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
    LOOM_RETURN_IF_ERROR(ParseBody(nodes, {}, end_tag));
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
  // Consumes the next token when it is the operator (name) given.
  bool AcceptOp(std::string_view op) { return IsOp(op) && (Next(), true); }
  bool AcceptName(std::string_view name) { return IsName(name) && (Next(), true); }
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
  absl::Status ExpectBlockEnd() { return Expect(Token::Type::kBlockEnd, "", "%}"); }

  // Parses nodes until one of `end_tags` opens a block tag (consumed up to the
  // tag name, which is returned in end_tag) or the template ends.
  absl::Status ParseBody(NodeList& nodes, const std::vector<std::string_view>& end_tags,
                         std::string& end_tag);
  absl::Status ParseStatement(NodeList& nodes, const std::string& keyword);
  // The tags' bodies after the keyword; each leaves end_tag as the tag that
  // closed the block, or empty for a tag without one.
  absl::Status ParseIf(Node& n, std::string& end_tag);
  absl::Status ParseFor(Node& n, std::string& end_tag);
  absl::Status ParseSet(Node& n);
  absl::Status ParseMacro(Node& n, std::string& end_tag);

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
  // node as the first argument of a new expression of kind named by the next
  // token (x.attr, x|filter, x is test).
  absl::StatusOr<ExprPtr> WrapNamed(Expr::Kind kind, ExprPtr node);

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

ExprPtr MakeLiteral(Value value) {
  ExprPtr e = MakeExpr(Expr::Kind::kLiteral);
  e->value = std::move(value);
  return e;
}

ExprPtr MakeBinary(std::string op, ExprPtr left, ExprPtr right) {
  ExprPtr e = MakeExpr(Expr::Kind::kBinary, std::move(op));
  e->args.push_back(std::move(left));
  e->args.push_back(std::move(right));
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
      Node n;
      n.kind = Node::Kind::kOutput;
      LOOM_ASSIGN_OR_RETURN(n.expr, ParseExpression());
      LOOM_RETURN_IF_ERROR(Expect(Token::Type::kVarEnd, "", "}}"));
      nodes.push_back(std::move(n));
    } else if (t.type == Token::Type::kBlockBegin) {
      LOOM_ASSIGN_OR_RETURN(std::string keyword, ExpectName());
      for (std::string_view end : end_tags) {
        if (keyword == end) {
          end_tag = std::move(keyword);
          return absl::OkStatus();
        }
      }
      LOOM_RETURN_IF_ERROR(ParseStatement(nodes, keyword));
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
    LOOM_RETURN_IF_ERROR(ParseIf(n, end_tag));
  } else if (keyword == "for") {
    n.kind = Node::Kind::kFor;
    LOOM_RETURN_IF_ERROR(ParseFor(n, end_tag));
  } else if (keyword == "set") {
    n.kind = Node::Kind::kSet;
    LOOM_RETURN_IF_ERROR(ParseSet(n));
  } else if (keyword == "macro") {
    n.kind = Node::Kind::kMacro;
    LOOM_RETURN_IF_ERROR(ParseMacro(n, end_tag));
  } else if (keyword == "break" || keyword == "continue") {
    n.kind = keyword == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
  } else {
    return absl::UnimplementedError(
        absl::StrCat("chat template: unsupported tag {% ", keyword, " %}"));
  }
  if (n.kind == Node::Kind::kSet || n.kind == Node::Kind::kBreak ||
      n.kind == Node::Kind::kContinue || !end_tag.empty()) {
    LOOM_RETURN_IF_ERROR(ExpectBlockEnd());
  }
  nodes.push_back(std::move(n));
  return absl::OkStatus();
}

absl::Status Parser::ParseIf(Node& n, std::string& end_tag) {
  absl::StatusOr<ExprPtr> cond = ParseExpression();
  while (true) {
    if (!cond.ok()) return cond.status();
    LOOM_RETURN_IF_ERROR(ExpectBlockEnd());
    NodeList body;
    LOOM_RETURN_IF_ERROR(ParseBody(body, {"elif", "else", "endif"}, end_tag));
    n.branches.emplace_back(*std::move(cond), std::move(body));
    if (end_tag == "elif") {
      cond = ParseExpression();
      continue;
    }
    if (end_tag == "else") {
      LOOM_RETURN_IF_ERROR(ExpectBlockEnd());
      NodeList else_body;
      LOOM_RETURN_IF_ERROR(ParseBody(else_body, {"endif"}, end_tag));
      n.branches.emplace_back(nullptr, std::move(else_body));
    }
    return absl::OkStatus();
  }
}

absl::Status Parser::ParseFor(Node& n, std::string& end_tag) {
  do {
    LOOM_ASSIGN_OR_RETURN(std::string target, ExpectName());
    n.targets.push_back(std::move(target));
  } while (AcceptOp(","));
  LOOM_RETURN_IF_ERROR(Expect(Token::Type::kName, "in", "in"));
  // The iterable stops before a trailing "if" filter.
  LOOM_ASSIGN_OR_RETURN(n.expr, ParseOr());
  if (AcceptName("if")) {
    LOOM_ASSIGN_OR_RETURN(n.filter, ParseOr());
  }
  if (IsName("recursive")) return absl::UnimplementedError("chat template: recursive loops");
  LOOM_RETURN_IF_ERROR(ExpectBlockEnd());
  LOOM_RETURN_IF_ERROR(ParseBody(n.body, {"else", "endfor"}, end_tag));
  if (end_tag == "else") {
    LOOM_RETURN_IF_ERROR(ExpectBlockEnd());
    LOOM_RETURN_IF_ERROR(ParseBody(n.else_body, {"endfor"}, end_tag));
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseSet(Node& n) {
  LOOM_ASSIGN_OR_RETURN(std::string target, ExpectName());
  n.targets.push_back(std::move(target));
  if (AcceptOp(".")) {
    LOOM_ASSIGN_OR_RETURN(std::string attr, ExpectName());
    n.targets.push_back(std::move(attr));
  }
  if (!AcceptOp("=")) return absl::UnimplementedError("chat template: block set and tuple set");
  LOOM_ASSIGN_OR_RETURN(n.expr, ParseExpression());
  if (IsOp(",")) return absl::UnimplementedError("chat template: tuple set");
  return absl::OkStatus();
}

// {% macro name(a, b=default) %} body {% endmacro %}
absl::Status Parser::ParseMacro(Node& n, std::string& end_tag) {
  LOOM_ASSIGN_OR_RETURN(n.text, ExpectName());
  LOOM_RETURN_IF_ERROR(Expect(Token::Type::kOp, "(", "("));
  while (!AcceptOp(")")) {
    if (!n.params.empty()) LOOM_RETURN_IF_ERROR(Expect(Token::Type::kOp, ",", ", or )"));
    LOOM_ASSIGN_OR_RETURN(std::string param, ExpectName());
    ExprPtr default_value;
    if (AcceptOp("=")) {
      LOOM_ASSIGN_OR_RETURN(default_value, ParseExpression());
    }
    n.params.emplace_back(std::move(param), std::move(default_value));
  }
  LOOM_RETURN_IF_ERROR(ExpectBlockEnd());
  return ParseBody(n.body, {"endmacro"}, end_tag);
}

absl::StatusOr<ExprPtr> Parser::ParseExpression() {
  DepthGuard guard(depth_);
  if (guard.exceeded()) return SyntaxError(Peek().pos, "expression nested too deep");
  absl::StatusOr<ExprPtr> value = ParseOr();
  if (!value.ok() || !AcceptName("if")) return value;
  ExprPtr e = MakeExpr(Expr::Kind::kTernary);
  LOOM_ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
  e->args.push_back(std::move(cond));
  e->args.push_back(*std::move(value));
  ExprPtr other;
  if (AcceptName("else")) {
    LOOM_ASSIGN_OR_RETURN(other, ParseExpression());
  }
  e->args.push_back(std::move(other));
  return e;
}

absl::StatusOr<ExprPtr> Parser::ParseKeywordChain(std::string_view op,
                                                  absl::StatusOr<ExprPtr> (Parser::*operand)()) {
  absl::StatusOr<ExprPtr> left = (this->*operand)();
  ChainGuard chain(depth_);
  while (left.ok() && IsName(op)) {
    if (!chain.Extend()) return SyntaxError(Peek().pos, "expression nested too deep");
    Next();
    LOOM_ASSIGN_OR_RETURN(ExprPtr right, (this->*operand)());
    left = MakeBinary(std::string(op), *std::move(left), std::move(right));
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
  LOOM_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
  ExprPtr e = MakeExpr(Expr::Kind::kUnary, "not");
  e->args.push_back(std::move(operand));
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
    } else if (AcceptName("in")) {
      op = "in";
    } else if (IsName("not") && IsName("in", 1)) {
      Next();
      Next();
      op = "not in";
    } else {
      break;
    }
    LOOM_ASSIGN_OR_RETURN(ExprPtr right, ParseBinary(0));
    left = MakeBinary(std::move(op), *std::move(left), std::move(right));
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
    LOOM_ASSIGN_OR_RETURN(ExprPtr right, ParseBinary(level + 1));
    left = MakeBinary(std::move(op), *std::move(left), std::move(right));
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseUnary() {
  if (IsOp("-") || IsOp("+")) {
    DepthGuard guard(depth_);
    if (guard.exceeded()) return SyntaxError(Peek().pos, "expression nested too deep");
    ExprPtr e = MakeExpr(Expr::Kind::kUnary, Next().text);
    LOOM_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary());
    e->args.push_back(std::move(operand));
    return e;
  }
  LOOM_ASSIGN_OR_RETURN(ExprPtr primary, ParsePrimary());
  LOOM_ASSIGN_OR_RETURN(ExprPtr postfix, ParsePostfix(std::move(primary)));
  return ParseFilters(std::move(postfix));
}

absl::Status Parser::ParseArgs(Expr& call) {
  // After "(": positional then keyword arguments, up to ")".
  while (!IsOp(")")) {
    if (Peek().type == Token::Type::kName && IsOp("=", 1)) {
      std::string key = Next().text;
      Next();
      LOOM_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      call.kwargs.emplace_back(std::move(key), std::move(value));
    } else {
      LOOM_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      call.args.push_back(std::move(value));
    }
    if (!AcceptOp(",")) break;
  }
  return Expect(Token::Type::kOp, ")", ")");
}

absl::StatusOr<ExprPtr> Parser::WrapNamed(Expr::Kind kind, ExprPtr node) {
  LOOM_ASSIGN_OR_RETURN(std::string name, ExpectName());
  ExprPtr e = MakeExpr(kind, std::move(name));
  e->args.push_back(std::move(node));
  return e;
}

absl::StatusOr<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  ChainGuard chain(depth_);
  while (true) {
    if (!chain.Extend()) return SyntaxError(Peek().pos, "expression nested too deep");
    if (AcceptOp(".")) {
      LOOM_ASSIGN_OR_RETURN(node, WrapNamed(Expr::Kind::kAttr, std::move(node)));
    } else if (AcceptOp("[")) {
      ExprPtr parts[3];
      int num_parts = 1;
      for (int i = 0; i < 3; ++i) {
        if (!IsOp(":") && !IsOp("]")) {
          LOOM_ASSIGN_OR_RETURN(parts[i], ParseExpression());
        }
        if (i == 2 || !AcceptOp(":")) break;
        ++num_parts;
      }
      LOOM_RETURN_IF_ERROR(Expect(Token::Type::kOp, "]", "]"));
      ExprPtr e = MakeExpr(num_parts == 1 ? Expr::Kind::kIndex : Expr::Kind::kSlice);
      if (num_parts == 1 && parts[0] == nullptr) return SyntaxError(Peek().pos, "empty index");
      e->args.push_back(std::move(node));
      for (int i = 0; i < (num_parts == 1 ? 1 : 3); ++i) e->args.push_back(std::move(parts[i]));
      node = std::move(e);
    } else if (AcceptOp("(")) {
      ExprPtr e = MakeExpr(Expr::Kind::kCall);
      e->args.push_back(std::move(node));
      LOOM_RETURN_IF_ERROR(ParseArgs(*e));
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
    if (AcceptOp("|")) {
      LOOM_ASSIGN_OR_RETURN(node, WrapNamed(Expr::Kind::kFilter, std::move(node)));
      if (AcceptOp("(")) LOOM_RETURN_IF_ERROR(ParseArgs(*node));
    } else if (AcceptName("is")) {
      const bool negated = AcceptName("not");
      LOOM_ASSIGN_OR_RETURN(node, WrapNamed(Expr::Kind::kTest, std::move(node)));
      node->negated = negated;
      if (AcceptOp("(")) {
        LOOM_RETURN_IF_ERROR(ParseArgs(*node));
      } else if (Peek().type == Token::Type::kString || Peek().type == Token::Type::kInt ||
                 Peek().type == Token::Type::kFloat) {
        // "x is equalto 3": a test takes one bare argument.
        LOOM_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
        node->args.push_back(std::move(arg));
      }
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
      std::string s = t.text;
      // Adjacent string literals concatenate, as in Python.
      while (Peek().type == Token::Type::kString) s += Next().text;
      return MakeLiteral(Value(std::move(s)));
    }
    case Token::Type::kInt:
      return MakeLiteral(Value(static_cast<int64_t>(std::strtoll(t.text.c_str(), nullptr, 10))));
    case Token::Type::kFloat:
      return MakeLiteral(Value(std::strtod(t.text.c_str(), nullptr)));
    case Token::Type::kName:
      if (t.text == "true" || t.text == "True") return MakeLiteral(Value(true));
      if (t.text == "false" || t.text == "False") return MakeLiteral(Value(false));
      if (t.text == "none" || t.text == "None") return MakeLiteral(Value(Value::None{}));
      return MakeExpr(Expr::Kind::kName, t.text);
    case Token::Type::kOp:
      if (t.text == "(") {
        LOOM_ASSIGN_OR_RETURN(ExprPtr inner, ParseExpression());
        if (IsOp(",")) return absl::UnimplementedError("chat template: tuples");
        LOOM_RETURN_IF_ERROR(Expect(Token::Type::kOp, ")", ")"));
        return inner;
      }
      if (t.text == "[" || t.text == "{") {
        const bool is_list = t.text == "[";
        ExprPtr e = MakeExpr(is_list ? Expr::Kind::kList : Expr::Kind::kDict);
        const std::string close = is_list ? "]" : "}";
        while (!IsOp(close)) {
          LOOM_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
          e->args.push_back(std::move(item));
          if (!is_list) {
            LOOM_RETURN_IF_ERROR(Expect(Token::Type::kOp, ":", ":"));
            LOOM_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
            e->args.push_back(std::move(value));
          }
          if (!AcceptOp(",")) break;
        }
        LOOM_RETURN_IF_ERROR(Expect(Token::Type::kOp, close, close));
        return e;
      }
      break;
    default:
      break;
  }
  return SyntaxError(t.pos, "expected a value");
}

absl::StatusOr<NodeList> Parse(std::string_view source) {
  LOOM_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(source));
  return Parser(std::move(tokens)).ParseTemplate();
}

}  // namespace loom::jinja
