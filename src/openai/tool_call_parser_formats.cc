// The three published tool-call layouts, token for token.
//
// DeepSeek's tokens are written with U+FF5C FULLWIDTH VERTICAL LINE (EF BD 9C) and U+2581 LOWER
// ONE EIGHTH BLOCK (E2 96 81), never ASCII '|' or '_'; Kimi's use ASCII. Where each was confirmed:
//
// deepseek_v3 (DeepSeek-V3, V3-0324, R1): the chat template of DeepSeek-V3's tokenizer_config.json
// (our copy: tests/fixtures/tokenizers/deepseek-v3/) renders an assistant's calls as
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>
//   \n<｜tool▁call▁begin｜>...<｜tool▁call▁end｜><｜tool▁calls▁end｜>
// ("function" is the call's type; later calls start after a newline). The tokens are added tokens
// of V3's tokenizer.json (ids 7-15 in our fixtures; a test checks it).
//
// deepseek_v31 (DeepSeek-V3.1): the model card's "ToolCall" section and the tool instruction its
// chat template writes into the system prompt:
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
// with calls chained "without separators or spaces". Same tokens as V3; the "function" type and
// the ```json fence are gone.
//
// kimi_k2 (Kimi-K2): Moonshot's docs/tool_call_guidance.md: a section between
// <|tool_calls_section_begin|> and <|tool_calls_section_end|>, each call
// <|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>ARGS<|tool_call_end|>, where
// "functions.NAME:IDX" is the call's id (returned as such, as Kimi's own API does) and NAME the
// function. Their reference parser allows whitespace around the id and the arguments.
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/strings.h"
#include "openai/tool_call_parser.h"

namespace dsinfer::server {
namespace {

constexpr std::string_view kDeepseekSep = "<｜tool▁sep｜>";

// "function<｜tool▁sep｜>NAME": the type before the separator is always "function" in practice,
// and, as in vLLM, not checked.
bool read_deepseek_v3_header(std::string_view header, std::string* name, std::string* /*id*/) {
  size_t sep = header.find(kDeepseekSep);
  if (sep == std::string_view::npos) return false;
  *name = trim(header.substr(sep + kDeepseekSep.size()));
  return !name->empty();
}

bool read_name_header(std::string_view header, std::string* name, std::string* /*id*/) {
  *name = header;
  return !name->empty();
}

// "functions.NAME:IDX". The ":IDX" is required (it makes the id unique within the answer);
// a missing "functions." namespace is tolerated.
bool read_kimi_header(std::string_view header, std::string* name, std::string* id) {
  size_t colon = header.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == header.size()) return false;
  if (header.find_first_not_of("0123456789", colon + 1) != std::string_view::npos) return false;
  std::string_view function = header.substr(0, colon);
  if (function.starts_with("functions.")) function.remove_prefix(std::string_view("functions.").size());
  *name = function;
  *id = header;
  return !name->empty();
}

constexpr ToolCallFormat kFormats[] = {
    {
        .name = "deepseek_v3",
        .section_begin = "<｜tool▁calls▁begin｜>",
        .section_end = "<｜tool▁calls▁end｜>",
        .call_begin = "<｜tool▁call▁begin｜>",
        .header_end = "```json",
        .call_end = "<｜tool▁call▁end｜>",
        .arguments_fence = "```",
        .read_header = read_deepseek_v3_header,
    },
    {
        .name = "deepseek_v31",
        .section_begin = "<｜tool▁calls▁begin｜>",
        .section_end = "<｜tool▁calls▁end｜>",
        .call_begin = "<｜tool▁call▁begin｜>",
        .header_end = kDeepseekSep,
        .call_end = "<｜tool▁call▁end｜>",
        .arguments_fence = "",
        .read_header = read_name_header,
    },
    {
        .name = "kimi_k2",
        .section_begin = "<|tool_calls_section_begin|>",
        .section_end = "<|tool_calls_section_end|>",
        .call_begin = "<|tool_call_begin|>",
        .header_end = "<|tool_call_argument_begin|>",
        .call_end = "<|tool_call_end|>",
        .arguments_fence = "",
        .read_header = read_kimi_header,
    },
};

}  // namespace

std::vector<std::string_view> tool_call_parser_names() {
  std::vector<std::string_view> names;
  for (const ToolCallFormat& format : kFormats) names.push_back(format.name);
  return names;
}

const ToolCallFormat& tool_call_format(std::string_view name) {
  for (const ToolCallFormat& format : kFormats)
    if (format.name == name) return format;
  std::vector<std::string> known;
  for (std::string_view known_name : tool_call_parser_names()) known.emplace_back(known_name);
  throw Error(str_cat("unknown tool-call parser '", name, "' (known: ", join(known, ", "), ")"));
}

}  // namespace dsinfer::server
