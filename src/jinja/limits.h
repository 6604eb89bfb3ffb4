// Limits that keep one render bounded in time, memory and stack, whatever the template does.
//
// Chat templates can arrive with a request (the `chat_template` extension of OpenAI-style servers),
// so a template is untrusted input: an endless loop, exponential string doubling or runaway
// recursion must end in a dsinfer::Error, not a hung or crashed server. The numbers sit far above
// what real templates need (a 1,000-message conversation renders in a few milliseconds and well
// under a million steps).
#pragma once

#include <chrono>
#include <cstddef>

namespace dsinfer::jinja {

// Budgets of one render.
struct RenderLimits {
  // Statements, expression evaluations and loop iterations.
  size_t max_steps = 10'000'000;
  // Bytes of strings and container elements built, counted cumulatively so that a loop rebuilding
  // a large string pays for every copy.
  size_t max_bytes = size_t{1} << 30;
  // Wall-clock time: the backstop for steps that each do work proportional to a large input.
  std::chrono::milliseconds max_time{5000};
};

// The largest single string or list one operation may build (checked before allocating).
inline constexpr size_t kMaxValueBytes = size_t{64} << 20;
// Nesting of statements and brackets in the source; bounds the parser's recursion.
inline constexpr int kMaxNestingDepth = 100;
// Nested evaluation (statements, expressions, macro calls) at render time; bounds the
// interpreter's recursion, recursive macros included.
inline constexpr int kMaxEvaluationDepth = 1000;
// Nesting of values walked by printing, comparison and tojson (namespaces can contain themselves).
inline constexpr int kMaxValueDepth = 256;

}  // namespace dsinfer::jinja
