#include "jinja/methods.h"

#include "jinja/arguments.h"
#include "jinja/interpreter.h"
#include "jinja/limits.h"
#include "jinja/python_format.h"
#include "jinja/python_str.h"

namespace dsinfer::jinja {
namespace {

using MethodFunction = Value (*)(Interpreter& interpreter, std::string_view name, const Value& self,
                                 const Arguments& arguments);

struct Method {
  std::string_view name;
  MethodFunction function;
};

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (std::string& part : parts) items.emplace_back(std::move(part));
  return Value::list(std::move(items));
}

// split and rsplit take (sep=None, maxsplit=-1); an empty separator is an error, as in Python.
template <bool kFromRight>
Value split_method(Interpreter&, std::string_view name, const Value& self, const Arguments& arguments) {
  BoundArguments bound(name, arguments, {"sep", "maxsplit"});
  std::optional<std::string> separator = bound.optional_string(0);
  if (separator && separator->empty()) throw RenderError("empty separator");
  int64_t max_splits = bound.integer(1, -1);
  return string_list(kFromRight ? rsplit(self.as_string(), separator, max_splits)
                                : split(self.as_string(), separator, max_splits));
}

template <bool kLeft, bool kRight>
Value strip_method(Interpreter&, std::string_view name, const Value& self, const Arguments& arguments) {
  BoundArguments bound(name, arguments, {"chars"});
  return Value(strip(self.as_string(), bound.optional_string(0), kLeft, kRight));
}

// startswith/endswith take a string or a tuple of strings.
template <bool kStart>
Value affix_method(Interpreter&, std::string_view name, const Value& self, const Arguments& arguments) {
  BoundArguments bound(name, arguments, {"affix"}, 1);
  std::string_view text = self.as_string();
  auto matches = [&](const Value& affix) {
    if (!affix.is_string())
      throw RenderError(str_cat(name, " first arg must be str or a tuple of str, not ",
                                type_name(affix)));
    return kStart ? text.starts_with(affix.as_string()) : text.ends_with(affix.as_string());
  };
  if (bound[0].is_tuple()) {
    for (const Value& affix : bound[0].as_list().items)
      if (matches(affix)) return Value(true);
    return Value(false);
  }
  return Value(matches(bound[0]));
}

template <std::string (*kConvert)(std::string_view)>
Value convert_method(Interpreter&, std::string_view name, const Value& self, const Arguments& arguments) {
  BoundArguments bound(name, arguments, {});
  return Value(kConvert(self.as_string()));
}

template <bool (*kPredicate)(std::string_view)>
Value predicate_method(Interpreter&, std::string_view name, const Value& self, const Arguments& arguments) {
  BoundArguments bound(name, arguments, {});
  return Value(kPredicate(self.as_string()));
}

bool is_ascii_digits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  return true;
}

template <int64_t (*kSearch)(std::string_view, std::string_view)>
Value search_method(Interpreter&, std::string_view name, const Value& self, const Arguments& arguments) {
  BoundArguments bound(name, arguments, {"sub"}, 1);
  return Value(kSearch(self.as_string(), bound.string(0, {})));
}

Value replace_method(Interpreter&, std::string_view name, const Value& self, const Arguments& arguments) {
  BoundArguments bound(name, arguments, {"old", "new", "count"}, 2);
  return Value(replace(self.as_string(), bound.string(0, {}), bound.string(1, {}), bound.integer(2, -1)));
}

Value join_method(Interpreter&, std::string_view name, const Value& self, const Arguments& arguments) {
  BoundArguments bound(name, arguments, {"iterable"}, 1);
  const Value& iterable = bound[0];
  std::vector<Value> items;
  if (iterable.is_list()) {
    items = iterable.as_list().items;
  } else if (iterable.is_string()) {
    for (std::string_view part : characters(iterable.as_string())) items.emplace_back(part);
  } else if (iterable.is_dict() && !iterable.is_namespace()) {
    for (const auto& entry : iterable.as_dict().entries) items.push_back(entry.first);
  } else {
    throw RenderError("can only join an iterable");
  }
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string())
      throw RenderError(str_cat("sequence item ", i, ": expected str instance, ", type_name(items[i]), " found"));
    if (i) out += self.as_string();
    out += items[i].as_string();
  }
  return Value(std::move(out));
}

Value splitlines_method(Interpreter&, std::string_view name, const Value& self, const Arguments& arguments) {
  BoundArguments bound(name, arguments, {"keepends"});
  return string_list(splitlines(self.as_string(), bound.boolean(0, false)));
}

template <bool kPrefix>
Value remove_affix_method(Interpreter&, std::string_view name, const Value& self, const Arguments& arguments) {
  BoundArguments bound(name, arguments, {"affix"}, 1);
  std::string_view text = self.as_string();
  std::string affix = bound.string(0, {});
  if (kPrefix && text.starts_with(affix)) text.remove_prefix(affix.size());
  if (!kPrefix && text.ends_with(affix)) text.remove_suffix(affix.size());
  return Value(text);
}

Value center_method(Interpreter&, std::string_view name, const Value& self, const Arguments& arguments) {
  BoundArguments bound(name, arguments, {"width", "fillchar"}, 1);
  int64_t width = bound.integer(0, 0);
  if (width > static_cast<int64_t>(kMaxValueBytes)) throw RenderError("center(): width is too large");
  std::string fill = bound.string(1, " ");
  if (character_count(fill) != 1) throw RenderError("The fill character must be exactly one character long");
  return Value(center(self.as_string(), width, fill));
}

Value format_method(Interpreter&, std::string_view name, const Value& self, const Arguments& arguments) {
  return Value(format_string(self.as_string(), arguments));
}

constexpr Method kStringMethods[] = {
    {"split", split_method<false>},
    {"rsplit", split_method<true>},
    {"splitlines", splitlines_method},
    {"strip", strip_method<true, true>},
    {"lstrip", strip_method<true, false>},
    {"rstrip", strip_method<false, true>},
    {"startswith", affix_method<true>},
    {"endswith", affix_method<false>},
    {"removeprefix", remove_affix_method<true>},
    {"removesuffix", remove_affix_method<false>},
    {"replace", replace_method},
    {"upper", convert_method<to_upper>},
    {"lower", convert_method<to_lower>},
    {"title", convert_method<title>},
    {"capitalize", convert_method<capitalize>},
    {"swapcase", convert_method<swap_case>},
    {"islower", predicate_method<is_lower>},
    {"isupper", predicate_method<is_upper>},
    {"isspace", predicate_method<is_whitespace>},
    {"isdigit", predicate_method<is_ascii_digits>},
    {"find", search_method<find>},
    {"rfind", search_method<rfind>},
    {"count", search_method<count>},
    {"center", center_method},
    {"format", format_method},
    {"join", join_method},
};

Value append_method(Interpreter& interpreter, std::string_view name, const Value& self, const Arguments& arguments) {
  BoundArguments bound(name, arguments, {"object"}, 1);
  if (self.is_tuple()) throw RenderError("'tuple' object has no attribute 'append'");
  interpreter.keep_for_cleanup(self);  // the list may now contain itself
  self.as_list().items.push_back(bound[0]);
  return Value::none();
}

Value index_method(Interpreter&, std::string_view name, const Value& self, const Arguments& arguments) {
  BoundArguments bound(name, arguments, {"value"}, 1);
  const auto& items = self.as_list().items;
  for (size_t i = 0; i < items.size(); ++i)
    if (equals(items[i], bound[0])) return Value(static_cast<int64_t>(i));
  throw RenderError(str_cat(repr(bound[0]), " is not in list"));
}

Value count_method(Interpreter&, std::string_view name, const Value& self, const Arguments& arguments) {
  BoundArguments bound(name, arguments, {"value"}, 1);
  int64_t n = 0;
  for (const Value& item : self.as_list().items) n += equals(item, bound[0]) ? 1 : 0;
  return Value(n);
}

constexpr Method kListMethods[] = {{"append", append_method}, {"index", index_method}, {"count", count_method}};

template <int kPart>  // 0: keys, 1: values, 2: (key, value) tuples
Value view_method(Interpreter&, std::string_view name, const Value& self, const Arguments& arguments) {
  BoundArguments bound(name, arguments, {});
  std::vector<Value> items;
  for (const auto& [key, value] : self.as_dict().entries) {
    if (kPart == 0) items.push_back(key);
    else if (kPart == 1) items.push_back(value);
    else items.push_back(Value::tuple({key, value}));
  }
  return Value::list(std::move(items));
}

Value get_method(Interpreter&, std::string_view name, const Value& self, const Arguments& arguments) {
  BoundArguments bound(name, arguments, {"key", "default"}, 1);
  const Value* value = self.as_dict().find(bound[0]);
  return value ? *value : bound.get(1, Value::none());
}

constexpr Method kDictMethods[] = {
    {"keys", view_method<0>}, {"values", view_method<1>}, {"items", view_method<2>}, {"get", get_method}};

Value cycle_method(Interpreter&, std::string_view name, const Value& self, const Arguments& arguments) {
  if (arguments.positional.empty()) throw RenderError("no items for cycling given");
  const Loop& loop = self.as_loop();
  return arguments.positional[loop.index % arguments.positional.size()];
}

constexpr Method kLoopMethods[] = {{"cycle", cycle_method}};

template <size_t N>
MethodFunction find_in(const Method (&table)[N], std::string_view name) {
  for (const Method& method : table)
    if (method.name == name) return method.function;
  return nullptr;
}

MethodFunction find_method(const Value& receiver, std::string_view name) {
  switch (receiver.kind()) {
    case Value::Kind::kString: return find_in(kStringMethods, name);
    case Value::Kind::kList: return find_in(kListMethods, name);
    case Value::Kind::kDict: return receiver.is_namespace() ? nullptr : find_in(kDictMethods, name);
    case Value::Kind::kLoop: return find_in(kLoopMethods, name);
    default: return nullptr;
  }
}

}  // namespace

bool has_method(const Value& receiver, std::string_view name) { return find_method(receiver, name) != nullptr; }

std::optional<Value> call_method(Interpreter& interpreter, const Value& receiver, std::string_view name,
                                 const Arguments& arguments) {
  MethodFunction method = find_method(receiver, name);
  if (method == nullptr) return std::nullopt;
  return method(interpreter, name, receiver, arguments);
}

}  // namespace dsinfer::jinja
