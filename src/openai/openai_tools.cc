#include "openai/openai_tools.h"

#include <optional>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "core/strings.h"
#include "openai/openai_errors.h"

namespace dsinfer::server {
namespace {

std::string known_parsers() {
  std::vector<std::string> names;
  for (std::string_view name : tool_call_parser_names()) names.emplace_back(name);
  return join(names, ", ");
}

void check_function(const RequestFields& tool) {
  if (std::optional<std::string> type = tool.string("type"); type && *type != "function")
    tool.fail("type", str_cat("must be 'function', got '", *type, "'"));
  const Json* function = tool.object("function");
  if (function == nullptr) tool.fail("function", "is required");
  RequestFields fields(*function, tool.path_of("function"));
  std::optional<std::string> name = fields.string("name");
  if (!name) fields.fail("name", "is required");
  if (name->empty()) fields.fail("name", "must not be empty");
  fields.string("description");
  fields.object("parameters");
  if (fields.boolean("strict").value_or(false))
    throw invalid_request(str_cat(fields.path_of("strict"),
                                  " = true is not supported yet: arguments that always match the schema need "
                                  "constrained decoding, which comes with structured output (issue 12, item 2)"),
                          param_of_path(fields.path_of("strict")));
}

}  // namespace

Json parse_tools(const RequestFields& body) {
  const Json::Array* tools = body.array("tools");
  if (tools == nullptr || tools->empty()) return Json();
  for (size_t i = 0; i < tools->size(); ++i) check_function(RequestFields((*tools)[i], str_cat("tools[", i, "]")));
  return Json(*tools);
}

ToolChoice parse_tool_choice(const RequestFields& body, const Json& tools) {
  const Json* choice = body.get("tool_choice");
  if (choice == nullptr) return tools.is_null() ? ToolChoice::kNone : ToolChoice::kAuto;
  if (choice->is_string()) {
    const std::string& mode = choice->as_string();
    if (mode == "none") return ToolChoice::kNone;
    if (mode == "auto") return ToolChoice::kAuto;
    if (mode == "required") {
      if (tools.is_null()) throw invalid_request("tool_choice \"required\" needs tools", "tool_choice");
      return ToolChoice::kRequired;
    }
  } else if (choice->is_object()) {
    const std::string name = tool_choice_function(body);
    bool offered = false;
    if (!tools.is_null())
      for (const Json& tool : tools.as_array()) offered |= tool.find("function")->find("name")->as_string() == name;
    if (!offered)
      throw invalid_request(str_cat("tool_choice names the function '", name, "', which is not among the tools"),
                            "tool_choice");
    return ToolChoice::kNamed;
  }
  body.fail("tool_choice", str_cat("must be 'none', 'auto', 'required' or a named function, got ", choice->dump()));
}

std::string tool_choice_function(const RequestFields& body) {
  const Json* choice = body.get("tool_choice");
  if (choice == nullptr || !choice->is_object()) return "";
  RequestFields named(*choice, "tool_choice");
  if (named.string("type").value_or("") != "function") named.fail("type", "must be 'function'");
  const Json* function = named.object("function");
  if (function == nullptr) named.fail("function", "is required");
  std::optional<std::string> name = RequestFields(*function, "tool_choice.function").string("name");
  if (!name) fail_field("tool_choice.function.name", "is required");
  return *name;
}

ToolParsing tool_parsing(const Json& tools, ToolChoice choice, const std::string& parser, bool auto_enabled) {
  if (choice == ToolChoice::kNone || tools.is_null()) return {};
  if ((choice == ToolChoice::kRequired || choice == ToolChoice::kNamed) && parser.empty())
    throw invalid_request(str_cat("tool_choice \"required\" or a named function needs the server to be started with "
                                  "--tool-call-parser (",
                                  known_parsers(), "): the call is forced in that parser's format"),
                          "tool_choice");
  if (choice == ToolChoice::kAuto && (!auto_enabled || parser.empty()))
    throw invalid_request(str_cat("tool_choice \"auto\" (the default when tools are given) needs the server to be "
                                  "started with --enable-auto-tool-choice and --tool-call-parser (",
                                  known_parsers(), "); or send tool_choice \"none\""),
                          "tool_choice");
  ToolParsing parsing;
  parsing.parser = parser;
  for (const Json& tool : tools.as_array()) parsing.offered.push_back(tool.find("function")->find("name")->as_string());
  return parsing;
}

void check_tool_flags(const std::string& parser, bool auto_enabled) {
  if (!parser.empty()) {
    try {
      tool_call_format(parser);
    } catch (const Error&) {
      throw Error(str_cat("--tool-call-parser '", parser, "' is not known (known: ", known_parsers(), ")"));
    }
  }
  DSINFER_CHECK(!auto_enabled || !parser.empty(), "--enable-auto-tool-choice needs --tool-call-parser (",
                known_parsers(), ")");
}

Json tool_call_json(const ToolCall& call) {
  Json function = Json::object();
  function["name"] = call.name;
  function["arguments"] = call.arguments;
  Json json = Json::object();
  json["id"] = call.id;
  json["type"] = "function";
  json["function"] = std::move(function);
  return json;
}

}  // namespace dsinfer::server
