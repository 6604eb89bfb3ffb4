#include "jinja/template.h"

#include "jinja/interpreter.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"

namespace dsinfer::jinja {

struct Program {
  Body body;
};

Template::Template(std::string_view source)
    : program_(std::make_shared<const Program>(Program{parse(tokenize(source))})) {}

std::string Template::render(const Json& variables, const RenderLimits& limits) const {
  DSINFER_CHECK(variables.is_object(), "template variables must be a JSON object, got ",
                Json::type_name(variables.type()));
  std::vector<std::pair<std::string, Value>> values;
  for (const auto& [name, value] : variables.as_object()) values.emplace_back(name, from_json(value));
  Interpreter interpreter(std::move(values), limits);
  return interpreter.render(program_->body);
}

}  // namespace dsinfer::jinja
