// Filters of sequences and mappings: length, first, join, sort, unique, map, select, items, ...
#include <algorithm>

#include "jinja/access.h"
#include "jinja/arguments.h"
#include "jinja/filters.h"
#include "jinja/limits.h"
#include "jinja/methods.h"
#include "jinja/operators.h"
#include "jinja/predicates.h"
#include "jinja/python_str.h"

namespace dsinfer::jinja {
namespace {

// `attribute="a.b.0"` arguments: a path of keys (digits are indexes), looked up like x[key].
Value lookup_path(const Value& item, const Value& path) {
  if (!path.is_string()) return get_item(item, path);
  Value current = item;
  for (const std::string& part : split(path.as_string(), std::string("."), -1)) {
    int64_t index = 0;
    bool numeric = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos && part.size() < 18;
    if (numeric) index = std::stoll(part);
    current = numeric ? get_item(current, Value(index)) : get_item(current, Value(part));
  }
  return current;
}

// Sort and comparison keys: lower-cased strings unless case_sensitive.
Value sort_key(Value value, bool case_sensitive) {
  if (!case_sensitive && value.is_string()) return Value(to_lower(value.as_string()));
  return value;
}

Value length_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("length", arguments, {});
  switch (input.kind()) {
    case Value::Kind::kUndefined: return Value(0);
    case Value::Kind::kString: return Value(static_cast<int64_t>(character_count(input.as_string())));
    case Value::Kind::kList: return Value(static_cast<int64_t>(input.as_list().items.size()));
    case Value::Kind::kDict:
      if (input.is_namespace()) break;
      return Value(static_cast<int64_t>(input.as_dict().entries.size()));
    case Value::Kind::kLoop: return Value(static_cast<int64_t>(input.as_loop().items.size()));
    default: break;
  }
  throw RenderError(str_cat("object of type '", type_name(input), "' has no len()"));
}

// first and last read lists in place: templates call them on `messages` once per message.
template <bool kLast>
Value end_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound(kLast ? "last" : "first", arguments, {});
  const std::vector<Value>* items = input.is_list() ? &input.as_list().items : nullptr;
  std::vector<Value> iterated;
  if (items == nullptr) {
    iterated = iterate(input);
    items = &iterated;
  }
  if (items->empty()) return Value::undefined(kLast ? "No last item, sequence was empty." : "No first item, sequence was empty.");
  return kLast ? items->back() : items->front();
}

Value list_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("list", arguments, {});
  return Value::list(iterate(input));
}

Value join_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("join", arguments, {"d", "attribute"});
  std::string separator = to_string(bound.get(0, Value("")));
  std::string out;
  bool first = true;
  for (const Value& item : iterate(input)) {
    if (!first) out += separator;
    first = false;
    append_string(out, bound.has(1) && !bound[1].is_none() ? lookup_path(item, bound[1]) : item);
    if (out.size() > kMaxValueBytes) throw RenderError("join(): result would be too large");
  }
  return Value(std::move(out));
}

Value reverse_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("reverse", arguments, {});
  std::vector<Value> items = iterate(input);
  std::reverse(items.begin(), items.end());
  if (!input.is_string()) return Value::list(std::move(items));
  std::string out;
  for (const Value& character : items) out += character.as_string();
  return Value(std::move(out));
}

// A key per item from `attribute` (comma-separated paths compare as a list).
std::vector<Value> keys_for(const std::vector<Value>& items, const BoundArguments& bound, size_t attribute_index,
                            bool case_sensitive) {
  std::vector<Value> keys;
  keys.reserve(items.size());
  std::vector<std::string> paths;
  if (bound.has(attribute_index) && !bound[attribute_index].is_none()) {
    const Value& attribute = bound[attribute_index];
    paths = attribute.is_string() ? split(attribute.as_string(), std::string(","), -1) : std::vector<std::string>{};
    if (!attribute.is_string()) {
      for (const Value& item : items) keys.push_back(sort_key(get_item(item, attribute), case_sensitive));
      return keys;
    }
  }
  for (const Value& item : items) {
    if (paths.empty()) {
      keys.push_back(sort_key(item, case_sensitive));
    } else if (paths.size() == 1) {
      keys.push_back(sort_key(lookup_path(item, Value(paths[0])), case_sensitive));
    } else {
      std::vector<Value> parts;
      for (const std::string& path : paths) parts.push_back(sort_key(lookup_path(item, Value(path)), case_sensitive));
      keys.push_back(Value::list(std::move(parts)));
    }
  }
  return keys;
}

// Stable, as Python's sorted(); reverse keeps equal items in their original order too.
std::vector<Value> sorted(std::vector<Value> items, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return reverse ? less(keys[b], keys[a]) : less(keys[a], keys[b]);
  });
  std::vector<Value> out;
  out.reserve(items.size());
  for (size_t i : order) out.push_back(std::move(items[i]));
  return out;
}

Value sort_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("sort", arguments, {"reverse", "case_sensitive", "attribute"});
  std::vector<Value> items = iterate(input);
  std::vector<Value> keys = keys_for(items, bound, 2, bound.boolean(1, false));
  return Value::list(sorted(std::move(items), keys, bound.boolean(0, false)));
}

Value dictsort_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("dictsort", arguments, {"case_sensitive", "by", "reverse"});
  if (!input.is_dict() || input.is_namespace()) throw RenderError("dictsort(): value must be a mapping");
  std::string by = bound.string(1, "key");
  if (by != "key" && by != "value") throw RenderError("You can only sort by either \"key\" or \"value\"");
  std::vector<Value> items, keys;
  for (const auto& [key, value] : input.as_dict().entries) {
    items.push_back(Value::tuple({key, value}));
    keys.push_back(sort_key(by == "key" ? key : value, bound.boolean(0, false)));
  }
  return Value::list(sorted(std::move(items), keys, bound.boolean(2, false)));
}

Value unique_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("unique", arguments, {"case_sensitive", "attribute"});
  std::vector<Value> items = iterate(input);
  std::vector<Value> keys = keys_for(items, bound, 1, bound.boolean(0, false));
  std::vector<Value> seen, out;
  for (size_t i = 0; i < items.size(); ++i) {
    bool repeated = std::any_of(seen.begin(), seen.end(), [&](const Value& key) { return equals(key, keys[i]); });
    if (repeated) continue;
    seen.push_back(keys[i]);
    out.push_back(items[i]);
  }
  return Value::list(std::move(out));
}

// min and max: the first item with the smallest (largest) key; undefined for no items.
template <bool kMax>
Value extreme_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound(kMax ? "max" : "min", arguments, {"case_sensitive", "attribute"});
  std::vector<Value> items = iterate(input);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  std::vector<Value> keys = keys_for(items, bound, 1, bound.boolean(0, false));
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i)
    if (kMax ? less(keys[best], keys[i]) : less(keys[i], keys[best])) best = i;
  return items[best];
}

Value sum_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("sum", arguments, {"attribute", "start"});
  Value total = bound.get(1, Value(0));
  for (const Value& item : iterate(input))
    total = arithmetic(BinaryOp::kAdd, total, bound.has(0) && !bound[0].is_none() ? lookup_path(item, bound[0]) : item);
  return total;
}

Value batch_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("batch", arguments, {"linecount", "fill_with"}, 1);
  int64_t size = bound.integer(0, 1);
  if (size <= 0) throw RenderError("batch(): linecount must be positive");
  std::vector<Value> items = iterate(input);
  std::vector<Value> batches;
  for (size_t start = 0; start < items.size(); start += static_cast<size_t>(size)) {
    size_t end = std::min(items.size(), start + static_cast<size_t>(size));
    std::vector<Value> batch(items.begin() + static_cast<ptrdiff_t>(start), items.begin() + static_cast<ptrdiff_t>(end));
    if (bound.has(1) && !bound[1].is_none()) {
      if (static_cast<uint64_t>(size) > kMaxValueBytes / sizeof(Value)) throw RenderError("batch(): linecount is too large");
      batch.resize(static_cast<size_t>(size), bound[1]);
    }
    batches.push_back(Value::list(std::move(batch)));
  }
  return Value::list(std::move(batches));
}

// map(attribute=path, default=x) or map(filter_name, filter arguments...).
Value map_filter(const Value& input, const Arguments& arguments) {
  if (!truthy(input)) return Value::list({});
  std::vector<Value> items = iterate(input), out;
  if (arguments.positional.empty()) {
    BoundArguments bound("map", arguments, {"attribute", "default"}, 1);
    for (const Value& item : items) {
      Value value = lookup_path(item, bound[0]);
      out.push_back(value.is_undefined() && bound.has(1) && !bound[1].is_none() ? bound[1] : value);
    }
    return Value::list(std::move(out));
  }
  const Value& name = arguments.positional[0];
  FilterFunction filter = name.is_string() ? find_filter(name.as_string()) : nullptr;
  if (filter == nullptr) throw RenderError(str_cat("map(): no filter named ", repr(name)));
  Arguments rest{std::vector<Value>(arguments.positional.begin() + 1, arguments.positional.end()), arguments.keyword};
  for (const Value& item : items) out.push_back(filter(item, rest));
  return Value::list(std::move(out));
}

// select/reject(test, args...) and selectattr/rejectattr(attribute, test, args...). Without a
// test, items are kept by truthiness.
template <bool kKeep, bool kByAttribute>
Value select_filter(const Value& input, const Arguments& arguments) {
  if (!truthy(input)) return Value::list({});
  size_t offset = kByAttribute ? 1 : 0;
  if (arguments.positional.size() < offset) throw RenderError("Missing parameter for attribute name");
  TestFunction test = nullptr;
  Arguments test_arguments{{}, arguments.keyword};
  if (arguments.positional.size() > offset) {
    const Value& name = arguments.positional[offset];
    test = name.is_string() ? find_test(name.as_string()) : nullptr;
    if (test == nullptr) throw RenderError(str_cat("no test named ", repr(name)));
    test_arguments.positional.assign(arguments.positional.begin() + static_cast<ptrdiff_t>(offset) + 1,
                                     arguments.positional.end());
  }
  std::vector<Value> out;
  for (const Value& item : iterate(input)) {
    Value subject = kByAttribute ? lookup_path(item, arguments.positional[0]) : item;
    bool passes = test ? test(subject, test_arguments) : truthy(subject);
    if (passes == kKeep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value items_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("items", arguments, {});
  if (input.is_undefined()) return Value::list({});
  if (!input.is_dict() || input.is_namespace()) throw RenderError("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [key, value] : input.as_dict().entries) out.push_back(Value::tuple({key, value}));
  return Value::list(std::move(out));
}

// x|attr(name) is x.name without falling back to x[name] for dicts.
Value attr_filter(const Value& input, const Arguments& arguments) {
  BoundArguments bound("attr", arguments, {"name"}, 1);
  std::string name = bound.string(0, {});
  if (input.is_dict() && !input.is_namespace() && !has_method(input, name))
    return Value::undefined(str_cat("'dict object' has no attribute '", name, "'"));
  return get_attribute(input, name);
}

constexpr NamedFilter kSequenceFilters[] = {
    {"attr", attr_filter},
    {"batch", batch_filter},
    {"count", length_filter},
    {"dictsort", dictsort_filter},
    {"first", end_filter<false>},
    {"items", items_filter},
    {"join", join_filter},
    {"last", end_filter<true>},
    {"length", length_filter},
    {"list", list_filter},
    {"map", map_filter},
    {"max", extreme_filter<true>},
    {"min", extreme_filter<false>},
    {"reject", select_filter<false, false>},
    {"rejectattr", select_filter<false, true>},
    {"reverse", reverse_filter},
    {"select", select_filter<true, false>},
    {"selectattr", select_filter<true, true>},
    {"sort", sort_filter},
    {"sum", sum_filter},
    {"unique", unique_filter},
};

}  // namespace

std::span<const NamedFilter> sequence_filters() { return kSequenceFilters; }

}  // namespace dsinfer::jinja
