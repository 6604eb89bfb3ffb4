#include "server/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/strings.h"

namespace dsinfer::server {
namespace {

std::optional<std::string> read_text(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::optional<ProcessStats> parse_proc_stat(std::string_view stat, double ticks_per_second, double page_bytes,
                                            double boot_time) {
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so the fields start after the
  // last ')'. Counting from state as field 3 (proc(5)): utime 14, stime 15, starttime 22, vsize 23, rss 24.
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::vector<std::string> fields;
  std::istringstream rest{std::string(stat.substr(close + 1))};
  for (std::string field; rest >> field;) fields.push_back(field);
  if (fields.size() < 22) return std::nullopt;
  auto field = [&](int number, double* out) { return parse_double(fields[number - 3], out); };
  double utime = 0, stime = 0, start_ticks = 0, vsize = 0, rss_pages = 0;
  if (!field(14, &utime) || !field(15, &stime) || !field(22, &start_ticks) || !field(23, &vsize) ||
      !field(24, &rss_pages))
    return std::nullopt;
  ProcessStats stats;
  stats.cpu_seconds = (utime + stime) / ticks_per_second;
  stats.start_time_seconds = boot_time + start_ticks / ticks_per_second;
  stats.virtual_memory_bytes = vsize;
  stats.resident_memory_bytes = rss_pages * page_bytes;
  return stats;
}

std::optional<double> parse_boot_time(std::string_view proc_stat) {
  for (const std::string& line : split(proc_stat, '\n')) {
    if (!line.starts_with("btime ")) continue;
    double seconds = 0;
    if (parse_double(trim(std::string_view(line).substr(6)), &seconds)) return seconds;
  }
  return std::nullopt;
}

std::optional<ProcessStats> read_process_stats() {
  std::optional<std::string> stat = read_text("/proc/self/stat");
  std::optional<std::string> system = read_text("/proc/stat");
  if (!stat || !system) return std::nullopt;
  std::optional<double> boot_time = parse_boot_time(*system);
  if (!boot_time) return std::nullopt;
  std::optional<ProcessStats> stats = parse_proc_stat(*stat, static_cast<double>(sysconf(_SC_CLK_TCK)),
                                                      static_cast<double>(sysconf(_SC_PAGESIZE)), *boot_time);
  if (!stats) return std::nullopt;
  std::error_code error;
  size_t open = 0;
  for (std::filesystem::directory_iterator entry("/proc/self/fd", error), end; !error && entry != end;
       entry.increment(error))
    ++open;
  // The directory's own descriptor, open while it is listed, is not the process's.
  stats->open_fds = open > 0 ? static_cast<double>(open - 1) : 0.0;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) stats->max_fds = static_cast<double>(limit.rlim_cur);
  return stats;
}

}  // namespace dsinfer::server
