#include "step_breakdown.h"  // bench/gpu/, next to this file

#include <algorithm>
#include <cstdio>
#include <map>

namespace dsinfer::bench {

StepBreakdown fold_kernels(const std::vector<KernelRecord>& records) {
  StepBreakdown out;
  if (records.empty()) return out;
  std::map<std::string, KernelShare> by_name;
  double first = records.front().start_us, frontier = records.front().start_us;
  for (const KernelRecord& r : records) {  // in start order
    first = std::min(first, r.start_us);
    const double charge = std::max(0.0, r.end_us - std::max(r.start_us, frontier));
    frontier = std::max(frontier, r.end_us);
    KernelShare& share = by_name[r.name];
    share.name = r.name;
    share.us += charge;
    share.calls += 1;
    out.busy_us += charge;
  }
  out.span_us = frontier - first;
  for (auto& [name, share] : by_name) out.kernels.push_back(share);
  std::sort(out.kernels.begin(), out.kernels.end(),
            [](const KernelShare& a, const KernelShare& b) { return a.us > b.us; });
  return out;
}

Json breakdown_json(const StepBreakdown& breakdown) {
  Json out;
  out["span_us"] = breakdown.span_us;
  out["busy_us"] = breakdown.busy_us;
  Json kernels = Json::array();
  for (const KernelShare& k : breakdown.kernels) {
    Json entry;
    entry["name"] = k.name;
    entry["us"] = k.us;
    entry["calls"] = k.calls;
    kernels.push_back(entry);
  }
  out["kernels"] = kernels;
  return out;
}

void print_breakdown(const StepBreakdown& breakdown, const std::string& title, int rows) {
  std::printf("\n%s: %.1f us from the first kernel's start to the last one's end, %.1f us with a kernel running\n",
              title.c_str(), breakdown.span_us, breakdown.busy_us);
  std::printf("  %9s %6s %6s  %s\n", "us", "share", "calls", "kernel");
  double rest_us = 0;
  int rest_calls = 0;
  for (size_t i = 0; i < breakdown.kernels.size(); ++i) {
    const KernelShare& k = breakdown.kernels[i];
    if (static_cast<int>(i) >= rows) {
      rest_us += k.us, rest_calls += k.calls;
      continue;
    }
    std::string name = k.name.size() > 100 ? k.name.substr(0, 97) + "..." : k.name;
    std::printf("  %9.1f %5.1f%% %6d  %s\n", k.us, 100 * k.us / breakdown.span_us, k.calls, name.c_str());
  }
  if (rest_calls > 0)
    std::printf("  %9.1f %5.1f%% %6d  (%zu other kernels)\n", rest_us, 100 * rest_us / breakdown.span_us, rest_calls,
                breakdown.kernels.size() - rows);
  std::printf("  %9.1f %5.1f%%         (no kernel running)\n", breakdown.span_us - breakdown.busy_us,
              100 * (breakdown.span_us - breakdown.busy_us) / breakdown.span_us);
}

}  // namespace dsinfer::bench
