#include "jinja/token_stream.h"

#include "core/error.h"
#include "jinja/limits.h"

namespace dsinfer::jinja {

bool TokenStream::at_name_in(Names names) const {
  if (!at(TokenKind::kName)) return false;
  for (std::string_view name : names)
    if (current().text == name) return true;
  return false;
}

bool TokenStream::skip_operator(std::string_view op) {
  if (!at_operator(op)) return false;
  advance();
  return true;
}

bool TokenStream::skip_name(std::string_view name) {
  if (!at_name(name)) return false;
  advance();
  return true;
}

void TokenStream::expect(TokenKind kind) {
  if (!at(kind)) fail_unexpected();
  advance();
}

void TokenStream::expect_operator(std::string_view op) {
  if (!skip_operator(op)) fail(str_cat("expected '", op, "', got ", describe(current())));
}

void TokenStream::expect_keyword(std::string_view name) {
  if (!skip_name(name)) fail(str_cat("expected '", name, "', got ", describe(current())));
}

std::string TokenStream::expect_name() {
  if (!at(TokenKind::kName)) fail(str_cat("expected a name, got ", describe(current())));
  std::string name = current().text;
  advance();
  return name;
}

void TokenStream::fail_unexpected() const { fail(str_cat("unexpected ", describe(current()))); }

std::string TokenStream::describe(const Token& token) {
  switch (token.kind) {
    case TokenKind::kEnd: return "end of template";
    case TokenKind::kBlockEnd: return "end of statement block";
    case TokenKind::kVariableEnd: return "end of print statement";
    case TokenKind::kBlockBegin: return "begin of statement block";
    case TokenKind::kVariableBegin: return "begin of print statement";
    case TokenKind::kText: return "template data";
    default: return str_cat("'", token.text, "'");
  }
}

TokenStream::NestingGuard::NestingGuard(TokenStream& tokens) : tokens_(tokens) {
  if (tokens_.depth_ >= kMaxNestingDepth) tokens_.fail(str_cat("nesting deeper than ", kMaxNestingDepth, " levels"));
  ++tokens_.depth_;
}

}  // namespace dsinfer::jinja
