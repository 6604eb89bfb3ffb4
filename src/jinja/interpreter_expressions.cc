// Expressions: names, attribute and item access, calls, filters, tests and operators.
// Statements are in interpreter.cc.
#include "jinja/access.h"
#include "jinja/interpreter.h"
#include "jinja/limits.h"
#include "jinja/methods.h"
#include "jinja/operators.h"
#include "jinja/scope.h"

namespace dsinfer::jinja {

Value Interpreter::evaluate(const Expr& expr, const ScopePtr& scope) {
  DepthGuard guard(*this);
  step();
  return std::visit([&](const auto& node) { return evaluate(node, scope); }, expr.node);
}

Value Interpreter::evaluate(const Literal& node, const ScopePtr&) { return node.value; }

Value Interpreter::evaluate(const Name& node, const ScopePtr& scope) {
  if (const Value* value = scope->find(node.name)) return *value;
  return Value::undefined(str_cat("'", node.name, "' is undefined"));
}

Value Interpreter::evaluate(const GetAttr& node, const ScopePtr& scope) {
  return get_attribute(evaluate(*node.object, scope), node.name);
}

Value Interpreter::evaluate(const GetItem& node, const ScopePtr& scope) {
  Value object = evaluate(*node.object, scope);
  return get_item(object, evaluate(*node.key, scope));
}

Value Interpreter::evaluate(const Slice& node, const ScopePtr& scope) {
  Value object = evaluate(*node.object, scope);
  auto bound = [&](const ExprPtr& expr) { return expr ? evaluate(*expr, scope) : Value::none(); };
  Value start = bound(node.start), stop = bound(node.stop), step_size = bound(node.step);
  Value result = get_slice(object, start, stop, step_size);
  spend(result);
  return result;
}

Value Interpreter::evaluate(const Call& node, const ScopePtr& scope) {
  Value result = evaluate_call(node, scope, nullptr);
  spend(result);
  return result;
}

Value Interpreter::evaluate(const FilterExpr& node, const ScopePtr& scope) {
  Value input = evaluate(*node.input, scope);
  Value result = node.filter.function(input, evaluate_arguments(node.filter.arguments, scope));
  spend(result);
  return result;
}

Value Interpreter::evaluate(const TestExpr& node, const ScopePtr& scope) {
  Value input = evaluate(*node.input, scope);
  return Value(node.function(input, evaluate_arguments(node.arguments, scope)));
}

Value Interpreter::evaluate(const Unary& node, const ScopePtr& scope) {
  Value operand = evaluate(*node.operand, scope);
  switch (node.op) {
    case UnaryOp::kNot: return Value(!truthy(operand));
    case UnaryOp::kNegate: return negate(operand);
    case UnaryOp::kPlus: return positive(operand);
  }
  return operand;
}

Value Interpreter::evaluate(const Binary& node, const ScopePtr& scope) {
  Value left = evaluate(*node.left, scope);
  // `and` and `or` short-circuit and yield an operand, as in Python.
  if (node.op == BinaryOp::kAnd) return truthy(left) ? evaluate(*node.right, scope) : left;
  if (node.op == BinaryOp::kOr) return truthy(left) ? left : evaluate(*node.right, scope);
  Value right = evaluate(*node.right, scope);
  Value result;
  if (node.op == BinaryOp::kConcat) {  // `~` joins the str() of both sides; undefined is blank
    std::string text = to_string(left);
    append_string(text, right);
    if (text.size() > kMaxValueBytes) throw RenderError("concatenated string would be too large");
    result = Value(std::move(text));
  } else {
    result = arithmetic(node.op, left, right);
  }
  spend(result);
  return result;
}

Value Interpreter::evaluate(const Compare& node, const ScopePtr& scope) {
  Value left = evaluate(*node.first, scope);
  for (const auto& [op, operand] : node.rest) {
    Value right = evaluate(*operand, scope);
    if (!compare(op, left, right)) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Interpreter::evaluate(const Conditional& node, const ScopePtr& scope) {
  if (truthy(evaluate(*node.condition, scope))) return evaluate(*node.if_true, scope);
  if (node.if_false) return evaluate(*node.if_false, scope);
  return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
}

Value Interpreter::evaluate(const ListLiteral& node, const ScopePtr& scope) {
  std::vector<Value> items;
  items.reserve(node.items.size());
  for (const ExprPtr& item : node.items) items.push_back(evaluate(*item, scope));
  Value result = node.tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  spend(result);
  return result;
}

Value Interpreter::evaluate(const DictLiteral& node, const ScopePtr& scope) {
  Value result = Value::dict();
  for (const auto& [key_expr, value_expr] : node.entries) {
    Value key = evaluate(*key_expr, scope);
    if ((key.is_list() && !key.is_tuple()) || key.is_dict() || key.is_undefined())
      throw RenderError(str_cat("unhashable type: '", type_name(key), "'"));
    result.as_dict().set(std::move(key), evaluate(*value_expr, scope));
  }
  spend(result);
  return result;
}

Arguments Interpreter::evaluate_arguments(const CallArguments& arguments, const ScopePtr& scope) {
  Arguments values;
  values.positional.reserve(arguments.positional.size());
  for (const ExprPtr& argument : arguments.positional) values.positional.push_back(evaluate(*argument, scope));
  for (const auto& [name, argument] : arguments.keyword) values.keyword.emplace_back(name, evaluate(*argument, scope));
  return values;
}

Value Interpreter::evaluate_call(const Call& call, const ScopePtr& scope, const Value* caller) {
  Value callee;
  Arguments arguments;
  if (const auto* attribute = std::get_if<GetAttr>(&call.callee->node)) {
    // obj.method(...) calls the method directly instead of materialising a bound method.
    Value object = evaluate(*attribute->object, scope);
    if (object.is_undefined()) fail_undefined(object);
    arguments = evaluate_arguments(call.arguments, scope);
    if (caller == nullptr)
      if (std::optional<Value> result = call_method(*this, object, attribute->name, arguments)) return *result;
    callee = get_attribute(object, attribute->name);
  } else {
    callee = evaluate(*call.callee, scope);
    arguments = evaluate_arguments(call.arguments, scope);
  }
  if (caller != nullptr) arguments.keyword.emplace_back("caller", *caller);
  if (callee.is_callable()) return callee.as_callable().call(*this, std::move(arguments));
  if (callee.is_undefined()) fail_undefined(callee);
  throw RenderError(str_cat("'", type_name(callee), "' object is not callable"));
}

Value Interpreter::apply_filters(Value value, const std::vector<Filter>& filters, const ScopePtr& scope) {
  for (const Filter& filter : filters) {
    value = filter.function(value, evaluate_arguments(filter.arguments, scope));
    spend(value);
  }
  return value;
}

}  // namespace dsinfer::jinja
