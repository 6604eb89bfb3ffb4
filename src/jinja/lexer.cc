#include "jinja/lexer.h"

#include <charconv>

#include "core/error.h"
#include "core/utf8.h"
#include "jinja/python_str.h"

namespace dsinfer::jinja {
namespace {

constexpr size_t kNone = std::string_view::npos;

// jinja2 reads \r\n and \r as \n and drops one trailing newline (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : source_(normalize_newlines(source)) {}

  std::vector<Token> run() {
    while (pos_ < source_.size()) {
      size_t tag = find_tag(pos_);
      if (tag == kNone) {
        push_text(std::string_view(source_).substr(pos_));
        break;
      }
      char kind = source_[tag + 1];
      size_t cursor = tag + 2;
      char sign = cursor < source_.size() && (source_[cursor] == '-' || source_[cursor] == '+') ? source_[cursor] : 0;
      if (sign) ++cursor;
      size_t raw_body = kind == '%' ? match_raw_begin(cursor) : kNone;
      push_text(strip_before_tag(std::string_view(source_).substr(pos_, tag - pos_), sign, kind != '{'));
      advance_to(tag);
      int tag_line = line_;
      if (kind == '#') {
        lex_comment(cursor);
      } else if (raw_body != kNone) {
        line_starting_ = source_[raw_body - 1] == '\n';
        advance_to(raw_body);
        lex_raw(tag_line);
      } else {
        lex_tag(kind, cursor);
      }
    }
    tokens_.push_back(Token{TokenKind::kEnd, "", 0, 0, line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = source_.find('{', from); i != kNone; i = source_.find('{', i + 1)) {
      if (i + 1 < source_.size() && (source_[i + 1] == '{' || source_[i + 1] == '%' || source_[i + 1] == '#'))
        return i;
    }
    return kNone;
  }

  // Whitespace before a tag: all of it goes for a '-' sign; with lstrip_blocks, the spaces between
  // the line start and a block or comment tag go, unless the tag says '+'.
  std::string_view strip_before_tag(std::string_view text, char sign, bool block_or_comment) const {
    if (sign == '-') return strip(text, std::nullopt, false, true);
    if (sign == '+' || !block_or_comment) return text;
    size_t line_start = text.rfind('\n');
    line_start = line_start == kNone ? 0 : line_start + 1;
    if ((line_start > 0 || line_starting_) && is_whitespace(text.substr(line_start)))
      return text.substr(0, line_start);
    return text;
  }

  void push_text(std::string_view text) {
    if (!text.empty()) tokens_.push_back(Token{TokenKind::kText, std::string(text), 0, 0, line_});
  }

  void advance_to(size_t pos) {
    for (size_t i = pos_; i < pos; ++i)
      if (source_[i] == '\n') ++line_;
    pos_ = pos;
  }

  size_t skip_space(size_t pos) const {
    while (pos < source_.size()) {
      uint32_t c;
      size_t length = utf8_decode(std::string_view(source_).substr(pos), &c);
      if (length == 0 || !is_space(c)) break;
      pos += length;
    }
    return pos;
  }

  bool at(size_t pos, std::string_view text) const { return std::string_view(source_).substr(pos, text.size()) == text; }

  // After a closing tag: '-' strips all following whitespace, '+' keeps it, and otherwise
  // trim_blocks drops one newline (block and comment tags only). Returns the position after.
  size_t finish_tag(size_t end, char sign, bool trim_newline) {
    if (sign == '-') end = skip_space(end);
    else if (sign != '+' && trim_newline && end < source_.size() && source_[end] == '\n') ++end;
    line_starting_ = source_[end - 1] == '\n';
    return end;
  }

  // `raw` (in any spacing) then %} or -%}; returns where the raw body starts, or kNone. No
  // trim_blocks here: jinja2 keeps the newline after {% raw %}.
  size_t match_raw_begin(size_t pos) const {
    pos = skip_space(pos);
    if (!at(pos, "raw")) return kNone;
    pos = skip_space(pos + 3);
    if (at(pos, "-%}")) {
      pos = skip_space(pos + 3);
    } else if (at(pos, "%}")) {
      pos += 2;
    } else {
      return kNone;
    }
    return pos;
  }

  void lex_raw(int line) {
    for (size_t tag = source_.find("{%", pos_); tag != kNone; tag = source_.find("{%", tag + 1)) {
      size_t cursor = tag + 2;
      char sign = cursor < source_.size() && (source_[cursor] == '-' || source_[cursor] == '+') ? source_[cursor] : 0;
      if (sign) ++cursor;
      cursor = skip_space(cursor);
      if (!at(cursor, "endraw")) continue;
      cursor = skip_space(cursor + 6);
      char end_sign = 0;
      if (at(cursor, "-%}") || at(cursor, "+%}")) {
        end_sign = source_[cursor];
        cursor += 3;
      } else if (at(cursor, "%}")) {
        cursor += 2;
      } else {
        continue;
      }
      push_text(strip_before_tag(std::string_view(source_).substr(pos_, tag - pos_), sign, true));
      advance_to(finish_tag(cursor, end_sign, true));
      return;
    }
    fail_syntax(line, "missing end of raw directive");
  }

  void lex_comment(size_t cursor) {
    size_t close = source_.find("#}", cursor);
    if (close == kNone) fail_syntax(line_, "missing end of comment tag");
    char sign = close > cursor && (source_[close - 1] == '-' || source_[close - 1] == '+') ? source_[close - 1] : 0;
    advance_to(finish_tag(close + 2, sign, true));
  }

  void lex_tag(char kind, size_t cursor) {
    bool block = kind == '%';
    tokens_.push_back(Token{block ? TokenKind::kBlockBegin : TokenKind::kVariableBegin, "", 0, 0, line_});
    advance_to(cursor);
    std::string brackets;  // closers still expected; the tag cannot end inside brackets
    while (true) {
      advance_to(skip_space(pos_));
      if (pos_ >= source_.size())
        fail_syntax(line_, block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'");
      if (brackets.empty() && lex_tag_end(block)) return;
      char c = source_[pos_];
      if (is_digit(c)) lex_number();
      else if (is_name_start(c)) lex_name();
      else if (c == '\'' || c == '"') lex_string();
      else lex_operator(brackets);
    }
  }

  bool lex_tag_end(bool block) {
    std::string_view close = block ? "%}" : "}}";
    char sign = 0;
    size_t pos = pos_;
    if ((source_[pos] == '-' || (block && source_[pos] == '+')) && at(pos + 1, close)) sign = source_[pos++];
    if (!at(pos, close)) return false;
    tokens_.push_back(Token{block ? TokenKind::kBlockEnd : TokenKind::kVariableEnd, "", 0, 0, line_});
    advance_to(finish_tag(pos + 2, sign, block));
    return true;
  }

  // Digits with optional '_' separators; returns the end.
  size_t scan_digits(size_t pos, bool hex = false) const {
    auto digit = [&](char c) { return hex ? hex_value(c) >= 0 : is_digit(c); };
    while (pos < source_.size() &&
           (digit(source_[pos]) || (source_[pos] == '_' && pos + 1 < source_.size() && digit(source_[pos + 1]))))
      ++pos;
    return pos;
  }

  void lex_number() {
    size_t start = pos_;
    Token token{TokenKind::kInteger, "", 0, 0, line_};
    char prefix = start + 1 < source_.size() && source_[start] == '0' ? static_cast<char>(source_[start + 1] | 0x20) : 0;
    if (prefix == 'x' || prefix == 'o' || prefix == 'b') {
      size_t end = scan_digits(start + 2, true);
      std::string digits;
      for (size_t i = start + 2; i < end; ++i)
        if (source_[i] != '_') digits += source_[i];
      int base = prefix == 'x' ? 16 : prefix == 'o' ? 8 : 2;
      auto [ptr, error] = std::from_chars(digits.data(), digits.data() + digits.size(), token.integer, base);
      if (digits.empty() || error != std::errc() || ptr != digits.data() + digits.size())
        fail_syntax(line_, str_cat("invalid integer literal '", source_.substr(start, end - start), "'"));
      token.text = source_.substr(start, end - start);
      tokens_.push_back(std::move(token));
      advance_to(end);
      return;
    }
    size_t end = scan_digits(start);
    // A float needs a fraction or an exponent, and does not follow a '.' (so that x.0.1 is x[0][1]).
    bool after_dot = start > 0 && source_[start - 1] == '.';
    if (!after_dot && end + 1 < source_.size() && source_[end] == '.' && is_digit(source_[end + 1])) {
      token.kind = TokenKind::kFloat;
      end = scan_digits(end + 1);
    }
    if (!after_dot && end < source_.size() && (source_[end] | 0x20) == 'e') {
      size_t exponent = end + 1;
      if (exponent < source_.size() && (source_[exponent] == '+' || source_[exponent] == '-')) ++exponent;
      if (exponent < source_.size() && is_digit(source_[exponent])) {
        token.kind = TokenKind::kFloat;
        end = scan_digits(exponent);
      }
    }
    for (size_t i = start; i < end; ++i)
      if (source_[i] != '_') token.text += source_[i];
    const char* first = token.text.data();
    const char* last = first + token.text.size();
    auto result = token.kind == TokenKind::kFloat ? std::from_chars(first, last, token.real)
                                                  : std::from_chars(first, last, token.integer);
    if (result.ec != std::errc() || result.ptr != last)
      fail_syntax(line_, str_cat("number literal '", token.text, "' is out of range"));
    tokens_.push_back(std::move(token));
    advance_to(end);
  }

  void lex_name() {
    size_t end = pos_;
    while (end < source_.size() && is_name_char(source_[end])) ++end;
    tokens_.push_back(Token{TokenKind::kName, source_.substr(pos_, end - pos_), 0, 0, line_});
    advance_to(end);
  }

  // Decodes escapes the way Python's unicode-escape codec does, which is what jinja2 uses.
  void lex_string() {
    char quote = source_[pos_];
    int line = line_;
    std::string value;
    size_t i = pos_ + 1;
    while (true) {
      if (i >= source_.size()) fail_syntax(line, "unterminated string literal");
      char c = source_[i];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++i;
        continue;
      }
      if (i + 1 >= source_.size()) fail_syntax(line, "unterminated string literal");
      char escape = source_[i + 1];
      i += 2;
      switch (escape) {
        case '\n': break;  // line continuation
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'n': value += '\n'; break;
        case 'r': value += '\r'; break;
        case 't': value += '\t'; break;
        case 'v': value += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          int digits = escape == 'x' ? 2 : escape == 'u' ? 4 : 8;
          uint32_t code = 0;
          for (int k = 0; k < digits; ++k, ++i) {
            int digit = i < source_.size() ? hex_value(source_[i]) : -1;
            if (digit < 0) fail_syntax(line, str_cat("truncated \\", escape, " escape in string literal"));
            code = code * 16 + static_cast<uint32_t>(digit);
          }
          if (code > 0x10ffff) fail_syntax(line, "illegal Unicode character in string literal");
          utf8_append(value, code);
          break;
        }
        default:
          if (escape >= '0' && escape <= '7') {
            uint32_t code = static_cast<uint32_t>(escape - '0');
            for (int k = 0; k < 2 && i < source_.size() && source_[i] >= '0' && source_[i] <= '7'; ++k, ++i)
              code = code * 8 + static_cast<uint32_t>(source_[i] - '0');
            utf8_append(value, code);
          } else {  // unknown escapes stay as written
            value += '\\';
            value += escape;
          }
      }
    }
    tokens_.push_back(Token{TokenKind::kString, std::move(value), 0, 0, line});
    advance_to(i + 1);
  }

  void lex_operator(std::string& brackets) {
    static constexpr std::string_view kTwoCharacter[] = {"//", "**", "==", "!=", ">=", "<="};
    static constexpr std::string_view kOneCharacter = "+-/*%~[](){}><=.:|,;";
    for (std::string_view op : kTwoCharacter) {
      if (at(pos_, op)) {
        tokens_.push_back(Token{TokenKind::kOperator, std::string(op), 0, 0, line_});
        advance_to(pos_ + 2);
        return;
      }
    }
    char c = source_[pos_];
    if (kOneCharacter.find(c) == std::string_view::npos) fail_syntax(line_, str_cat("unexpected char '", c, "'"));
    if (c == '(') brackets += ')';
    if (c == '[') brackets += ']';
    if (c == '{') brackets += '}';
    if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) fail_syntax(line_, str_cat("unexpected '", c, "'"));
      if (brackets.back() != c) fail_syntax(line_, str_cat("unexpected '", c, "', expected '", brackets.back(), "'"));
      brackets.pop_back();
    }
    tokens_.push_back(Token{TokenKind::kOperator, std::string(1, c), 0, 0, line_});
    advance_to(pos_ + 1);
  }

  std::string source_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;  // the last tag ended a line (or nothing came yet): lstrip_blocks applies
  std::vector<Token> tokens_;
};

}  // namespace

void fail_syntax(int line, std::string_view message) {
  throw Error(str_cat("template syntax error at line ", line, ": ", message));
}

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace dsinfer::jinja
