#include "openai/openai_structured.h"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <utility>

#include "core/error.h"
#include "openai/openai_errors.h"
#include "openai/tool_call_parser.h"

namespace dsinfer::server {
namespace {

using structured::GrammarKind;
using structured::GrammarSpec;

constexpr double kMaxLogitBias = 100.0;  // OpenAI's range, [-100, 100]

// GrammarSpec built as plain data: this library does not link the structured one (its factories
// live there, next to xgrammar).
GrammarSpec spec_of(GrammarKind kind, std::string text, bool strict = true) {
  return GrammarSpec{kind, std::move(text), {}, strict};
}

// The constraints found so far, one allowed.
class Found {
 public:
  void add(GrammarSpec spec, std::string field) {
    if (found_)
      throw invalid_request(str_cat("only one structured-output constraint may be given per request, got ",
                                    found_->field, " and ", field),
                            field);
    found_ = StructuredOutputRequest{std::move(spec), std::move(field)};
  }
  std::optional<StructuredOutputRequest> take() { return std::move(found_); }

 private:
  std::optional<StructuredOutputRequest> found_;
};

// A JSON schema given as an object, or as a string of JSON text (vLLM's guided_json and SGLang's
// json_schema take both). The text is compiled as is: a string that is not JSON fails there.
std::string schema_text(const RequestFields& fields, std::string_view key) {
  const Json* schema = fields.get(key);
  if (schema->is_string()) return schema->as_string();
  if (!schema->is_object() && !schema->is_bool())
    fields.fail(key, str_cat("must be a JSON schema (an object, or a string of JSON), got ",
                             Json::type_name(schema->type())));
  return schema->dump();
}

std::string required_string(const RequestFields& fields, std::string_view key) {
  std::optional<std::string> text = fields.string(key);
  if (!text) fields.fail(key, "is required");
  if (text->empty()) fields.fail(key, "must not be empty");
  return *text;
}

std::vector<std::string> choice_list(const RequestFields& fields, std::string_view key) {
  const Json::Array* items = fields.array(key);
  std::vector<std::string> choices;
  for (const Json& item : *items) {
    if (!item.is_string()) fields.fail(key, str_cat("must be a list of strings, got ", item.dump()));
    choices.push_back(item.as_string());
  }
  if (choices.empty()) fields.fail(key, "must hold at least one string");
  return choices;
}

void parse_response_format(const RequestFields& body, Found& found) {
  const Json* format = body.object("response_format");
  if (format == nullptr) return;
  RequestFields fields(*format, "response_format");
  std::optional<std::string> type = fields.string("type");
  if (!type) fields.fail("type", "is required");
  if (*type == "text") return;
  if (*type == "json_object") return found.add(spec_of(GrammarKind::kJsonObject, ""), "response_format");
  if (*type == "json_schema") {
    if (fields.object("json_schema") == nullptr) fields.fail("json_schema", "is required with type 'json_schema'");
    RequestFields schema(*fields.get("json_schema"), "response_format.json_schema");
    (void)schema.string("name");  // OpenAI's label for the schema: type-checked, not needed
    if (schema.get("schema") == nullptr) schema.fail("schema", "is required");
    bool strict = schema.boolean("strict").value_or(true);
    return found.add(spec_of(GrammarKind::kJsonSchema, schema_text(schema, "schema"), strict), "response_format");
  }
  if (*type == "structural_tag") {
    // vLLM's form (structures + triggers) or xgrammar's (format): structural_tag.h reads both.
    return found.add(spec_of(GrammarKind::kStructuralTag, format->dump()), "response_format");
  }
  fields.fail("type", str_cat("must be 'text', 'json_object', 'json_schema' or 'structural_tag', got '", *type, "'"));
}

// vLLM's structured_outputs object (its guided_decoding before v0.10).
void parse_vllm_structured_outputs(const RequestFields& body, Found& found) {
  const Json* object = body.object("structured_outputs");
  if (object == nullptr) return;
  RequestFields fields(*object, "structured_outputs");
  if (fields.get("whitespace_pattern") != nullptr)
    fields.fail("whitespace_pattern", "is not supported (JSON whitespace is xgrammar's, at most 16 in a row)");
  if (fields.boolean("disable_any_whitespace").value_or(false))
    fields.fail("disable_any_whitespace", "is not supported: this server's JSON grammars allow whitespace");
  if (fields.get("json") != nullptr)
    found.add(spec_of(GrammarKind::kJsonSchema, schema_text(fields, "json")), "structured_outputs.json");
  if (fields.get("regex") != nullptr)
    found.add(spec_of(GrammarKind::kRegex, required_string(fields, "regex")), "structured_outputs.regex");
  if (fields.get("choice") != nullptr) {
    GrammarSpec spec = spec_of(GrammarKind::kChoice, "");
    spec.choices = choice_list(fields, "choice");
    found.add(std::move(spec), "structured_outputs.choice");
  }
  if (fields.get("grammar") != nullptr)
    found.add(spec_of(GrammarKind::kEbnf, required_string(fields, "grammar")), "structured_outputs.grammar");
  if (fields.boolean("json_object").value_or(false))
    found.add(spec_of(GrammarKind::kJsonObject, ""), "structured_outputs.json_object");
  if (fields.get("structural_tag") != nullptr)
    found.add(spec_of(GrammarKind::kStructuralTag, required_string(fields, "structural_tag")),
              "structured_outputs.structural_tag");
}

// vLLM's older top-level guided_* fields.
void parse_vllm_guided(const RequestFields& body, Found& found) {
  if (std::optional<std::string> backend = body.string("guided_decoding_backend")) {
    if (*backend != "xgrammar" && *backend != "auto")
      body.fail("guided_decoding_backend", str_cat("must be 'xgrammar' or 'auto' (the only backend here), got '",
                                                   *backend, "'"));
  }
  if (body.get("guided_whitespace_pattern") != nullptr)
    body.fail("guided_whitespace_pattern", "is not supported (JSON whitespace is xgrammar's, at most 16 in a row)");
  if (body.get("guided_json") != nullptr)
    found.add(spec_of(GrammarKind::kJsonSchema, schema_text(body, "guided_json")), "guided_json");
  if (body.get("guided_regex") != nullptr)
    found.add(spec_of(GrammarKind::kRegex, required_string(body, "guided_regex")), "guided_regex");
  if (body.get("guided_choice") != nullptr) {
    GrammarSpec spec = spec_of(GrammarKind::kChoice, "");
    spec.choices = choice_list(body, "guided_choice");
    found.add(std::move(spec), "guided_choice");
  }
  if (body.get("guided_grammar") != nullptr)
    found.add(spec_of(GrammarKind::kEbnf, required_string(body, "guided_grammar")), "guided_grammar");
}

// SGLang's top-level fields.
void parse_sglang(const RequestFields& body, Found& found) {
  if (body.get("regex") != nullptr) found.add(spec_of(GrammarKind::kRegex, required_string(body, "regex")), "regex");
  if (body.get("ebnf") != nullptr) found.add(spec_of(GrammarKind::kEbnf, required_string(body, "ebnf")), "ebnf");
  if (body.get("json_schema") != nullptr)
    found.add(spec_of(GrammarKind::kJsonSchema, schema_text(body, "json_schema")), "json_schema");
}

// One call of `name` in a parser's format: the tag's begin (through the header) and end, around
// the arguments. Kimi's call ids count calls (":0", ":1"), which fixed tags cannot: one call there.
Json call_tag(const ToolCallFormat& format, const std::string& name, const Json& parameters) {
  std::string begin(format.call_begin), end;
  if (format.name == "deepseek_v3") {
    begin += str_cat("function<｜tool▁sep｜>", name, "\n", format.header_end, "\n");
    end = str_cat("\n", format.arguments_fence, format.call_end);
  } else if (format.name == "deepseek_v31") {
    begin += str_cat(name, format.header_end);
    end = std::string(format.call_end);
  } else {
    DSINFER_CHECK(format.name == "kimi_k2", "forced tool calls: no layout for parser ", format.name);
    begin += str_cat("functions.", name, ":0", format.header_end);
    end = std::string(format.call_end);
  }
  Json content = Json::object();
  content["type"] = "json_schema";
  content["json_schema"] = parameters;
  Json tag = Json::object();
  tag["type"] = "tag";
  tag["begin"] = begin;
  tag["content"] = std::move(content);
  tag["end"] = end;
  return tag;
}

Json const_string(std::string_view value) {
  Json element = Json::object();
  element["type"] = "const_string";
  element["value"] = std::string(value);
  return element;
}

// xgrammar's structural tag for the forced calls: the section's markers around one or more calls
// (one for a named function, for Kimi, and with parallel_tool_calls false) of the offered functions.
GrammarSpec forced_tool_call(const Json& tools, const std::string& function, const std::string& parser,
                             bool one_call) {
  const ToolCallFormat& format = tool_call_format(parser);
  Json tags = Json::array();
  for (const Json& tool : tools.as_array()) {
    const Json& definition = *tool.find("function");
    const std::string& name = definition.find("name")->as_string();
    if (!function.empty() && name != function) continue;
    const Json* parameters = definition.find("parameters");
    // No parameters: the function takes none, an empty object (OpenAI's reading).
    tags.as_array().push_back(call_tag(format, name, parameters && !parameters->is_null()
                                                         ? *parameters
                                                         : Json::parse(R"({"type": "object", "properties": {}})")));
  }
  Json calls = Json::object();
  calls["type"] = "tags_with_separator";
  calls["tags"] = std::move(tags);
  calls["separator"] = format.name == "deepseek_v3" ? "\n" : "";  // V3's template puts later calls on a new line
  calls["at_least_one"] = true;
  calls["stop_after_first"] = one_call || !function.empty() || format.name == "kimi_k2";
  Json sequence = Json::object();
  sequence["type"] = "sequence";
  sequence["elements"] = Json::array();
  sequence["elements"].as_array().push_back(const_string(format.section_begin));
  sequence["elements"].as_array().push_back(std::move(calls));
  sequence["elements"].as_array().push_back(const_string(format.section_end));
  Json tag = Json::object();
  tag["type"] = "structural_tag";
  tag["format"] = std::move(sequence);
  return spec_of(GrammarKind::kStructuralTag, tag.dump());
}

}  // namespace

std::optional<StructuredOutputRequest> chat_constraint(std::optional<StructuredOutputRequest> requested,
                                                       const Json& tools, ToolChoice choice,
                                                       const std::string& function, const std::string& parser,
                                                       bool parallel) {
  if (choice != ToolChoice::kRequired && choice != ToolChoice::kNamed) return requested;
  if (requested)
    throw invalid_request(str_cat("a forced tool call (tool_choice) cannot be combined with ", requested->field,
                                  ": the answer is the call"),
                          requested->field);
  return StructuredOutputRequest{
      forced_tool_call(tools, choice == ToolChoice::kNamed ? function : "", parser, !parallel), "tool_choice"};
}

std::optional<StructuredOutputRequest> parse_structured_output(const RequestFields& body) {
  Found found;
  parse_response_format(body, found);
  parse_vllm_structured_outputs(body, found);
  parse_vllm_guided(body, found);
  parse_sglang(body, found);
  return found.take();
}

std::vector<runtime::LogitBias> parse_logit_bias(const RequestFields& body) {
  std::vector<runtime::LogitBias> entries;
  const Json* bias = body.object("logit_bias");
  if (bias == nullptr) return entries;
  for (const auto& [key, value] : bias->as_object()) {
    // A token id in decimal: digits only, within int32.
    char* end = nullptr;
    errno = 0;
    const long long id = key.empty() || key[0] < '0' || key[0] > '9' ? -1 : std::strtoll(key.c_str(), &end, 10);
    if (id < 0 || errno == ERANGE || end == nullptr || *end != '\0' || id > std::numeric_limits<int32_t>::max())
      body.fail("logit_bias", str_cat("keys must be token ids (decimal integers from 0), got \"", key, "\""));
    if (!value.is_number())
      body.fail("logit_bias", str_cat("values must be numbers, got ", value.dump(), " for token ", key));
    const double amount = value.as_double();
    if (!(amount >= -kMaxLogitBias && amount <= kMaxLogitBias))
      body.fail("logit_bias", str_cat("values must be between -100 and 100, got ", value.dump(), " for token ", key));
    entries.push_back({static_cast<int32_t>(id), static_cast<float>(amount)});
  }
  return entries;
}

}  // namespace dsinfer::server
