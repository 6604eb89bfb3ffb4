#include "jinja/predicates.h"

#include "jinja/arguments.h"
#include "jinja/operators.h"
#include "jinja/python_str.h"

namespace dsinfer::jinja {
namespace {

struct NamedTest {
  std::string_view name;
  TestFunction function;
};

// Tests of the value alone.
template <bool (*kCheck)(const Value&)>
bool unary_test(const Value& input, const Arguments& arguments) {
  BoundArguments bound("test", arguments, {});
  return kCheck(input);
}

// Tests comparing the value with one argument: `x is eq 3`, `x is in list`.
template <CompareOp kOp>
bool comparison_test(const Value& input, const Arguments& arguments) {
  BoundArguments bound("test", arguments, {"other"}, 1);
  return compare(kOp, input, bound[0]);
}

int64_t integer_operand(const Value& input, std::string_view test) {
  if (input.is_undefined()) fail_undefined(input);
  if (!input.is_int() && !input.is_bool())
    throw RenderError(str_cat("'", test, "' test needs an integer, not ", type_name(input)));
  return input.as_int();
}

bool is_odd(const Value& input) { return integer_operand(input, "odd") % 2 != 0; }
bool is_even(const Value& input) { return integer_operand(input, "even") % 2 == 0; }

bool divisible_test(const Value& input, const Arguments& arguments) {
  BoundArguments bound("divisibleby", arguments, {"num"}, 1);
  int64_t divisor = bound.integer(0, 1);
  if (divisor == 0) throw RenderError("integer division or modulo by zero");
  return integer_operand(input, "divisibleby") % divisor == 0;
}

bool sameas_test(const Value& input, const Arguments& arguments) {
  BoundArguments bound("sameas", arguments, {"other"}, 1);
  const Value& other = bound[0];
  // Python's `is`: None, booleans and small ints are singletons; other values are objects.
  if (input.is_none() || other.is_none() || input.is_bool() || other.is_bool())
    return input.kind() == other.kind() && equals(input, other);
  return input.same_object(other);
}

bool string_case_test(const Value& input, bool upper) {
  std::string text = to_string(input);
  return upper ? is_upper(text) : is_lower(text);
}

constexpr NamedTest kTests[] = {
    {"defined", unary_test<[](const Value& v) { return !v.is_undefined(); }>},
    {"undefined", unary_test<[](const Value& v) { return v.is_undefined(); }>},
    {"none", unary_test<[](const Value& v) { return v.is_none(); }>},
    {"boolean", unary_test<[](const Value& v) { return v.is_bool(); }>},
    {"true", unary_test<[](const Value& v) { return v.is_bool() && v.as_bool(); }>},
    {"false", unary_test<[](const Value& v) { return v.is_bool() && !v.as_bool(); }>},
    {"integer", unary_test<[](const Value& v) { return v.is_int(); }>},
    {"float", unary_test<[](const Value& v) { return v.is_float(); }>},
    {"number", unary_test<[](const Value& v) { return v.is_number(); }>},
    {"string", unary_test<[](const Value& v) { return v.is_string(); }>},
    {"mapping", unary_test<[](const Value& v) { return v.is_dict() && !v.is_namespace(); }>},
    // Undefined counts: jinja2's Undefined has __iter__ and __len__.
    {"iterable", unary_test<[](const Value& v) {
       return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace()) || v.is_loop();
     }>},
    {"sequence", unary_test<[](const Value& v) {
       return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace());
     }>},
    {"callable", unary_test<[](const Value& v) { return v.is_callable(); }>},
    {"escaped", unary_test<[](const Value&) { return false; }>},
    {"lower", unary_test<[](const Value& v) { return string_case_test(v, false); }>},
    {"upper", unary_test<[](const Value& v) { return string_case_test(v, true); }>},
    {"odd", unary_test<is_odd>},
    {"even", unary_test<is_even>},
    {"divisibleby", divisible_test},
    {"sameas", sameas_test},
    {"in", comparison_test<CompareOp::kIn>},
    {"eq", comparison_test<CompareOp::kEqual>},
    {"equalto", comparison_test<CompareOp::kEqual>},
    {"==", comparison_test<CompareOp::kEqual>},
    {"ne", comparison_test<CompareOp::kNotEqual>},
    {"!=", comparison_test<CompareOp::kNotEqual>},
    {"lt", comparison_test<CompareOp::kLess>},
    {"lessthan", comparison_test<CompareOp::kLess>},
    {"<", comparison_test<CompareOp::kLess>},
    {"le", comparison_test<CompareOp::kLessEqual>},
    {"<=", comparison_test<CompareOp::kLessEqual>},
    {"gt", comparison_test<CompareOp::kGreater>},
    {"greaterthan", comparison_test<CompareOp::kGreater>},
    {">", comparison_test<CompareOp::kGreater>},
    {"ge", comparison_test<CompareOp::kGreaterEqual>},
    {">=", comparison_test<CompareOp::kGreaterEqual>},
};

}  // namespace

TestFunction find_test(std::string_view name) {
  for (const NamedTest& test : kTests)
    if (test.name == name) return test.function;
  return nullptr;
}

}  // namespace dsinfer::jinja
