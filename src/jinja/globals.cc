#include "jinja/globals.h"

#include <ctime>

#include "jinja/arguments.h"
#include "jinja/interpreter.h"
#include "jinja/limits.h"

namespace dsinfer::jinja {
namespace {

class BuiltinFunction : public Callable {
 public:
  using Function = Value (*)(Interpreter& interpreter, const Arguments& arguments);
  BuiltinFunction(std::string_view name, Function function) : name_(name), function_(function) {}
  std::string_view name() const override { return name_; }
  Value call(Interpreter& interpreter, Arguments arguments) const override { return function_(interpreter, arguments); }

 private:
  std::string_view name_;
  Function function_;
};

Value range_function(Interpreter&, const Arguments& arguments) {
  if (!arguments.keyword.empty()) throw RenderError("range() takes no keyword arguments");
  BoundArguments bound("range", arguments, {"start", "stop", "step"}, 1);
  int64_t start = 0, stop = bound.integer(0, 0), step = 1;
  if (bound.has(1)) {
    start = stop;
    stop = bound.integer(1, 0);
    step = bound.integer(2, 1);
  }
  if (step == 0) throw RenderError("range() arg 3 must not be zero");
  // Count without overflow: the span can exceed int64 when start and stop have opposite signs.
  __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  __int128 stride = step > 0 ? step : -static_cast<__int128>(step);
  __int128 count = span <= 0 ? 0 : (span + stride - 1) / stride;
  if (count > static_cast<__int128>(kMaxValueBytes / sizeof(Value))) throw RenderError("range() is too long");
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(count));
  for (__int128 i = 0; i < count; ++i) items.emplace_back(static_cast<int64_t>(start + i * step));
  return Value::list(std::move(items));
}

// dict(mapping_or_pairs, **entries) and namespace(mapping, **attributes) build the same way.
std::shared_ptr<Dict> build_dict(std::string_view function, const Arguments& arguments) {
  if (arguments.positional.size() > 1)
    throw RenderError(str_cat(function, "() expected at most 1 positional argument, got ", arguments.positional.size()));
  auto dict = std::make_shared<Dict>();
  if (!arguments.positional.empty()) {
    const Value& source = arguments.positional[0];
    if (source.is_dict() && !source.is_namespace()) {
      dict->entries = source.as_dict().entries;
    } else if (source.is_list()) {
      for (const Value& pair : source.as_list().items) {
        if (!pair.is_list() || pair.as_list().items.size() != 2)
          throw RenderError(str_cat(function, "(): each item must be a (key, value) pair"));
        dict->set(pair.as_list().items[0], pair.as_list().items[1]);
      }
    } else {
      throw RenderError(str_cat(function, "(): '", type_name(source), "' object is not a mapping"));
    }
  }
  for (const auto& [name, value] : arguments.keyword) dict->set(Value(name), value);
  return dict;
}

Value dict_function(Interpreter&, const Arguments& arguments) { return Value(build_dict("dict", arguments)); }

Value namespace_function(Interpreter& interpreter, const Arguments& arguments) {
  auto dict = build_dict("namespace", arguments);
  dict->is_namespace = true;
  Value value(std::move(dict));
  interpreter.keep_for_cleanup(value);  // {% set ns.self = ns %} is legal
  return value;
}

// The template's own message, unchanged, so that the server can show it to the user.
Value raise_exception_function(Interpreter&, const Arguments& arguments) {
  BoundArguments bound("raise_exception", arguments, {"message"}, 1);
  throw Error(to_string(bound[0]));
}

Value strftime_now_function(Interpreter&, const Arguments& arguments) {
  BoundArguments bound("strftime_now", arguments, {"format"}, 1);
  std::string format = bound.string(0, {});
  if (format.empty()) return Value("");
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  // strftime reports 0 both for "too small" and for an empty result; grow a few times, then give up.
  for (size_t size = 256; size <= 65536; size *= 4) {
    std::string out(size, '\0');
    size_t length = std::strftime(out.data(), out.size(), format.c_str(), &local);
    if (length > 0) {
      out.resize(length);
      return Value(std::move(out));
    }
  }
  return Value("");
}

std::pair<std::string, Value> global(std::string_view name, BuiltinFunction::Function function) {
  return {std::string(name), Value(std::shared_ptr<const Callable>(std::make_shared<BuiltinFunction>(name, function)))};
}

}  // namespace

const std::vector<std::pair<std::string, Value>>& global_functions() {
  static const std::vector<std::pair<std::string, Value>> kGlobals = {
      global("range", range_function),
      global("dict", dict_function),
      global("namespace", namespace_function),
      global("raise_exception", raise_exception_function),
      global("strftime_now", strftime_now_function),
  };
  return kGlobals;
}

}  // namespace dsinfer::jinja
