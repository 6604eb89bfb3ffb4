#include "structured/structural_tag.h"

#include <utility>

#include "core/error.h"
#include "core/json.h"

namespace dsinfer::structured {
namespace {

const std::string& string_member(const Json& object, std::string_view key, std::string_view where) {
  const Json* value = object.find(key);
  DSINFER_CHECK(value && value->is_string(), where, " needs a string \"", key, "\"");
  return value->as_string();
}

void bound_whitespace(Json& node, int max_whitespace) {
  if (node.is_array()) {
    for (Json& item : node.as_array()) bound_whitespace(item, max_whitespace);
    return;
  }
  if (!node.is_object()) return;
  const Json* type = node.find("type");
  if (type && type->is_string() && type->as_string() == "json_schema" && node.contains("json_schema")) {
    if (!node.contains("max_whitespace_cnt")) node["max_whitespace_cnt"] = static_cast<int64_t>(max_whitespace);
    return;  // the schema itself is not a format
  }
  for (auto& [key, value] : node.as_object()) bound_whitespace(value, max_whitespace);
}

}  // namespace

std::string bound_json_whitespace(std::string_view xgrammar_json, int max_whitespace) {
  Json tag = Json::parse(xgrammar_json);
  bound_whitespace(tag, max_whitespace);
  return tag.dump();
}

std::string structural_tag_for_xgrammar(std::string_view json) {
  Json tag;
  try {
    tag = Json::parse(json);
  } catch (const Error& error) {
    throw Error(str_cat("not valid JSON: ", error.what()));
  }
  DSINFER_CHECK(tag.is_object(), "not a JSON object");
  if (const Json* type = tag.find("type")) {
    DSINFER_CHECK(type->is_string() && type->as_string() == "structural_tag",
                  "\"type\" must be \"structural_tag\"");
  }
  if (tag.contains("format")) return std::string(json);  // xgrammar's form: it checks the rest

  const Json* structures = tag.find("structures");
  const Json* triggers = tag.find("triggers");
  DSINFER_CHECK(structures && structures->is_array() && structures->size() > 0,
                "needs either \"format\" or a non-empty \"structures\" array");
  DSINFER_CHECK(triggers && triggers->is_array() && triggers->size() > 0,
                "\"structures\" needs a non-empty \"triggers\" array of strings");
  for (const Json& trigger : triggers->as_array()) {
    DSINFER_CHECK(trigger.is_string() && !trigger.as_string().empty(),
                  "each trigger must be a non-empty string");
  }

  Json tags = Json::array();
  for (size_t i = 0; i < structures->size(); ++i) {
    const Json& structure = structures->at(i);
    std::string where = str_cat("structures[", i, "]");
    DSINFER_CHECK(structure.is_object(), where, " must be an object");
    const Json* schema = structure.find("schema");
    DSINFER_CHECK(schema && (schema->is_object() || schema->is_bool()), where,
                  " needs a JSON schema object \"schema\"");
    Json content = Json::object();
    content["type"] = "json_schema";
    content["json_schema"] = *schema;
    Json item = Json::object();
    item["type"] = "tag";
    item["begin"] = string_member(structure, "begin", where);
    item["content"] = std::move(content);
    item["end"] = string_member(structure, "end", where);
    tags.push_back(std::move(item));
  }
  Json format = Json::object();
  format["type"] = "triggered_tags";
  format["triggers"] = *triggers;
  format["tags"] = std::move(tags);
  Json out = Json::object();
  out["type"] = "structural_tag";
  out["format"] = std::move(format);
  return out.dump();
}

}  // namespace dsinfer::structured
