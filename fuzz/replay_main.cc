// Runs a fuzz target's entry point once on each input file, without libFuzzer: every build (and
// `make test-sanitize`) thereby keeps the targets compiling and passing their committed corpus.
//
// usage: NAME_replay (DIR | FILE)...   Directories are read one level deep, in name order.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::filesystem::path> inputs_of(int argc, char** argv) {
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path arg = argv[i];
    if (!std::filesystem::is_directory(arg)) {
      inputs.push_back(arg);
      continue;
    }
    for (const auto& entry : std::filesystem::directory_iterator(arg))
      if (entry.is_regular_file()) inputs.push_back(entry.path());
  }
  std::sort(inputs.begin(), inputs.end());
  return inputs;
}

void replay(const std::filesystem::path& input) {
  std::string contents = dsinfer::read_file(input.string());
  // A buffer of exactly the input's size, so that AddressSanitizer sees a read one past the end.
  auto bytes = std::make_unique<uint8_t[]>(contents.size());
  std::copy(contents.begin(), contents.end(), bytes.get());
  std::fprintf(stderr, "replay %s (%zu bytes)\n", input.c_str(), contents.size());
  LLVMFuzzerTestOneInput(bytes.get(), contents.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s (CORPUS_DIR | FILE)...\n", argv[0]);
    return 2;
  }
  std::vector<std::filesystem::path> inputs = inputs_of(argc, argv);
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs found (wrong corpus path?)\n");
    return 1;
  }
  for (const auto& input : inputs) replay(input);
  std::printf("replayed %zu inputs\n", inputs.size());
  return 0;
}
