// Splits template source into tokens, applying jinja2's whitespace rules on the way.
//
// The environment is the one transformers renders chat templates with: trim_blocks (the newline
// after a block or comment tag is dropped), lstrip_blocks (spaces and tabs before a block or comment
// tag on its own line are dropped), plus the per-tag controls {%- -%} {{- -}} {#- -#} and {%+ +%}.
// Comments disappear here, and {% raw %} bodies come out as text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dsinfer::jinja {

enum class TokenKind : uint8_t {
  kText,           // template data between tags
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kName,           // identifiers, keywords included
  kString,         // a string literal, escapes decoded
  kInteger,
  kFloat,
  kOperator,       // + - * / // % ** ~ == != < <= > >= = . , : | ( ) [ ] { } ;
  kEnd,
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;  // the data, name, decoded string or operator spelling
  int64_t integer = 0;
  double real = 0;
  int line = 1;
};

// The last token is always kEnd. Throws dsinfer::Error "template syntax error at line N: ...".
std::vector<Token> tokenize(std::string_view source);

// The error every syntax problem throws, from the lexer and the parser alike.
[[noreturn]] void fail_syntax(int line, std::string_view message);

}  // namespace dsinfer::jinja
