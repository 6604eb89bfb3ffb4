// Runtime values of the template engine.
//
// Chat templates are written against jinja2 running in Python, so values behave like Python's:
// None, bool, int, float, str, list, tuple and dict, plus jinja2's Undefined (a missing variable,
// key or attribute), namespace() objects, the `loop` object of a for loop, and callables (macros,
// built-in functions, bound methods). Strings are immutable and shared; lists, dicts and namespaces
// are shared by reference like Python objects, so a list appended to through one name changes for
// every name bound to it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/error.h"
#include "core/json.h"

namespace dsinfer::jinja {

class Interpreter;
class Value;
struct List;
struct Dict;
struct Loop;

// An error while rendering. The interpreter adds the template line before it leaves the engine.
class RenderError : public Error {
 public:
  using Error::Error;
};

// Positional and keyword arguments of a call, a filter or a test.
struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Built-in filters (`x|trim`) and tests (`x is defined`).
using FilterFunction = Value (*)(const Value& input, const Arguments& arguments);
using TestFunction = bool (*)(const Value& input, const Arguments& arguments);

class Callable {
 public:
  virtual ~Callable() = default;
  virtual std::string_view name() const = 0;
  virtual Value call(Interpreter& interpreter, Arguments arguments) const = 0;
};

class Value {
 public:
  // Variant order; kind() relies on it.
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kLoop, kCallable };

  Value() = default;  // undefined
  Value(bool value) : data_(value) {}
  Value(int value) : data_(static_cast<int64_t>(value)) {}
  Value(int64_t value) : data_(value) {}
  Value(double value) : data_(value) {}
  Value(const char* value) : Value(std::string(value)) {}
  Value(std::string_view value) : Value(std::string(value)) {}
  Value(std::string value) : data_(std::make_shared<const std::string>(std::move(value))) {}
  Value(std::shared_ptr<List> value) : data_(std::move(value)) {}
  Value(std::shared_ptr<Dict> value) : data_(std::move(value)) {}
  Value(std::shared_ptr<Loop> value) : data_(std::move(value)) {}
  Value(std::shared_ptr<const Callable> value) : data_(std::move(value)) {}
  // No silent conversions from other integer or pointer types.
  template <typename T>
  Value(T) = delete;

  // `hint` is the message of the error raised if the undefined value is used ("'x' is undefined").
  static Value undefined(std::string hint);
  static Value none() { return Value(Tag::kNone); }
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  static Value dict();

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  // Python numbers: bool counts, as it does in Python arithmetic.
  bool is_number() const { return kind() == Kind::kBool || kind() == Kind::kInt || kind() == Kind::kFloat; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }  // list or tuple
  bool is_dict() const { return kind() == Kind::kDict; }  // dict or namespace
  bool is_loop() const { return kind() == Kind::kLoop; }
  bool is_callable() const { return kind() == Kind::kCallable; }
  bool is_tuple() const;
  bool is_namespace() const;

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;   // int or bool
  double as_float() const;  // any number
  const std::string& as_string() const { return *std::get<StringPtr>(data_); }
  List& as_list() const { return *std::get<std::shared_ptr<List>>(data_); }
  Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(data_); }
  Loop& as_loop() const { return *std::get<std::shared_ptr<Loop>>(data_); }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<const Callable>>(data_); }
  const std::shared_ptr<List>& list_ptr() const { return std::get<std::shared_ptr<List>>(data_); }
  const std::shared_ptr<Dict>& dict_ptr() const { return std::get<std::shared_ptr<Dict>>(data_); }
  const std::string& undefined_hint() const;

  // The same object (Python's `is`), for reference kinds; equal scalars otherwise.
  bool same_object(const Value& other) const;

 private:
  enum class Tag { kNone };
  using StringPtr = std::shared_ptr<const std::string>;
  struct Undefined {
    std::shared_ptr<const std::string> hint;
  };
  explicit Value(Tag) : data_(std::monostate{}) {}

  std::variant<Undefined, std::monostate, bool, int64_t, double, StringPtr, std::shared_ptr<List>,
               std::shared_ptr<Dict>, std::shared_ptr<Loop>, std::shared_ptr<const Callable>>
      data_;
};

struct List {
  std::vector<Value> items;
  bool is_tuple = false;
};

// Insertion-ordered, like Python's dict; keys compare with Python equality. Lookup is linear,
// which suits chat messages and tool schemas.
struct Dict {
  std::vector<std::pair<Value, Value>> entries;
  bool is_namespace = false;  // a namespace(): attributes assignable with {% set ns.x = ... %}

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
};

// A running for loop, read through loop.index, loop.last, loop.previtem, ...
struct Loop {
  std::vector<Value> items;
  size_t index = 0;  // of the current item
};

bool truthy(const Value& value);
std::string to_string(const Value& value);          // Python str()
void append_string(std::string& out, const Value& value);
std::string repr(const Value& value);               // Python repr()
bool equals(const Value& a, const Value& b);        // Python ==
bool less(const Value& a, const Value& b);          // Python <; RenderError when not comparable
std::string_view type_name(const Value& value);     // "str", "dict", "NoneType", ...
// Python's list(value): the items of a list or tuple, the keys of a dict, the characters of a
// string; undefined iterates as empty. RenderError for anything else.
std::vector<Value> iterate(const Value& value);
// Throws the error an undefined value raises when it is used as more than a blank.
[[noreturn]] void fail_undefined(const Value& value);

// JSON data (the messages and the extra context) as template values.
Value from_json(const Json& json);

}  // namespace dsinfer::jinja
