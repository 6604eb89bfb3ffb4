// The built-in filters, `value|name(arguments)`: jinja2's set as chat templates use it, with
// `tojson` as transformers overrides it (json.dumps with ensure_ascii=False and no HTML escaping).
#pragma once

#include <span>
#include <string_view>

#include "jinja/value.h"

namespace dsinfer::jinja {

// nullptr when there is no filter of that name.
FilterFunction find_filter(std::string_view name);

struct NamedFilter {
  std::string_view name;
  FilterFunction function;
};
// The table, in two halves: filters of text and numbers, and filters of sequences.
std::span<const NamedFilter> text_filters();
std::span<const NamedFilter> sequence_filters();

}  // namespace dsinfer::jinja
