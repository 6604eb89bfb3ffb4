#include "bench/result_file.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>

#include "core/file.h"
#include "core/log.h"
#include "core/strings.h"

namespace dsinfer::bench {

std::string gpu_tag(const std::string& device_name, const std::string& unknown) {
  for (const char* kind : {"H200", "H100", "H800", "H20", "B200", "A100"})
    if (device_name.find(kind) != std::string::npos) {
      std::string tag = kind;
      for (char& c : tag) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return tag;
    }
  return unknown;
}

int run_benchmark(const char* name, int (*run)(int, char**), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: %s\n", name, error.what());
    return 1;
  }
}

std::string cpu_device() {
  std::string name = "unknown";
  try {
    for (const std::string& line : split(read_file("/proc/cpuinfo"), '\n')) {
      if (line.rfind("model name", 0) == 0) {
        name = std::string(trim(line.substr(line.find(':') + 1)));
        break;
      }
    }
  } catch (const Error&) {
  }
  return str_cat("cpu: ", name, " (", std::thread::hardware_concurrency(), " threads)");
}

std::string git_commit() {
  if (const char* commit = std::getenv("DSINFER_COMMIT")) return commit;
  std::string out;
  if (FILE* pipe = popen("git rev-parse --short HEAD 2>/dev/null", "r")) {
    char buffer[64];
    while (std::fgets(buffer, sizeof(buffer), pipe)) out += buffer;
    pclose(pipe);
  }
  out = std::string(trim(out));
  return out.empty() ? "unknown" : out;
}

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buffer;
}

void write_result(const std::string& path, Json result) {
  if (!result.contains("device")) result["device"] = cpu_device();
  if (!result.contains("commit")) result["commit"] = git_commit();
  if (!result.contains("date")) result["date"] = utc_now();
  write_file(path, result.dump(2) + "\n");
  log_info("wrote ", path);
}

}  // namespace dsinfer::bench
