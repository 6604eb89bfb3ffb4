// The syntax tree a template parses into: expressions and statements as plain data that the
// interpreter walks. Every node keeps its source line for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "jinja/value.h"

namespace dsinfer::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct CallArguments {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

// One filter application, `|name(arguments)`, resolved when the template is parsed.
struct Filter {
  std::string name;
  FilterFunction function = nullptr;
  CallArguments arguments;
};

struct Literal {
  Value value;  // None, a boolean, a number or a string
};
struct Name {
  std::string name;
};
struct GetAttr {
  ExprPtr object;
  std::string name;
};
struct GetItem {
  ExprPtr object;
  ExprPtr key;
};
struct Slice {
  ExprPtr object;
  ExprPtr start, stop, step;  // null when left out
};
struct Call {
  ExprPtr callee;
  CallArguments arguments;
};
struct FilterExpr {
  ExprPtr input;
  Filter filter;
};
struct TestExpr {
  ExprPtr input;
  std::string name;
  TestFunction function = nullptr;
  CallArguments arguments;
};
enum class UnaryOp : uint8_t { kNot, kNegate, kPlus };
struct Unary {
  UnaryOp op;
  ExprPtr operand;
};
enum class BinaryOp : uint8_t {
  kAdd, kSubtract, kMultiply, kDivide, kFloorDivide, kModulo, kPower, kConcat, kAnd, kOr,
};
struct Binary {
  BinaryOp op;
  ExprPtr left, right;
};
enum class CompareOp : uint8_t { kEqual, kNotEqual, kLess, kLessEqual, kGreater, kGreaterEqual, kIn, kNotIn };
// a < b <= c: each operand is evaluated once and the comparisons are and-ed, as in Python.
struct Compare {
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};
struct Conditional {
  ExprPtr condition, if_true;
  ExprPtr if_false;  // null: `a if c` is undefined when c is false
};
struct ListLiteral {
  std::vector<ExprPtr> items;
  bool tuple = false;
};
struct DictLiteral {
  std::vector<std::pair<ExprPtr, ExprPtr>> entries;
};

struct Expr {
  std::variant<Literal, Name, GetAttr, GetItem, Slice, Call, FilterExpr, TestExpr, Unary, Binary, Compare,
               Conditional, ListLiteral, DictLiteral>
      node;
  int line = 0;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// What {% set %}, {% for %} and {% with %} assign to: a name, names that unpack a sequence
// (`k, v`), or an attribute of a namespace (`ns.count`).
struct Target {
  std::vector<std::string> names;
  bool unpack = false;
  std::string attribute;  // set: names[0] is the namespace
};

struct Text {
  std::string text;
};
struct Output {
  ExprPtr value;
};
struct If {
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, then each elif
  Body otherwise;
};
struct For {
  Target target;
  ExprPtr iterable;
  ExprPtr condition;  // `for x in xs if cond`; null when absent
  Body body;
  Body otherwise;  // runs when no item was iterated
};
struct Set {
  Target target;
  ExprPtr value;
};
struct SetBlock {  // {% set x | filter %}...{% endset %}
  Target target;
  std::vector<Filter> filters;
  Body body;
};
struct Parameter {
  std::string name;
  ExprPtr default_value;  // null: required
};
struct Macro {
  std::string name;
  std::vector<Parameter> parameters;
  Body body;
};
struct CallBlock {  // {% call(params) macro(args) %}body{% endcall %}: the body is the macro's caller()
  std::vector<Parameter> caller_parameters;
  ExprPtr call;
  Body body;
};
struct FilterBlock {
  std::vector<Filter> filters;
  Body body;
};
struct With {  // also {% generation %}, which renders its body in a scope of its own
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
};
struct LoopControl {
  bool is_break = false;  // else continue
};

struct Stmt {
  std::variant<Text, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, With, LoopControl> node;
  int line = 0;
};

}  // namespace dsinfer::jinja
