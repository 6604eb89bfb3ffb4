// The logger: the one piece of global state. Lines go to stderr with a level tag.
#pragma once

#include <string_view>

#include "core/error.h"

namespace dsinfer {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kOff = 4 };

void set_log_level(LogLevel level);  // default from DSINFER_LOG_LEVEL (debug|info|warning|error|off), else info
LogLevel log_level();
void log_line(LogLevel level, std::string_view message);

template <typename... Args>
void log_info(Args&&... args) {
  if (log_level() <= LogLevel::kInfo) log_line(LogLevel::kInfo, str_cat(std::forward<Args>(args)...));
}
template <typename... Args>
void log_warning(Args&&... args) {
  if (log_level() <= LogLevel::kWarning) log_line(LogLevel::kWarning, str_cat(std::forward<Args>(args)...));
}
template <typename... Args>
void log_debug(Args&&... args) {
  if (log_level() <= LogLevel::kDebug) log_line(LogLevel::kDebug, str_cat(std::forward<Args>(args)...));
}

}  // namespace dsinfer
