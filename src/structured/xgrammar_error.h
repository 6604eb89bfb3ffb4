// xgrammar's errors as messages for a user: its checks throw std::runtime_error whose what() is
// "[HH:MM:SS] /path/to/file.cc:123: message\n" (a backtrace prefix meant for its developers).
#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace dsinfer::structured {

// The message without the time, source location and failed-check prefixes, on one line.
std::string user_message(std::string_view what);
inline std::string user_message(const std::exception& error) { return user_message(error.what()); }

}  // namespace dsinfer::structured
