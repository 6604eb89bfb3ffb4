// Python semantics of the template operators: arithmetic (+ - * / // % **), comparison, `in`,
// and unary minus and plus. Integers are 64-bit; where Python would grow a big integer, the
// template fails with an overflow error instead.
#pragma once

#include "jinja/ast.h"
#include "jinja/value.h"

namespace dsinfer::jinja {

// Any BinaryOp but kAnd, kOr and kConcat, which the interpreter handles.
Value arithmetic(BinaryOp op, const Value& left, const Value& right);
bool compare(CompareOp op, const Value& left, const Value& right);
bool contains(const Value& container, const Value& item);  // item in container
Value negate(const Value& value);
Value positive(const Value& value);

}  // namespace dsinfer::jinja
