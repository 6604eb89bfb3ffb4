// Parses expressions with jinja2's grammar and precedence, loosest binding first:
// `a if c else b`, or, and, not, comparisons (chained, `in`, `not in`), + -, ~, * / // %, **,
// unary - +, postfix `.name` `[key]` `[a:b:c]` `(args)`, then filters `|f(args)` and tests
// `is [not] t`, which bind tighter than every binary operator.
#pragma once

#include <vector>

#include "jinja/ast.h"
#include "jinja/token_stream.h"

namespace dsinfer::jinja {

class ExpressionParser {
 public:
  explicit ExpressionParser(TokenStream& tokens) : tokens_(tokens) {}

  ExprPtr parse_expression(bool allow_condition = true);
  // Expressions separated by commas make a tuple: {{ a, b }}, {% set x = 1, 2 %}, (1,). The tuple
  // ends at %}, }}, ')' or a name in end_names (`recursive` after a for loop's iterable).
  ExprPtr parse_tuple(bool allow_condition, Names end_names = {}, bool parenthesized = false);
  // `|a|b(x)`, or `a|b(x)` right after {% filter %} (inline_first). Unknown filters are errors.
  std::vector<Filter> parse_filters(bool inline_first);

 private:
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_additive();
  ExprPtr parse_concat();
  ExprPtr parse_multiplicative();
  ExprPtr parse_power();
  ExprPtr parse_unary(bool with_filters);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filters_and_tests(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr object);
  ExprPtr parse_slice(ExprPtr object, ExprPtr start_index);
  CallArguments parse_call_arguments();
  ExprPtr parse_call(ExprPtr callee);
  ExprPtr parse_test(ExprPtr input);
  std::string parse_dotted_name();
  bool at_tuple_end(Names end_names) const;

  TokenStream& tokens_;
};

}  // namespace dsinfer::jinja
