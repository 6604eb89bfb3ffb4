// The variables visible at one point of a render, chained to the enclosing scope.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace dsinfer::jinja {

class Scope;
using ScopePtr = std::shared_ptr<Scope>;

class Scope {
 public:
  explicit Scope(ScopePtr parent) : parent_(std::move(parent)) {}

  // This scope's variable or the nearest enclosing one; nullptr when none is set.
  const Value* find(std::string_view name) const {
    for (const Scope* scope = this; scope != nullptr; scope = scope->parent_.get())
      for (const auto& [key, value] : scope->variables_)
        if (key == name) return &value;
    return nullptr;
  }

  void set(std::string_view name, Value value) {
    for (auto& [key, existing] : variables_) {
      if (key == name) {
        existing = std::move(value);
        return;
      }
    }
    variables_.emplace_back(std::string(name), std::move(value));
  }

  void clear() { variables_.clear(); }

 private:
  ScopePtr parent_;
  std::vector<std::pair<std::string, Value>> variables_;  // few per scope: a linear search wins
};

}  // namespace dsinfer::jinja
