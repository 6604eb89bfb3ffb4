// The process_* metrics that prometheus_client exports from every Python server (vLLM's /metrics
// has them), read from /proc/self: memory, CPU time, file descriptors, start time. Dashboards and
// alerts on a worker's memory or leaked descriptors then read dsinfer as they read vLLM.
#pragma once

#include <optional>
#include <string_view>

namespace dsinfer::server {

struct ProcessStats {
  double resident_memory_bytes = 0;
  double virtual_memory_bytes = 0;
  double cpu_seconds = 0;         // user + system
  double start_time_seconds = 0;  // Unix time
  double open_fds = 0;
  double max_fds = 0;             // the soft limit
};

// nullopt where /proc cannot be read (not Linux, or not mounted): /metrics then leaves them out.
std::optional<ProcessStats> read_process_stats();

// The parts of read_process_stats that parse /proc's text (for tests). `stat` is /proc/self/stat;
// `ticks_per_second` and `page_bytes` from sysconf; `boot_time` is /proc/stat's btime.
// nullopt when the text is not what Linux writes.
std::optional<ProcessStats> parse_proc_stat(std::string_view stat, double ticks_per_second, double page_bytes,
                                            double boot_time);
std::optional<double> parse_boot_time(std::string_view proc_stat);

}  // namespace dsinfer::server
