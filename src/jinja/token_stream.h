// A cursor over the tokens of one template, with the checks and error messages the statement and
// expression parsers share.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/lexer.h"

namespace dsinfer::jinja {

using Names = std::initializer_list<std::string_view>;

class TokenStream {
 public:
  explicit TokenStream(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  const Token& current() const { return tokens_[pos_]; }
  const Token& peek() const { return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_]; }
  int line() const { return current().line; }
  void advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;  // kEnd stays current
  }

  bool at(TokenKind kind) const { return current().kind == kind; }
  bool at_operator(std::string_view op) const { return at(TokenKind::kOperator) && current().text == op; }
  bool at_name(std::string_view name) const { return at(TokenKind::kName) && current().text == name; }
  bool at_name_in(Names names) const;
  bool skip_operator(std::string_view op);
  bool skip_name(std::string_view name);

  void expect(TokenKind kind);
  void expect_operator(std::string_view op);
  void expect_keyword(std::string_view name);
  std::string expect_name();

  [[noreturn]] void fail(std::string_view message) const { fail_syntax(line(), message); }
  [[noreturn]] void fail_unexpected() const;
  // "end of print statement", "'foo'", ...: how errors name a token.
  static std::string describe(const Token& token);

  // Counts nesting (statements in statements, brackets in brackets) on the way down, so that
  // recursion in the parsers stays bounded.
  class NestingGuard {
   public:
    explicit NestingGuard(TokenStream& tokens);
    ~NestingGuard() { --tokens_.depth_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

   private:
    TokenStream& tokens_;
  };

 private:
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace dsinfer::jinja
