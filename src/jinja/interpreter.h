// Runs a parsed template: scopes, loops, macros and expression evaluation, writing the output.
//
// Scoping follows jinja2: {% if %} shares its enclosing scope; each iteration of a for loop, each
// macro call, {% with %} and captured bodies get a fresh one, so `set` inside a loop does not leak
// out of it (templates use namespace() for that). One Interpreter renders once.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/limits.h"
#include "jinja/value.h"

namespace dsinfer::jinja {

class Scope;
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  // `variables` are the render's top-level names; they shadow the global functions.
  Interpreter(std::vector<std::pair<std::string, Value>> variables, const RenderLimits& limits);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Throws dsinfer::Error naming the template line on any failure.
  std::string render(const Body& body);

  // Renders a macro or call-block body with the arguments bound to its parameters. A macro also
  // gets `varargs`, `kwargs` and, from a call block, `caller`.
  Value call_body(const std::vector<Parameter>& parameters, const Body& body, const std::weak_ptr<Scope>& closure,
                  Arguments arguments, bool is_macro);

  // A namespace, or a list grown in place, may end up containing itself; such containers are
  // emptied when the render ends so that reference cycles do not leak.
  void keep_for_cleanup(const Value& container);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow execute(const Body& body, const ScopePtr& scope);
  Flow execute(const Stmt& stmt, const ScopePtr& scope);
  Flow run(const Text& node, const ScopePtr& scope);
  Flow run(const Output& node, const ScopePtr& scope);
  Flow run(const If& node, const ScopePtr& scope);
  Flow run(const For& node, const ScopePtr& scope);
  Flow run(const Set& node, const ScopePtr& scope);
  Flow run(const SetBlock& node, const ScopePtr& scope);
  Flow run(const Macro& node, const ScopePtr& scope);
  Flow run(const CallBlock& node, const ScopePtr& scope);
  Flow run(const FilterBlock& node, const ScopePtr& scope);
  Flow run(const With& node, const ScopePtr& scope);
  Flow run(const LoopControl& node, const ScopePtr& scope);

  Value evaluate(const Expr& expr, const ScopePtr& scope);
  Value evaluate(const Literal& node, const ScopePtr& scope);
  Value evaluate(const Name& node, const ScopePtr& scope);
  Value evaluate(const GetAttr& node, const ScopePtr& scope);
  Value evaluate(const GetItem& node, const ScopePtr& scope);
  Value evaluate(const Slice& node, const ScopePtr& scope);
  Value evaluate(const Call& node, const ScopePtr& scope);
  Value evaluate(const FilterExpr& node, const ScopePtr& scope);
  Value evaluate(const TestExpr& node, const ScopePtr& scope);
  Value evaluate(const Unary& node, const ScopePtr& scope);
  Value evaluate(const Binary& node, const ScopePtr& scope);
  Value evaluate(const Compare& node, const ScopePtr& scope);
  Value evaluate(const Conditional& node, const ScopePtr& scope);
  Value evaluate(const ListLiteral& node, const ScopePtr& scope);
  Value evaluate(const DictLiteral& node, const ScopePtr& scope);
  Value evaluate_call(const Call& call, const ScopePtr& scope, const Value* caller);
  Arguments evaluate_arguments(const CallArguments& arguments, const ScopePtr& scope);
  Value apply_filters(Value value, const std::vector<Filter>& filters, const ScopePtr& scope);
  void assign(const Target& target, Value value, Scope& scope);
  std::string capture(const Body& body, const ScopePtr& scope);

  void write(std::string_view text);
  void step();
  void spend(const Value& built);  // counts a newly built string or container

  // Counts nesting on the way down; past kMaxEvaluationDepth the render fails instead of
  // overflowing the stack.
  class DepthGuard {
   public:
    explicit DepthGuard(Interpreter& interpreter);
    ~DepthGuard() { --interpreter_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Interpreter& interpreter_;
  };

  ScopePtr globals_;
  RenderLimits limits_;
  std::chrono::steady_clock::time_point deadline_;
  std::string* out_ = nullptr;
  size_t steps_ = 0;
  size_t bytes_ = 0;
  int depth_ = 0;
  std::vector<Value> cleanup_;
  std::unordered_set<const void*> cleanup_seen_;
};

}  // namespace dsinfer::jinja
