// Small string utilities shared by every layer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dsinfer {

std::vector<std::string> split(std::string_view text, char separator);
std::string_view trim(std::string_view text);
std::string join(const std::vector<std::string>& parts, std::string_view separator);
// "1,2,3" -> {1, 2, 3}; throws dsinfer::Error naming `what` on a malformed list.
std::vector<int32_t> parse_int_list(std::string_view text, std::string_view what);
// Parses a whole string as a number; false when it is not one.
bool parse_int64(std::string_view text, int64_t* out);
bool parse_double(std::string_view text, double* out);

}  // namespace dsinfer
