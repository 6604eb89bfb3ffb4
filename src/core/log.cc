#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace dsinfer {
namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("DSINFER_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  if (std::strcmp(env, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(env, "warning") == 0) return LogLevel::kWarning;
  if (std::strcmp(env, "error") == 0) return LogLevel::kError;
  if (std::strcmp(env, "off") == 0) return LogLevel::kOff;
  return LogLevel::kInfo;
}

std::atomic<int>& level_slot() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

std::mutex g_write_mutex;

}  // namespace

void set_log_level(LogLevel level) { level_slot().store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(level_slot().load(std::memory_order_relaxed)); }

void log_line(LogLevel level, std::string_view message) {
  static constexpr const char* kTags[] = {"debug", "info", "warning", "error"};
  std::lock_guard<std::mutex> lock(g_write_mutex);
  std::fprintf(stderr, "[dsinfer %s] %.*s\n", kTags[static_cast<int>(level)],
               static_cast<int>(message.size()), message.data());
}

}  // namespace dsinfer
