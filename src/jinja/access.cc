#include "jinja/access.h"

#include <algorithm>

#include "jinja/methods.h"
#include "jinja/python_str.h"

namespace dsinfer::jinja {
namespace {

// A method read without being called, `f = text.split`: calls go to the receiver's method.
class BoundMethod : public Callable {
 public:
  BoundMethod(Value receiver, std::string_view name) : receiver_(std::move(receiver)), name_(name) {}
  std::string_view name() const override { return name_; }
  Value call(Interpreter& interpreter, Arguments arguments) const override {
    return *call_method(interpreter, receiver_, name_, arguments);
  }

 private:
  Value receiver_;
  std::string name_;
};

// jinja2's wording for a missing attribute or element.
std::string describe_object(const Value& object) {
  return object.is_none() ? "'None'" : str_cat("'", type_name(object), " object'");
}

Value missing_attribute(const Value& object, std::string_view name) {
  return Value::undefined(str_cat(describe_object(object), " has no attribute '", name, "'"));
}

Value method_or_missing(const Value& object, std::string_view name) {
  if (has_method(object, name)) return Value(std::shared_ptr<const Callable>(std::make_shared<BoundMethod>(object, name)));
  return missing_attribute(object, name);
}

Value loop_attribute(const Loop& loop, std::string_view name) {
  auto length = static_cast<int64_t>(loop.items.size());
  auto index = static_cast<int64_t>(loop.index);
  if (name == "index") return Value(index + 1);
  if (name == "index0") return Value(index);
  if (name == "revindex") return Value(length - index);
  if (name == "revindex0") return Value(length - index - 1);
  if (name == "first") return Value(index == 0);
  if (name == "last") return Value(index == length - 1);
  if (name == "length") return Value(length);
  if (name == "depth") return Value(1);  // recursive loops are not supported
  if (name == "depth0") return Value(0);
  if (name == "previtem")
    return index > 0 ? loop.items[loop.index - 1] : Value::undefined("there is no previous item");
  if (name == "nextitem")
    return index + 1 < length ? loop.items[loop.index + 1] : Value::undefined("there is no next item");
  return Value::undefined("");
}

// Python's slice.indices(): the positions a[start:stop:step] visits.
std::vector<size_t> slice_positions(size_t size, const Value& start, const Value& stop, const Value& step) {
  auto length = static_cast<int64_t>(size);
  int64_t stride = step.is_none() ? 1 : step.as_int();
  if (stride == 0) throw RenderError("slice step cannot be zero");
  // A step longer than the sequence visits at most one item; clamping keeps i += stride in range.
  stride = std::clamp(stride, -(length + 1), length + 1);
  int64_t lower = stride > 0 ? 0 : -1;
  int64_t upper = stride > 0 ? length : length - 1;
  auto clamp = [&](const Value& bound, int64_t fallback) {
    if (bound.is_none()) return fallback;
    int64_t position = bound.as_int();
    if (position < 0) return std::max(position + length, lower);
    return std::min(position, upper);
  };
  int64_t begin = clamp(start, stride > 0 ? lower : upper);
  int64_t end = clamp(stop, stride > 0 ? upper : lower);
  std::vector<size_t> positions;
  for (int64_t i = begin; stride > 0 ? i < end : i > end; i += stride) positions.push_back(static_cast<size_t>(i));
  return positions;
}

}  // namespace

Value get_attribute(const Value& object, std::string_view name) {
  switch (object.kind()) {
    case Value::Kind::kUndefined: fail_undefined(object);
    case Value::Kind::kDict:
      if (!object.is_namespace() && has_method(object, name)) return method_or_missing(object, name);
      if (const Value* value = object.as_dict().find(name)) return *value;
      return missing_attribute(object, name);
    case Value::Kind::kLoop: {
      Value value = loop_attribute(object.as_loop(), name);
      return value.is_undefined() ? method_or_missing(object, name) : value;
    }
    default: return method_or_missing(object, name);
  }
}

Value get_item(const Value& object, const Value& key) {
  if (object.is_undefined()) fail_undefined(object);
  if (object.is_dict()) {
    if (const Value* value = object.as_dict().find(key)) return *value;
  } else if ((object.is_list() || object.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t index = key.as_int();
    if (object.is_list()) {
      const auto& items = object.as_list().items;
      auto size = static_cast<int64_t>(items.size());
      if (index < 0) index += size;
      if (index >= 0 && index < size) return items[static_cast<size_t>(index)];
    } else {
      std::vector<std::string_view> parts = characters(object.as_string());
      auto size = static_cast<int64_t>(parts.size());
      if (index < 0) index += size;
      if (index >= 0 && index < size) return Value(parts[static_cast<size_t>(index)]);
    }
    return Value::undefined(str_cat(describe_object(object), " has no element ", index));
  }
  // Like jinja2: a failed lookup by a string falls back to the attribute of that name.
  if (key.is_string()) {
    if (object.is_loop()) return get_attribute(object, key.as_string());
    return method_or_missing(object, key.as_string());
  }
  return Value::undefined(str_cat(describe_object(object), " has no element ", repr(key)));
}

Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  if (object.is_undefined()) fail_undefined(object);
  for (const Value* bound : {&start, &stop, &step}) {
    if (!bound->is_none() && !bound->is_int() && !bound->is_bool())
      return Value::undefined("slice indices must be integers or None");
  }
  if (object.is_string()) {
    std::vector<std::string_view> parts = characters(object.as_string());
    std::string out;
    for (size_t position : slice_positions(parts.size(), start, stop, step)) out += parts[position];
    return Value(std::move(out));
  }
  if (object.is_list()) {
    const List& list = object.as_list();
    std::vector<Value> items;
    for (size_t position : slice_positions(list.items.size(), start, stop, step)) items.push_back(list.items[position]);
    return list.is_tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  }
  return Value::undefined(str_cat(describe_object(object), " is not subscriptable"));
}

}  // namespace dsinfer::jinja
