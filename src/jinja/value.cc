#include "jinja/value.h"

#include <cmath>

#include "jinja/limits.h"
#include "jinja/python_format.h"
#include "jinja/python_str.h"

namespace dsinfer::jinja {
namespace {

void check_depth(int depth) {
  if (depth > kMaxValueDepth) throw RenderError("value nested too deeply (or containing itself)");
}

bool equals_at(const Value& a, const Value& b, int depth);

bool lists_equal(const List& a, const List& b, int depth) {
  if (a.is_tuple != b.is_tuple || a.items.size() != b.items.size()) return false;
  for (size_t i = 0; i < a.items.size(); ++i)
    if (!equals_at(a.items[i], b.items[i], depth + 1)) return false;
  return true;
}

bool dicts_equal(const Dict& a, const Dict& b, int depth) {
  if (a.entries.size() != b.entries.size()) return false;
  for (const auto& [key, value] : a.entries) {
    const Value* other = b.find(key);
    if (other == nullptr || !equals_at(value, *other, depth + 1)) return false;
  }
  return true;
}

bool equals_at(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  using Kind = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return a.as_string() == b.as_string();
    case Kind::kList: return a.same_object(b) || lists_equal(a.as_list(), b.as_list(), depth);
    case Kind::kDict:
      if (a.is_namespace() || b.is_namespace()) return a.same_object(b);
      return a.same_object(b) || dicts_equal(a.as_dict(), b.as_dict(), depth);
    default: return a.same_object(b);
  }
}

void append_repr(std::string& out, const Value& value, int depth);

void append_items(std::string& out, const std::vector<Value>& items, int depth) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    append_repr(out, items[i], depth + 1);
  }
}

void append_dict(std::string& out, const Dict& dict, int depth) {
  out += '{';
  for (size_t i = 0; i < dict.entries.size(); ++i) {
    if (i) out += ", ";
    append_repr(out, dict.entries[i].first, depth + 1);
    out += ": ";
    append_repr(out, dict.entries[i].second, depth + 1);
  }
  out += '}';
}

// str() and repr() differ only for strings (quoted by repr) and undefined (blank for str).
void append_value(std::string& out, const Value& value, int depth, bool as_repr) {
  check_depth(depth);
  using Kind = Value::Kind;
  switch (value.kind()) {
    case Kind::kUndefined:
      if (as_repr) out += "Undefined";
      break;
    case Kind::kNone: out += "None"; break;
    case Kind::kBool: out += value.as_bool() ? "True" : "False"; break;
    case Kind::kInt: out += std::to_string(value.as_int()); break;
    case Kind::kFloat: out += format_float(value.as_float()); break;
    case Kind::kString:
      if (as_repr) append_quoted(out, value.as_string());
      else out += value.as_string();
      break;
    case Kind::kList: {
      const List& list = value.as_list();
      out += list.is_tuple ? '(' : '[';
      append_items(out, list.items, depth);
      if (list.is_tuple && list.items.size() == 1) out += ',';
      out += list.is_tuple ? ')' : ']';
      break;
    }
    case Kind::kDict:
      if (value.is_namespace()) {
        out += "<Namespace ";
        append_dict(out, value.as_dict(), depth);
        out += '>';
      } else {
        append_dict(out, value.as_dict(), depth);
      }
      break;
    case Kind::kLoop: {
      const Loop& loop = value.as_loop();
      out += str_cat("<LoopContext ", loop.index + 1, "/", loop.items.size(), ">");
      break;
    }
    case Kind::kCallable: out += str_cat("<function ", value.as_callable().name(), ">"); break;
  }
}

void append_repr(std::string& out, const Value& value, int depth) { append_value(out, value, depth, true); }

bool less_at(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 orders by code point
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals_at(x[i], y[i], depth + 1)) continue;
      return less_at(x[i], y[i], depth + 1);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  throw RenderError(str_cat("'<' not supported between instances of '", type_name(a), "' and '",
                            type_name(b), "'"));
}

}  // namespace

Value Value::undefined(std::string hint) {
  Value value;
  value.data_ = Undefined{std::make_shared<const std::string>(std::move(hint))};
  return value;
}

Value Value::list(std::vector<Value> items) {
  auto list = std::make_shared<List>();
  list->items = std::move(items);
  return Value(std::move(list));
}

Value Value::tuple(std::vector<Value> items) {
  auto list = std::make_shared<List>();
  list->items = std::move(items);
  list->is_tuple = true;
  return Value(std::move(list));
}

Value Value::dict() { return Value(std::make_shared<Dict>()); }

bool Value::is_tuple() const { return is_list() && as_list().is_tuple; }
bool Value::is_namespace() const { return is_dict() && as_dict().is_namespace; }

int64_t Value::as_int() const {
  if (is_bool()) return as_bool() ? 1 : 0;
  return std::get<int64_t>(data_);
}

double Value::as_float() const {
  if (is_float()) return std::get<double>(data_);
  return static_cast<double>(as_int());
}

const std::string& Value::undefined_hint() const {
  static const std::string kNoHint = "value is undefined";
  const auto& hint = std::get<Undefined>(data_).hint;
  return hint ? *hint : kNoHint;
}

bool Value::same_object(const Value& other) const {
  if (kind() != other.kind()) return false;
  switch (kind()) {
    case Kind::kString: return std::get<StringPtr>(data_) == std::get<StringPtr>(other.data_);
    case Kind::kList: return list_ptr() == other.list_ptr();
    case Kind::kDict: return dict_ptr() == other.dict_ptr();
    case Kind::kLoop: return &as_loop() == &other.as_loop();
    case Kind::kCallable: return &as_callable() == &other.as_callable();
    default: return equals(*this, other);
  }
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [name, value] : entries)
    if (equals(name, key)) return &value;
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [name, value] : entries)
    if (name.is_string() && name.as_string() == key) return &value;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [name, existing] : entries) {
    if (equals(name, key)) {
      existing = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

bool truthy(const Value& value) {
  using Kind = Value::Kind;
  switch (value.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return value.as_bool();
    case Kind::kInt: return value.as_int() != 0;
    case Kind::kFloat: return value.as_float() != 0.0;
    case Kind::kString: return !value.as_string().empty();
    case Kind::kList: return !value.as_list().items.empty();
    case Kind::kDict: return value.is_namespace() || !value.as_dict().entries.empty();
    default: return true;
  }
}

void append_string(std::string& out, const Value& value) { append_value(out, value, 0, false); }

std::string to_string(const Value& value) {
  if (value.is_string()) return value.as_string();
  std::string out;
  append_value(out, value, 0, false);
  return out;
}

std::string repr(const Value& value) {
  std::string out;
  append_value(out, value, 0, true);
  return out;
}

bool equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }

bool less(const Value& a, const Value& b) { return less_at(a, b, 0); }

std::string_view type_name(const Value& value) {
  using Kind = Value::Kind;
  switch (value.kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return value.is_tuple() ? "tuple" : "list";
    case Kind::kDict: return value.is_namespace() ? "Namespace" : "dict";
    case Kind::kLoop: return "LoopContext";
    case Kind::kCallable: return "function";
  }
  return "object";
}

std::vector<Value> iterate(const Value& value) {
  std::vector<Value> items;
  switch (value.kind()) {
    case Value::Kind::kUndefined: return items;
    case Value::Kind::kList: return value.as_list().items;
    case Value::Kind::kString:
      for (std::string_view character : characters(value.as_string())) items.emplace_back(character);
      return items;
    case Value::Kind::kDict:
      if (value.is_namespace()) break;
      for (const auto& entry : value.as_dict().entries) items.push_back(entry.first);
      return items;
    default: break;
  }
  throw RenderError(str_cat("'", type_name(value), "' object is not iterable"));
}

void fail_undefined(const Value& value) { throw RenderError(value.undefined_hint()); }

Value from_json(const Json& json) {
  switch (json.type()) {
    case Json::Type::kNull: return Value::none();
    case Json::Type::kBool: return Value(json.as_bool());
    case Json::Type::kInt: return Value(json.as_int());
    case Json::Type::kFloat: return Value(json.as_double());
    case Json::Type::kString: return Value(json.as_string());
    case Json::Type::kArray: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const Json& item : json.as_array()) items.push_back(from_json(item));
      return Value::list(std::move(items));
    }
    case Json::Type::kObject: {
      auto dict = std::make_shared<Dict>();
      dict->entries.reserve(json.size());
      for (const auto& [key, item] : json.as_object()) dict->entries.emplace_back(Value(key), from_json(item));
      return Value(std::move(dict));
    }
  }
  return Value::none();
}

}  // namespace dsinfer::jinja
