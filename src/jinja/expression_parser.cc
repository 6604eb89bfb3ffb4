#include "jinja/expression_parser.h"

#include <optional>

#include "jinja/filters.h"
#include "jinja/predicates.h"

namespace dsinfer::jinja {
namespace {

template <typename Node>
ExprPtr make_expr(int line, Node node) {
  return std::make_unique<Expr>(Expr{std::move(node), line});
}

}  // namespace

bool ExpressionParser::at_tuple_end(Names end_names) const {
  return tokens_.at(TokenKind::kVariableEnd) || tokens_.at(TokenKind::kBlockEnd) || tokens_.at(TokenKind::kEnd) ||
         tokens_.at_operator(")") || tokens_.at_name_in(end_names);
}

ExprPtr ExpressionParser::parse_tuple(bool allow_condition, Names end_names, bool parenthesized) {
  int start = tokens_.line();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) tokens_.expect_operator(",");
    if (at_tuple_end(end_names)) break;
    items.push_back(parse_expression(allow_condition));
    if (!tokens_.at_operator(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items.front());
    if (!parenthesized) tokens_.fail(str_cat("expected an expression, got ", TokenStream::describe(tokens_.current())));
  }
  return make_expr(start, ListLiteral{std::move(items), true});
}

ExprPtr ExpressionParser::parse_expression(bool allow_condition) {
  if (!allow_condition) return parse_or();
  int start = tokens_.line();
  ExprPtr value = parse_or();
  while (tokens_.skip_name("if")) {
    ExprPtr condition = parse_or();
    ExprPtr otherwise = tokens_.skip_name("else") ? parse_expression(true) : nullptr;
    value = make_expr(start, Conditional{std::move(condition), std::move(value), std::move(otherwise)});
  }
  return value;
}

ExprPtr ExpressionParser::parse_or() {
  ExprPtr left = parse_and();
  while (tokens_.at_name("or")) {
    int start = tokens_.line();
    tokens_.advance();
    left = make_expr(start, Binary{BinaryOp::kOr, std::move(left), parse_and()});
  }
  return left;
}

ExprPtr ExpressionParser::parse_and() {
  ExprPtr left = parse_not();
  while (tokens_.at_name("and")) {
    int start = tokens_.line();
    tokens_.advance();
    left = make_expr(start, Binary{BinaryOp::kAnd, std::move(left), parse_not()});
  }
  return left;
}

ExprPtr ExpressionParser::parse_not() {
  if (!tokens_.at_name("not")) return parse_compare();
  TokenStream::NestingGuard guard(tokens_);
  int start = tokens_.line();
  tokens_.advance();
  return make_expr(start, Unary{UnaryOp::kNot, parse_not()});
}

ExprPtr ExpressionParser::parse_compare() {
  int start = tokens_.line();
  ExprPtr first = parse_additive();
  Compare compare{nullptr, {}};
  while (true) {
    static constexpr std::pair<std::string_view, CompareOp> kOperators[] = {
        {"==", CompareOp::kEqual}, {"!=", CompareOp::kNotEqual},   {"<", CompareOp::kLess},
        {"<=", CompareOp::kLessEqual}, {">", CompareOp::kGreater}, {">=", CompareOp::kGreaterEqual}};
    std::optional<CompareOp> op;
    for (const auto& [spelling, candidate] : kOperators)
      if (tokens_.at_operator(spelling)) op = candidate;
    if (op) {
      tokens_.advance();
    } else if (tokens_.skip_name("in")) {
      op = CompareOp::kIn;
    } else if (tokens_.at_name("not") && tokens_.peek().kind == TokenKind::kName && tokens_.peek().text == "in") {
      tokens_.advance();
      tokens_.advance();
      op = CompareOp::kNotIn;
    } else {
      break;
    }
    compare.rest.emplace_back(*op, parse_additive());
  }
  if (compare.rest.empty()) return first;
  compare.first = std::move(first);
  return make_expr(start, std::move(compare));
}

ExprPtr ExpressionParser::parse_additive() {
  ExprPtr left = parse_concat();
  while (tokens_.at_operator("+") || tokens_.at_operator("-")) {
    int start = tokens_.line();
    BinaryOp op = tokens_.current().text == "+" ? BinaryOp::kAdd : BinaryOp::kSubtract;
    tokens_.advance();
    left = make_expr(start, Binary{op, std::move(left), parse_concat()});
  }
  return left;
}

ExprPtr ExpressionParser::parse_concat() {
  ExprPtr left = parse_multiplicative();
  while (tokens_.at_operator("~")) {
    int start = tokens_.line();
    tokens_.advance();
    left = make_expr(start, Binary{BinaryOp::kConcat, std::move(left), parse_multiplicative()});
  }
  return left;
}

ExprPtr ExpressionParser::parse_multiplicative() {
  ExprPtr left = parse_power();
  while (true) {
    BinaryOp op;
    if (tokens_.at_operator("*")) op = BinaryOp::kMultiply;
    else if (tokens_.at_operator("/")) op = BinaryOp::kDivide;
    else if (tokens_.at_operator("//")) op = BinaryOp::kFloorDivide;
    else if (tokens_.at_operator("%")) op = BinaryOp::kModulo;
    else return left;
    int start = tokens_.line();
    tokens_.advance();
    left = make_expr(start, Binary{op, std::move(left), parse_power()});
  }
}

// Left-associative, unlike Python: jinja2 reads 2 ** 3 ** 2 as (2 ** 3) ** 2.
ExprPtr ExpressionParser::parse_power() {
  ExprPtr left = parse_unary(true);
  while (tokens_.at_operator("**")) {
    int start = tokens_.line();
    tokens_.advance();
    left = make_expr(start, Binary{BinaryOp::kPower, std::move(left), parse_unary(true)});
  }
  return left;
}

// Unary minus binds tighter than filters and **: -x|abs is (-x)|abs, -2 ** 2 is 4.
ExprPtr ExpressionParser::parse_unary(bool with_filters) {
  TokenStream::NestingGuard guard(tokens_);
  int start = tokens_.line();
  ExprPtr node;
  if (tokens_.at_operator("-") || tokens_.at_operator("+")) {
    UnaryOp op = tokens_.current().text == "-" ? UnaryOp::kNegate : UnaryOp::kPlus;
    tokens_.advance();
    node = make_expr(start, Unary{op, parse_unary(false)});
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filters) node = parse_filters_and_tests(std::move(node));
  return node;
}

ExprPtr ExpressionParser::parse_primary() {
  const Token& token = tokens_.current();
  int start = token.line;
  switch (token.kind) {
    case TokenKind::kName: {
      std::string name = token.text;
      tokens_.advance();
      if (name == "true" || name == "True") return make_expr(start, Literal{Value(true)});
      if (name == "false" || name == "False") return make_expr(start, Literal{Value(false)});
      if (name == "none" || name == "None") return make_expr(start, Literal{Value::none()});
      return make_expr(start, Name{std::move(name)});
    }
    case TokenKind::kString: {
      std::string text;
      while (tokens_.current().kind == TokenKind::kString) {  // adjacent literals join, as in Python
        text += tokens_.current().text;
        tokens_.advance();
      }
      return make_expr(start, Literal{Value(std::move(text))});
    }
    case TokenKind::kInteger: {
      Value value(token.integer);
      tokens_.advance();
      return make_expr(start, Literal{std::move(value)});
    }
    case TokenKind::kFloat: {
      Value value(token.real);
      tokens_.advance();
      return make_expr(start, Literal{std::move(value)});
    }
    case TokenKind::kOperator:
      if (tokens_.skip_operator("(")) {
        ExprPtr inner = parse_tuple(true, {}, true);
        tokens_.expect_operator(")");
        return inner;
      }
      if (tokens_.skip_operator("[")) {
        ListLiteral list;
        while (!tokens_.at_operator("]")) {
          if (!list.items.empty()) tokens_.expect_operator(",");
          if (tokens_.at_operator("]")) break;
          list.items.push_back(parse_expression(true));
        }
        tokens_.advance();
        return make_expr(start, std::move(list));
      }
      if (tokens_.skip_operator("{")) {
        DictLiteral dict;
        while (!tokens_.at_operator("}")) {
          if (!dict.entries.empty()) tokens_.expect_operator(",");
          if (tokens_.at_operator("}")) break;
          ExprPtr key = parse_expression(true);
          tokens_.expect_operator(":");
          dict.entries.emplace_back(std::move(key), parse_expression(true));
        }
        tokens_.advance();
        return make_expr(start, std::move(dict));
      }
      break;
    default: break;
  }
  tokens_.fail_unexpected();
}

ExprPtr ExpressionParser::parse_postfix(ExprPtr node) {
  while (true) {
    if (tokens_.at_operator(".") || tokens_.at_operator("[")) node = parse_subscript(std::move(node));
    else if (tokens_.at_operator("(")) node = parse_call(std::move(node));
    else return node;
  }
}

ExprPtr ExpressionParser::parse_filters_and_tests(ExprPtr node) {
  while (true) {
    if (tokens_.at_operator("|")) {
      int start = tokens_.line();
      std::vector<Filter> filters = parse_filters(false);
      for (Filter& filter : filters) node = make_expr(start, FilterExpr{std::move(node), std::move(filter)});
    } else if (tokens_.at_name("is")) {
      node = parse_test(std::move(node));
    } else if (tokens_.at_operator("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::parse_subscript(ExprPtr object) {
  int start = tokens_.line();
  if (tokens_.skip_operator(".")) {
    if (tokens_.current().kind == TokenKind::kName) return make_expr(start, GetAttr{std::move(object), tokens_.expect_name()});
    if (tokens_.current().kind != TokenKind::kInteger) tokens_.fail("expected a name or number after '.'");
    ExprPtr key = make_expr(start, Literal{Value(tokens_.current().integer)});
    tokens_.advance();
    return make_expr(start, GetItem{std::move(object), std::move(key)});
  }
  tokens_.advance();  // '['
  ExprPtr node;
  if (tokens_.at_operator(":")) {
    node = parse_slice(std::move(object), nullptr);
  } else {
    ExprPtr key = parse_expression(true);
    if (tokens_.at_operator(":")) {
      node = parse_slice(std::move(object), std::move(key));
    } else {
      if (tokens_.at_operator(",")) tokens_.fail("tuple subscripts are not supported");
      node = make_expr(start, GetItem{std::move(object), std::move(key)});
    }
  }
  tokens_.expect_operator("]");
  return node;
}

// After `[start`: `:stop`, `:stop:step`, with any part left out.
ExprPtr ExpressionParser::parse_slice(ExprPtr object, ExprPtr start_index) {
  int start = tokens_.line();
  Slice slice{std::move(object), std::move(start_index), nullptr, nullptr};
  tokens_.expect_operator(":");
  if (!tokens_.at_operator("]") && !tokens_.at_operator(":")) slice.stop = parse_expression(true);
  if (tokens_.skip_operator(":") && !tokens_.at_operator("]")) slice.step = parse_expression(true);
  return make_expr(start, std::move(slice));
}

CallArguments ExpressionParser::parse_call_arguments() {
  CallArguments arguments;
  tokens_.expect_operator("(");
  bool first = true;
  while (!tokens_.at_operator(")")) {
    if (!first) {
      tokens_.expect_operator(",");
      if (tokens_.at_operator(")")) break;
    }
    first = false;
    if (tokens_.at_operator("*") || tokens_.at_operator("**")) tokens_.fail("*args and **kwargs in calls are not supported");
    if (tokens_.current().kind == TokenKind::kName && tokens_.peek().kind == TokenKind::kOperator && tokens_.peek().text == "=") {
      std::string name = tokens_.expect_name();
      tokens_.advance();
      arguments.keyword.emplace_back(std::move(name), parse_expression(true));
    } else {
      if (!arguments.keyword.empty()) tokens_.fail("positional argument follows keyword argument");
      arguments.positional.push_back(parse_expression(true));
    }
  }
  tokens_.advance();
  return arguments;
}

ExprPtr ExpressionParser::parse_call(ExprPtr callee) {
  int start = tokens_.line();
  CallArguments arguments = parse_call_arguments();
  return make_expr(start, Call{std::move(callee), std::move(arguments)});
}

std::string ExpressionParser::parse_dotted_name() {
  std::string name = tokens_.expect_name();
  while (tokens_.skip_operator(".")) {
    name += '.';
    name += tokens_.expect_name();
  }
  return name;
}

std::vector<Filter> ExpressionParser::parse_filters(bool inline_first) {
  std::vector<Filter> filters;
  while (inline_first || tokens_.skip_operator("|")) {
    inline_first = false;
    Filter filter;
    filter.name = parse_dotted_name();
    filter.function = find_filter(filter.name);
    if (filter.function == nullptr) tokens_.fail(str_cat("no filter named '", filter.name, "'"));
    if (tokens_.at_operator("(")) filter.arguments = parse_call_arguments();
    filters.push_back(std::move(filter));
  }
  return filters;
}

// `x is [not] name`, with arguments in parentheses or one bare argument (`is divisibleby 3`).
ExprPtr ExpressionParser::parse_test(ExprPtr input) {
  int start = tokens_.line();
  tokens_.advance();  // 'is'
  bool negated = tokens_.skip_name("not");
  TestExpr test{std::move(input), parse_dotted_name(), nullptr, {}};
  test.function = find_test(test.name);
  if (test.function == nullptr) tokens_.fail(str_cat("no test named '", test.name, "'"));
  TokenKind kind = tokens_.current().kind;
  if (tokens_.at_operator("(")) {
    test.arguments = parse_call_arguments();
  } else if ((kind == TokenKind::kName || kind == TokenKind::kString || kind == TokenKind::kInteger ||
              kind == TokenKind::kFloat || tokens_.at_operator("[") || tokens_.at_operator("{")) &&
             !tokens_.at_name("else") && !tokens_.at_name("or") && !tokens_.at_name("and")) {
    if (tokens_.at_name("is")) tokens_.fail("tests cannot be chained with 'is'");
    test.arguments.positional.push_back(parse_postfix(parse_primary()));
  }
  ExprPtr node = make_expr(start, std::move(test));
  if (negated) node = make_expr(start, Unary{UnaryOp::kNot, std::move(node)});
  return node;
}

}  // namespace dsinfer::jinja
