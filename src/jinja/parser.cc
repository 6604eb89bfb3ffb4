// Statements: template data, {{ }} and each {% %} tag with its body. Expressions are parsed by
// expression_parser.cc.
#include "jinja/parser.h"

#include "jinja/expression_parser.h"
#include "jinja/token_stream.h"

namespace dsinfer::jinja {
namespace {

template <typename Node>
StmtPtr make_stmt(int line, Node node) {
  return std::make_unique<Stmt>(Stmt{std::move(node), line});
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)), expressions_(tokens_) {}

  Body parse_template() { return parse_body({}); }

 private:
  // Template data, {{ }} and {% %} until a block tag named in end_tags, which is left current.
  // opened_at: the line of the tag whose body this is, for the error when the end never comes.
  Body parse_body(Names end_tags, int opened_at = 0) {
    Body body;
    while (true) {
      const Token& token = tokens_.current();
      switch (token.kind) {
        case TokenKind::kText:
          body.push_back(make_stmt(token.line, Text{token.text}));
          tokens_.advance();
          break;
        case TokenKind::kVariableBegin: {
          int start = token.line;
          tokens_.advance();
          ExprPtr value = expressions_.parse_tuple(true);
          tokens_.expect(TokenKind::kVariableEnd);
          body.push_back(make_stmt(start, Output{std::move(value)}));
          break;
        }
        case TokenKind::kBlockBegin:
          tokens_.advance();
          if (tokens_.at_name_in(end_tags)) return body;
          body.push_back(parse_statement());
          tokens_.expect(TokenKind::kBlockEnd);
          break;
        case TokenKind::kEnd:
          if (end_tags.size() != 0) {
            std::string expected;
            for (std::string_view tag : end_tags) expected += str_cat(expected.empty() ? "'" : " or '", tag, "'");
            fail_syntax(opened_at, str_cat("unexpected end of template, expected ", expected));
          }
          return body;
        default: tokens_.fail_unexpected();
      }
    }
  }

  // The rest of an opening tag (an optional ':' then %}) and the body after it.
  Body parse_block(Names end_tags) {
    int opened_at = tokens_.line();
    tokens_.skip_operator(":");
    tokens_.expect(TokenKind::kBlockEnd);
    return parse_body(end_tags, opened_at);
  }

  StmtPtr parse_statement() {
    TokenStream::NestingGuard guard(tokens_);
    int start = tokens_.line();
    if (!tokens_.at(TokenKind::kName)) tokens_.fail("expected a statement name");
    std::string tag = tokens_.current().text;
    if (tag == "if") return make_stmt(start, parse_if());
    if (tag == "for") return make_stmt(start, parse_for());
    if (tag == "set") return parse_set(start);
    if (tag == "macro") return make_stmt(start, parse_macro());
    if (tag == "call") return make_stmt(start, parse_call_block());
    if (tag == "filter") {
      tokens_.advance();
      FilterBlock block{expressions_.parse_filters(true), {}};
      block.body = parse_block({"endfilter"});
      tokens_.advance();
      return make_stmt(start, std::move(block));
    }
    if (tag == "with") return make_stmt(start, parse_with());
    if (tag == "generation") {  // transformers' assistant-mask tag; renders its body
      tokens_.advance();
      With block;
      block.body = parse_block({"endgeneration"});
      tokens_.advance();
      return make_stmt(start, std::move(block));
    }
    if (tag == "print") {
      tokens_.advance();
      return make_stmt(start, Output{expressions_.parse_tuple(true)});
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) tokens_.fail(str_cat("'", tag, "' outside loop"));
      tokens_.advance();
      return make_stmt(start, LoopControl{tag == "break"});
    }
    if (tokens_.at_name_in({"extends", "block", "include", "import", "from", "autoescape", "do"}))
      tokens_.fail(str_cat("the '", tag, "' tag is not supported in chat templates"));
    tokens_.fail(str_cat("unknown tag '", tag, "'"));
  }

  If parse_if() {
    tokens_.advance();
    If node;
    while (true) {
      ExprPtr condition = expressions_.parse_tuple(false);
      Body body = parse_block({"elif", "else", "endif"});
      node.branches.emplace_back(std::move(condition), std::move(body));
      if (tokens_.skip_name("elif")) continue;
      if (tokens_.skip_name("else")) {
        node.otherwise = parse_block({"endif"});
        tokens_.advance();
      } else {
        tokens_.expect_keyword("endif");
      }
      return node;
    }
  }

  For parse_for() {
    tokens_.advance();
    For node;
    node.target = parse_target({"in"}, false);
    tokens_.expect_keyword("in");
    node.iterable = expressions_.parse_tuple(false, {"recursive"}, false);
    if (tokens_.skip_name("if")) node.condition = expressions_.parse_expression(true);
    if (tokens_.at_name("recursive")) tokens_.fail("recursive for loops are not supported");
    ++loop_depth_;
    node.body = parse_block({"endfor", "else"});
    --loop_depth_;
    if (tokens_.skip_name("else")) {
      node.otherwise = parse_block({"endfor"});
      tokens_.advance();
    } else {
      tokens_.expect_keyword("endfor");
    }
    return node;
  }

  StmtPtr parse_set(int start) {
    tokens_.advance();
    Target target = parse_target({}, true);
    if (tokens_.skip_operator("=")) return make_stmt(start, Set{std::move(target), expressions_.parse_tuple(true)});
    SetBlock block{std::move(target), tokens_.at_operator("|") ? expressions_.parse_filters(false) : std::vector<Filter>{}, {}};
    block.body = parse_block({"endset"});
    tokens_.advance();
    return make_stmt(start, std::move(block));
  }

  // Names, a tuple of names (optionally in parentheses) or, for set, `namespace.attribute`.
  Target parse_target(Names end_names, bool allow_attribute) {
    Target target;
    bool parenthesized = tokens_.skip_operator("(");
    while (true) {
      target.names.push_back(tokens_.expect_name());
      if (allow_attribute && target.names.size() == 1 && !parenthesized && tokens_.skip_operator(".")) {
        target.attribute = tokens_.expect_name();
        return target;
      }
      if (!tokens_.at_operator(",")) break;
      tokens_.advance();
      target.unpack = true;
      if (!tokens_.at(TokenKind::kName) || tokens_.at_name_in(end_names)) break;
    }
    if (parenthesized) {
      tokens_.expect_operator(")");
      target.unpack = true;
    }
    static constexpr std::string_view kReserved[] = {"true", "false", "none", "True", "False", "None"};
    for (const std::string& name : target.names)
      for (std::string_view reserved : kReserved)
        if (name == reserved) tokens_.fail(str_cat("cannot assign to '", name, "'"));
    return target;
  }

  std::vector<Parameter> parse_parameters() {
    std::vector<Parameter> parameters;
    tokens_.expect_operator("(");
    while (!tokens_.at_operator(")")) {
      if (!parameters.empty()) tokens_.expect_operator(",");
      Parameter parameter{tokens_.expect_name(), nullptr};
      if (tokens_.skip_operator("=")) parameter.default_value = expressions_.parse_expression(true);
      else if (!parameters.empty() && parameters.back().default_value)
        tokens_.fail("non-default argument follows default argument");
      parameters.push_back(std::move(parameter));
    }
    tokens_.advance();
    return parameters;
  }

  Macro parse_macro() {
    tokens_.advance();
    Macro node;
    node.name = tokens_.expect_name();
    node.parameters = parse_parameters();
    int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;  // a macro body cannot break out of a loop around its definition
    node.body = parse_block({"endmacro"});
    loop_depth_ = saved_loop_depth;
    tokens_.advance();
    return node;
  }

  CallBlock parse_call_block() {
    tokens_.advance();
    CallBlock node;
    if (tokens_.at_operator("(")) node.caller_parameters = parse_parameters();
    node.call = expressions_.parse_expression(true);
    if (!std::holds_alternative<Call>(node.call->node)) tokens_.fail("expected a macro call after 'call'");
    int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    node.body = parse_block({"endcall"});
    loop_depth_ = saved_loop_depth;
    tokens_.advance();
    return node;
  }

  With parse_with() {
    tokens_.advance();
    With node;
    while (tokens_.current().kind != TokenKind::kBlockEnd) {
      if (!node.assignments.empty()) tokens_.expect_operator(",");
      Target target{{tokens_.expect_name()}, false, {}};
      tokens_.expect_operator("=");
      node.assignments.emplace_back(std::move(target), expressions_.parse_expression(true));
    }
    node.body = parse_block({"endwith"});
    tokens_.advance();
    return node;
  }

  TokenStream tokens_;
  ExpressionParser expressions_;
  int loop_depth_ = 0;  // enclosing for loops, for break and continue
};

}  // namespace

Body parse(std::vector<Token> tokens) { return Parser(std::move(tokens)).parse_template(); }

}  // namespace dsinfer::jinja
