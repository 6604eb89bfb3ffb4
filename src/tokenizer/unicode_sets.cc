#include "tokenizer/unicode_sets.h"

namespace dsinfer::tokenizer {
namespace {

struct UnicodeSet {
  std::string_view name;
  std::string_view items;
};

constexpr UnicodeSet kSets[] = {
#include "tokenizer/unicode_sets.inc"
};

}  // namespace

std::string_view unicode_set(std::string_view name) {
  for (const UnicodeSet& set : kSets) {
    if (set.name == name) return set.items;
  }
  return {};
}

}  // namespace dsinfer::tokenizer
