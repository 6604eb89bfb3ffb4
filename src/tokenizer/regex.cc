#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "core/json.h"
#include "core/utf8.h"
#include "tokenizer/oniguruma.h"

namespace dsinfer::tokenizer {
namespace {

std::string quoted(std::string_view text) {
  std::string out;
  json_escape(out, text);
  return out;
}

// Per-thread match scratch, shared by every Regex: one ovector pair is all find() reads, and a
// JIT stack larger than the 32 KiB default so long inputs cannot exhaust it.
class MatchScratch {
 public:
  MatchScratch()
      : data_(pcre2_match_data_create(1, nullptr)),
        context_(pcre2_match_context_create(nullptr)),
        jit_stack_(pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr)) {
    DSINFER_CHECK(data_ && context_ && jit_stack_, "regex: out of memory for match scratch");
    pcre2_jit_stack_assign(context_, nullptr, jit_stack_);
  }
  ~MatchScratch() {
    pcre2_jit_stack_free(jit_stack_);
    pcre2_match_context_free(context_);
    pcre2_match_data_free(data_);
  }
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;

  pcre2_match_data* data() const { return data_; }
  pcre2_match_context* context() const { return context_; }

 private:
  pcre2_match_data* data_;
  pcre2_match_context* context_;
  pcre2_jit_stack* jit_stack_;
};

MatchScratch& match_scratch() {
  thread_local MatchScratch scratch;
  return scratch;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  int length = pcre2_get_error_message(code, buffer, sizeof(buffer));
  return length < 0 ? str_cat("PCRE2 error ", code) : std::string(reinterpret_cast<char*>(buffer));
}

}  // namespace

void Regex::check_subject(std::string_view subject) const {
  DSINFER_CHECK(utf8_valid(subject), "regex ", quoted(pattern_),
                ": the subject is not valid UTF-8");
}

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view pattern) : pattern_(pattern), code_(std::make_unique<Code>()) {
  pcre2_compile_context* context = pcre2_compile_context_create(nullptr);
  DSINFER_CHECK(context, "regex: out of memory");
  // Oniguruma's Ruby syntax: '^' and '$' match at every line break, and only "\n" is one.
  pcre2_set_newline(context, PCRE2_NEWLINE_LF);
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &error, &offset, context);
  pcre2_compile_context_free(context);
  if (!code_->code) {
    throw Error(
        str_cat("bad regex ", quoted(pattern_), ": ", pcre2_message(error), " at offset ", offset));
  }
  // Without JIT support (some platforms) the interpreter gives the same answers, only slower.
  code_->jit = pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex Regex::from_oniguruma(std::string_view pattern) {
  std::string translated = oniguruma_to_pcre2(pattern);
  try {
    return Regex(translated);
  } catch (const Error& error) {
    if (translated == pattern) throw;
    // The offset counts in the rewritten pattern, so name both.
    throw Error(str_cat(error.what(), " (the PCRE2 form of ", quoted(pattern), ")"));
  }
}

Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;
Regex::~Regex() = default;

// The subject has been checked to be valid UTF-8: PCRE2's JIT path never checks, and its
// interpreter would check the whole subject again on every call.
bool Regex::find_valid(std::string_view subject, size_t start, Match* match) const {
  MatchScratch& scratch = match_scratch();
  auto* text = reinterpret_cast<PCRE2_SPTR>(subject.data());
  uint32_t options = PCRE2_NO_UTF_CHECK;
  int rc = code_->jit ? pcre2_jit_match(code_->code, text, subject.size(), start, options,
                                        scratch.data(), scratch.context())
                      : pcre2_match(code_->code, text, subject.size(), start, options,
                                    scratch.data(), scratch.context());
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  // rc == 0 means the one-pair ovector was too small for the groups; the whole match is set.
  if (rc < 0) {
    throw Error(str_cat("regex ", quoted(pattern_), ": ", pcre2_message(rc)));
  }
  PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.data());
  match->begin = ovector[0];
  match->end = ovector[1];
  return true;
}

bool Regex::find(std::string_view subject, size_t start, Match* match) const {
  check_subject(subject);
  DSINFER_CHECK(start <= subject.size(), "regex: start ", start, " is past the subject's end");
  return find_valid(subject, start, match);
}

void Regex::find_all(std::string_view subject, std::vector<Match>& out) const {
  check_subject(subject);
  find_all_in_valid(subject, out);
}

void Regex::find_all_in_valid(std::string_view subject, std::vector<Match>& out) const {
  size_t search_from = 0;
  bool after_non_empty = false;
  Match match;
  while (search_from <= subject.size() && find_valid(subject, search_from, &match)) {
    if (match.end > match.begin) {
      search_from = match.end;
      after_non_empty = true;
      out.push_back(match);
      continue;
    }
    search_from = match.end + 1;
    while (search_from < subject.size() && (subject[search_from] & 0xc0) == 0x80) ++search_from;
    if (after_non_empty) {
      after_non_empty = false;
      continue;
    }
    out.push_back(match);
  }
}

}  // namespace dsinfer::tokenizer
