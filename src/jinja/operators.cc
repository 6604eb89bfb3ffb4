#include "jinja/operators.h"

#include <cmath>
#include <limits>

#include "jinja/limits.h"

namespace dsinfer::jinja {
namespace {

std::string_view symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "+";
    case BinaryOp::kSubtract: return "-";
    case BinaryOp::kMultiply: return "*";
    case BinaryOp::kDivide: return "/";
    case BinaryOp::kFloorDivide: return "//";
    case BinaryOp::kModulo: return "%";
    case BinaryOp::kPower: return "**";
    default: return "?";
  }
}

[[noreturn]] void fail_operands(BinaryOp op, const Value& left, const Value& right) {
  if (op == BinaryOp::kAdd && (left.is_string() || left.is_list()))
    throw RenderError(str_cat("can only concatenate ", type_name(left), " (not \"", type_name(right), "\") to ",
                              type_name(left)));
  if (op == BinaryOp::kModulo && left.is_string())
    throw RenderError("printf-style formatting with '%' is not supported; use str.format or ~");
  throw RenderError(str_cat("unsupported operand type(s) for ", symbol(op), ": '", type_name(left), "' and '",
                            type_name(right), "'"));
}

[[noreturn]] void fail_overflow() { throw RenderError("integer overflow (beyond 64 bits)"); }

int64_t add_checked(int64_t a, int64_t b) {
  int64_t result;
  if (__builtin_add_overflow(a, b, &result)) fail_overflow();
  return result;
}

int64_t subtract_checked(int64_t a, int64_t b) {
  int64_t result;
  if (__builtin_sub_overflow(a, b, &result)) fail_overflow();
  return result;
}

int64_t multiply_checked(int64_t a, int64_t b) {
  int64_t result;
  if (__builtin_mul_overflow(a, b, &result)) fail_overflow();
  return result;
}

// Python's float // and %: the quotient is floored and the remainder takes the divisor's sign.
void float_divmod(double x, double y, double* quotient, double* remainder) {
  if (y == 0.0) throw RenderError("float division by zero");
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  double floor_div;
  if (div != 0.0) {
    floor_div = std::floor(div);
    if (div - floor_div > 0.5) floor_div += 1.0;
  } else {
    floor_div = std::copysign(0.0, x / y);
  }
  *quotient = floor_div;
  *remainder = mod;
}

Value repeat(const Value& sequence, int64_t times) {
  times = std::max<int64_t>(times, 0);
  if (sequence.is_string()) {
    const std::string& text = sequence.as_string();
    if (!text.empty() && static_cast<uint64_t>(times) > kMaxValueBytes / text.size())
      throw RenderError("repeated string would be too large");
    size_t size = text.size() * static_cast<size_t>(times);
    if (size == 0) return Value("");
    std::string out = text;
    out.reserve(size);
    while (out.size() * 2 <= size) out += out;  // doubling: log(times) copies
    out.append(out, 0, size - out.size());
    return Value(std::move(out));
  }
  const List& list = sequence.as_list();
  if (!list.items.empty() && static_cast<uint64_t>(times) > kMaxValueBytes / sizeof(Value) / list.items.size())
    throw RenderError("repeated list would be too large");
  std::vector<Value> items;
  items.reserve(list.items.size() * static_cast<size_t>(times));
  for (int64_t i = 0; i < times; ++i) items.insert(items.end(), list.items.begin(), list.items.end());
  return list.is_tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
}

Value integer_power(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = multiply_checked(result, base);
    exponent >>= 1;
    if (exponent > 0) base = multiply_checked(base, base);
  }
  return Value(result);
}

Value number_arithmetic(BinaryOp op, const Value& left, const Value& right) {
  bool integral = !left.is_float() && !right.is_float();
  if (integral) {
    int64_t a = left.as_int(), b = right.as_int();
    switch (op) {
      case BinaryOp::kAdd: return Value(add_checked(a, b));
      case BinaryOp::kSubtract: return Value(subtract_checked(a, b));
      case BinaryOp::kMultiply: return Value(multiply_checked(a, b));
      case BinaryOp::kDivide:
        if (b == 0) throw RenderError("division by zero");
        return Value(static_cast<double>(a) / static_cast<double>(b));
      case BinaryOp::kFloorDivide:
      case BinaryOp::kModulo: {
        if (b == 0) throw RenderError("integer division or modulo by zero");
        if (a == std::numeric_limits<int64_t>::min() && b == -1) fail_overflow();
        int64_t quotient = a / b, remainder = a % b;
        if (remainder != 0 && ((remainder < 0) != (b < 0))) {
          --quotient;
          remainder += b;
        }
        return Value(op == BinaryOp::kFloorDivide ? quotient : remainder);
      }
      case BinaryOp::kPower:
        if (b >= 0) return integer_power(a, b);
        if (a == 0) throw RenderError("0.0 cannot be raised to a negative power");
        return Value(std::pow(static_cast<double>(a), static_cast<double>(b)));
      default: break;
    }
  }
  double a = left.as_float(), b = right.as_float();
  switch (op) {
    case BinaryOp::kAdd: return Value(a + b);
    case BinaryOp::kSubtract: return Value(a - b);
    case BinaryOp::kMultiply: return Value(a * b);
    case BinaryOp::kDivide:
      if (b == 0.0) throw RenderError("float division by zero");
      return Value(a / b);
    case BinaryOp::kFloorDivide:
    case BinaryOp::kModulo: {
      double quotient, remainder;
      float_divmod(a, b, &quotient, &remainder);
      return Value(op == BinaryOp::kFloorDivide ? quotient : remainder);
    }
    case BinaryOp::kPower: {
      if (a == 0.0 && b < 0) throw RenderError("0.0 cannot be raised to a negative power");
      if (a < 0 && b != std::floor(b)) throw RenderError("a negative number to a fractional power is complex");
      return Value(std::pow(a, b));
    }
    default: break;
  }
  fail_operands(op, left, right);
}

}  // namespace

Value arithmetic(BinaryOp op, const Value& left, const Value& right) {
  if (left.is_undefined()) fail_undefined(left);
  if (right.is_undefined()) fail_undefined(right);
  if (left.is_number() && right.is_number()) return number_arithmetic(op, left, right);
  if (op == BinaryOp::kAdd) {
    if (left.is_string() && right.is_string()) {
      if (left.as_string().size() + right.as_string().size() > kMaxValueBytes)
        throw RenderError("concatenated string would be too large");
      return Value(left.as_string() + right.as_string());
    }
    if (left.is_list() && right.is_list() && left.is_tuple() == right.is_tuple()) {
      std::vector<Value> items = left.as_list().items;
      const auto& more = right.as_list().items;
      items.insert(items.end(), more.begin(), more.end());
      return left.is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
  }
  if (op == BinaryOp::kMultiply) {
    bool left_sequence = left.is_string() || left.is_list();
    bool right_sequence = right.is_string() || right.is_list();
    if (left_sequence && (right.is_int() || right.is_bool())) return repeat(left, right.as_int());
    if (right_sequence && (left.is_int() || left.is_bool())) return repeat(right, left.as_int());
  }
  fail_operands(op, left, right);
}

bool compare(CompareOp op, const Value& left, const Value& right) {
  switch (op) {
    case CompareOp::kEqual: return equals(left, right);
    case CompareOp::kNotEqual: return !equals(left, right);
    case CompareOp::kLess: return less(left, right);
    case CompareOp::kLessEqual: return less(left, right) || equals(left, right);
    case CompareOp::kGreater: return less(right, left);
    case CompareOp::kGreaterEqual: return less(right, left) || equals(left, right);
    case CompareOp::kIn: return contains(right, left);
    case CompareOp::kNotIn: return !contains(right, left);
  }
  return false;
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string())
      throw RenderError(str_cat("'in <string>' requires string as left operand, not ", type_name(item)));
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& element : container.as_list().items)
      if (equals(element, item)) return true;
    return false;
  }
  if (container.is_dict() && !container.is_namespace()) return container.as_dict().find(item) != nullptr;
  if (container.is_undefined()) return false;  // iterates as empty
  throw RenderError(str_cat("argument of type '", type_name(container), "' is not iterable"));
}

Value negate(const Value& value) {
  if (value.is_float()) return Value(-value.as_float());
  if (value.is_int() || value.is_bool()) {
    if (value.as_int() == std::numeric_limits<int64_t>::min()) fail_overflow();
    return Value(-value.as_int());
  }
  if (value.is_undefined()) fail_undefined(value);
  throw RenderError(str_cat("bad operand type for unary -: '", type_name(value), "'"));
}

Value positive(const Value& value) {
  if (value.is_float()) return value;
  if (value.is_int() || value.is_bool()) return Value(value.as_int());
  if (value.is_undefined()) fail_undefined(value);
  throw RenderError(str_cat("bad operand type for unary +: '", type_name(value), "'"));
}

}  // namespace dsinfer::jinja
