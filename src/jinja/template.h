// A jinja2 template, parsed once and rendered any number of times (concurrently too: rendering
// reads the parsed tree and keeps its state per call).
//
// The dialect is the one transformers renders chat templates with: trim_blocks and lstrip_blocks
// on, no autoescaping, loop controls (break/continue), the {% generation %} tag, the globals
// raise_exception, strftime_now, range, dict and namespace, and `tojson` as json.dumps with
// ensure_ascii=False.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/json.h"
#include "jinja/limits.h"

namespace dsinfer::jinja {

struct Program;

class Template {
 public:
  // Throws dsinfer::Error "template syntax error at line N: ..." when the source does not parse.
  explicit Template(std::string_view source);

  // Each member of `variables` (a JSON object) becomes a top-level name; names not given are
  // undefined. Throws dsinfer::Error with the template's line on a rendering error, and the
  // template's own message for raise_exception(message).
  std::string render(const Json& variables, const RenderLimits& limits = {}) const;

 private:
  std::shared_ptr<const Program> program_;
};

}  // namespace dsinfer::jinja
