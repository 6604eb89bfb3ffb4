// What every benchmark writes next to its figures: where it ran and on which commit.
//
// Each benchmark writes one JSON file under bench/results/ holding
//   {"benchmark", "device", "commit", "date", "config", "figures", "anchor"}
// and the README's performance table is made from those files (tools/results_table.py).
#pragma once

#include <string>

#include "core/json.h"

namespace dsinfer::bench {

// "cpu: <model name> (N threads)" from /proc/cpuinfo.
std::string cpu_device();
// $DSINFER_COMMIT, else `git rev-parse --short HEAD` in the working directory, else "unknown".
std::string git_commit();
// UTC, ISO 8601.
std::string utc_now();
// Adds device/commit/date to `result` (unless set) and writes it, pretty-printed, to `path`.
void write_result(const std::string& path, Json result);
// A result file's GPU name: "h200" for "NVIDIA H200 ..." (also h100, h800, h20, b200, a100), or
// `unknown` for a GPU not listed.
std::string gpu_tag(const std::string& device_name, const std::string& unknown = "gpu");

// A benchmark's main: run(argc, argv), or "NAME: what went wrong" on stderr and status 1.
int run_benchmark(const char* name, int (*run)(int, char**), int argc, char** argv);

}  // namespace dsinfer::bench
