// Turns tokens into a syntax tree, following jinja2's grammar and operator precedence.
//
// Filters and tests are resolved here, so an unknown one is a syntax error, as in jinja2. Tags that
// chat templates have no use for (extends, block, include, import, autoescape) are rejected by name.
#pragma once

#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace dsinfer::jinja {

// Throws dsinfer::Error "template syntax error at line N: ...".
Body parse(std::vector<Token> tokens);

}  // namespace dsinfer::jinja
