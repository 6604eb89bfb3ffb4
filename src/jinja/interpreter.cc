// Statements: output, control flow, assignment, macros and the render's resource accounting.
// Expressions are in interpreter_expressions.cc.
#include "jinja/interpreter.h"

#include "jinja/globals.h"
#include "jinja/limits.h"
#include "jinja/scope.h"

namespace dsinfer::jinja {
namespace {

// A macro, callable as a value. It holds its defining scope weakly: the scope usually holds the
// macro, and a strong reference would make a cycle.
class MacroFunction : public Callable {
 public:
  MacroFunction(const Macro& macro, const ScopePtr& closure) : macro_(macro), closure_(closure) {}
  std::string_view name() const override { return macro_.name; }
  Value call(Interpreter& interpreter, Arguments arguments) const override {
    return interpreter.call_body(macro_.parameters, macro_.body, closure_, std::move(arguments), true);
  }

 private:
  const Macro& macro_;
  std::weak_ptr<Scope> closure_;
};

// caller() inside a macro invoked by {% call %}: renders the call block's body.
class CallerFunction : public Callable {
 public:
  CallerFunction(const CallBlock& block, const ScopePtr& scope) : block_(block), scope_(scope) {}
  std::string_view name() const override { return "caller"; }
  Value call(Interpreter& interpreter, Arguments arguments) const override {
    return interpreter.call_body(block_.caller_parameters, block_.body, scope_, std::move(arguments), false);
  }

 private:
  const CallBlock& block_;
  std::weak_ptr<Scope> scope_;
};

}  // namespace

Interpreter::DepthGuard::DepthGuard(Interpreter& interpreter) : interpreter_(interpreter) {
  if (interpreter_.depth_ >= kMaxEvaluationDepth)
    throw RenderError(str_cat("template recursion deeper than ", kMaxEvaluationDepth, " levels"));
  ++interpreter_.depth_;
}

Interpreter::Interpreter(std::vector<std::pair<std::string, Value>> variables, const RenderLimits& limits)
    : globals_(std::make_shared<Scope>(nullptr)),
      limits_(limits),
      deadline_(std::chrono::steady_clock::now() + limits.max_time) {
  for (const auto& [name, function] : global_functions()) globals_->set(name, function);
  for (auto& [name, value] : variables) globals_->set(name, std::move(value));
}

Interpreter::~Interpreter() {
  for (const Value& container : cleanup_) {
    if (container.is_list()) container.as_list().items.clear();
    else if (container.is_dict()) container.as_dict().entries.clear();
  }
}

std::string Interpreter::render(const Body& body) {
  std::string out;
  out_ = &out;
  execute(body, std::make_shared<Scope>(globals_));
  out_ = nullptr;
  return out;
}

void Interpreter::keep_for_cleanup(const Value& container) {
  const void* address = container.is_list() ? static_cast<const void*>(&container.as_list())
                                            : static_cast<const void*>(&container.as_dict());
  if (cleanup_seen_.insert(address).second) cleanup_.push_back(container);
}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps)
    throw RenderError(str_cat("template ran more than ", limits_.max_steps, " steps (an endless loop?)"));
  // Reading the clock costs a fraction of a step; every 16th keeps it out of the profile.
  if (steps_ % 16 == 0 && std::chrono::steady_clock::now() > deadline_)
    throw RenderError(str_cat("template ran longer than ", limits_.max_time.count(), " ms"));
}

void Interpreter::spend(const Value& built) {
  size_t bytes = 0;
  if (built.is_string()) bytes = built.as_string().size();
  else if (built.is_list()) bytes = built.as_list().items.size() * sizeof(Value);
  else if (built.is_dict()) bytes = built.as_dict().entries.size() * 2 * sizeof(Value);
  bytes_ += bytes;
  if (bytes_ > limits_.max_bytes)
    throw RenderError(str_cat("template built more than ", limits_.max_bytes, " bytes of values"));
}

void Interpreter::write(std::string_view text) {
  bytes_ += text.size();
  if (bytes_ > limits_.max_bytes || out_->size() + text.size() > kMaxValueBytes)
    throw RenderError("template output is too large");
  out_->append(text);
}

std::string Interpreter::capture(const Body& body, const ScopePtr& scope) {
  std::string buffer;
  std::string* outer = out_;
  out_ = &buffer;
  try {
    execute(body, scope);
  } catch (...) {
    out_ = outer;
    throw;
  }
  out_ = outer;
  return buffer;
}

Interpreter::Flow Interpreter::execute(const Body& body, const ScopePtr& scope) {
  for (const StmtPtr& stmt : body) {
    Flow flow = execute(*stmt, scope);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::execute(const Stmt& stmt, const ScopePtr& scope) {
  try {
    DepthGuard guard(*this);
    step();
    return std::visit([&](const auto& node) { return run(node, scope); }, stmt.node);
  } catch (const RenderError& error) {
    // The innermost statement names the line; the plain Error passes through enclosing ones.
    throw Error(str_cat("template error at line ", stmt.line, ": ", error.what()));
  }
}

Interpreter::Flow Interpreter::run(const Text& node, const ScopePtr&) {
  write(node.text);
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::run(const Output& node, const ScopePtr& scope) {
  Value value = evaluate(*node.value, scope);
  if (value.is_string()) {
    write(value.as_string());
  } else {
    std::string text;
    append_string(text, value);
    write(text);
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::run(const If& node, const ScopePtr& scope) {
  for (const auto& [condition, body] : node.branches)
    if (truthy(evaluate(*condition, scope))) return execute(body, scope);
  return execute(node.otherwise, scope);
}

Interpreter::Flow Interpreter::run(const For& node, const ScopePtr& scope) {
  std::vector<Value> items = iterate(evaluate(*node.iterable, scope));
  if (node.condition) {  // `for x in xs if cond`: the condition sees the target, not `loop`
    auto filter_scope = std::make_shared<Scope>(scope);
    std::vector<Value> kept;
    for (Value& item : items) {
      step();
      filter_scope->clear();
      assign(node.target, item, *filter_scope);
      if (truthy(evaluate(*node.condition, filter_scope))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return execute(node.otherwise, scope);
  auto loop = std::make_shared<Loop>();
  loop->items = std::move(items);
  Value loop_value(loop);
  auto body_scope = std::make_shared<Scope>(scope);
  for (size_t i = 0; i < loop->items.size(); ++i) {
    step();
    loop->index = i;
    body_scope->clear();  // each iteration starts afresh: assignments do not carry over
    assign(node.target, loop->items[i], *body_scope);
    body_scope->set("loop", loop_value);
    if (execute(node.body, body_scope) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::run(const Set& node, const ScopePtr& scope) {
  assign(node.target, evaluate(*node.value, scope), *scope);
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::run(const SetBlock& node, const ScopePtr& scope) {
  Value text(capture(node.body, std::make_shared<Scope>(scope)));
  assign(node.target, apply_filters(std::move(text), node.filters, scope), *scope);
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::run(const Macro& node, const ScopePtr& scope) {
  scope->set(node.name, Value(std::shared_ptr<const Callable>(std::make_shared<MacroFunction>(node, scope))));
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::run(const CallBlock& node, const ScopePtr& scope) {
  Value caller(std::shared_ptr<const Callable>(std::make_shared<CallerFunction>(node, scope)));
  Value result = evaluate_call(std::get<Call>(node.call->node), scope, &caller);
  write(to_string(result));
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::run(const FilterBlock& node, const ScopePtr& scope) {
  Value text(capture(node.body, std::make_shared<Scope>(scope)));
  write(to_string(apply_filters(std::move(text), node.filters, scope)));
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::run(const With& node, const ScopePtr& scope) {
  auto inner = std::make_shared<Scope>(scope);
  for (const auto& [target, value] : node.assignments) assign(target, evaluate(*value, scope), *inner);
  return execute(node.body, inner);
}

Interpreter::Flow Interpreter::run(const LoopControl& node, const ScopePtr&) {
  return node.is_break ? Flow::kBreak : Flow::kContinue;
}

void Interpreter::assign(const Target& target, Value value, Scope& scope) {
  if (!target.attribute.empty()) {
    const Value* space = scope.find(target.names[0]);
    if (space == nullptr || !space->is_namespace())
      throw RenderError(str_cat("cannot assign attribute on non-namespace object '", target.names[0], "'"));
    space->as_dict().set(Value(target.attribute), std::move(value));
    return;
  }
  if (!target.unpack) {
    scope.set(target.names[0], std::move(value));
    return;
  }
  std::vector<Value> items = iterate(value);
  if (items.size() < target.names.size())
    throw RenderError(str_cat("not enough values to unpack (expected ", target.names.size(), ", got ", items.size(), ")"));
  if (items.size() > target.names.size())
    throw RenderError(str_cat("too many values to unpack (expected ", target.names.size(), ")"));
  for (size_t i = 0; i < items.size(); ++i) scope.set(target.names[i], std::move(items[i]));
}

Value Interpreter::call_body(const std::vector<Parameter>& parameters, const Body& body,
                             const std::weak_ptr<Scope>& closure, Arguments arguments, bool is_macro) {
  DepthGuard guard(*this);
  step();
  ScopePtr parent = closure.lock();
  auto scope = std::make_shared<Scope>(parent ? parent : globals_);
  std::vector<bool> keyword_used(arguments.keyword.size(), false);
  for (size_t i = 0; i < parameters.size(); ++i) {
    const Parameter& parameter = parameters[i];
    if (i < arguments.positional.size()) {
      scope->set(parameter.name, arguments.positional[i]);
      continue;
    }
    bool bound = false;
    for (size_t k = 0; k < arguments.keyword.size() && !bound; ++k) {
      if (arguments.keyword[k].first != parameter.name) continue;
      scope->set(parameter.name, arguments.keyword[k].second);
      keyword_used[k] = bound = true;
    }
    if (bound) continue;
    // Defaults may refer to earlier parameters, so they are evaluated in the macro's scope.
    scope->set(parameter.name, parameter.default_value
                                   ? evaluate(*parameter.default_value, scope)
                                   : Value::undefined(str_cat("parameter '", parameter.name, "' was not provided")));
  }
  if (is_macro) {
    std::vector<Value> extra;
    for (size_t i = parameters.size(); i < arguments.positional.size(); ++i) extra.push_back(arguments.positional[i]);
    scope->set("varargs", Value::tuple(std::move(extra)));
    Value kwargs = Value::dict();
    for (size_t k = 0; k < arguments.keyword.size(); ++k) {
      if (keyword_used[k]) continue;
      if (arguments.keyword[k].first == "caller") scope->set("caller", arguments.keyword[k].second);
      else kwargs.as_dict().set(Value(arguments.keyword[k].first), arguments.keyword[k].second);
    }
    scope->set("kwargs", std::move(kwargs));
  }
  return Value(capture(body, scope));
}

}  // namespace dsinfer::jinja
