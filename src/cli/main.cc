// dsinfer: one binary, a few verbs (docs/architecture.md).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli/verbs.h"
#include "cli/version.h"
#include "core/allocator.h"
#include "core/error.h"

namespace {

constexpr const char* kUsage =
    "usage: dsinfer VERB [flags]\n"
    "\n"
    "DeepSeek-V3-architecture inference.\n"
    "\n"
    "verbs:\n"
    "  serve      serve a model over an OpenAI-compatible API (dsinfer serve --help)\n"
    "  generate   generate text from a prompt (dsinfer generate --help)\n"
    "  tokenize   encode text or a chat, or decode ids (dsinfer tokenize --help)\n"
    "  eval       held-out accuracy on checkable tasks (dsinfer eval --help)\n"
    "  bench      benchmark a server: dsinfer bench serve (dsinfer bench serve --help)\n"
    "  quantize   write a W4A8 (int4 routed experts) copy of a checkpoint (dsinfer quantize --help)\n"
    "  router     route requests to prefill and decode instances (dsinfer router --help)\n"
    "\n"
    "dsinfer --version prints the version and the commit this binary was built from.\n";

struct Verb {
  const char* name;
  int (*run)(int, char**);
};

constexpr Verb kVerbs[] = {
    {"serve", dsinfer::cli::run_serve},
    {"generate", dsinfer::cli::run_generate},
    {"tokenize", dsinfer::cli::run_tokenize},
    {"eval", dsinfer::cli::run_eval},
    {"bench", dsinfer::cli::run_bench},
    {"quantize", dsinfer::cli::run_quantize},
    {"router", dsinfer::cli::run_router},
};

}  // namespace

int main(int argc, char** argv) {
  dsinfer::keep_freed_memory();
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 1 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0) {
    std::printf("dsinfer %s (commit %s)\n", dsinfer::cli::kVersion, dsinfer::cli::kCommit);
    return 0;
  }
  for (const Verb& verb : kVerbs) {
    if (std::strcmp(argv[1], verb.name) != 0) continue;
    try {
      return verb.run(argc - 2, argv + 2);
    } catch (const std::exception& error) {
      std::string message = error.what();
      for (char& c : message)
        if (c == '\n') c = ' ';
      std::fprintf(stderr, "dsinfer %s: %s\n", verb.name, message.c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "dsinfer: unknown verb '%s' (see dsinfer --help)\n", argv[1]);
  return 1;
}
