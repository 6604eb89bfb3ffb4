// Tokenizer throughput on one CPU thread: encode and decode of ~1 MiB of mixed-language text,
// with the word cache on (the default, as in Hugging Face) and off.
//
// The text is the DeepSeek-V3 encode fixture strings (English, European, CJK, Indic, Arabic,
// emoji, code, numbers, white space, special tokens, random Unicode) joined by newlines and
// repeated until it reaches 1 MiB; tools/bench_hf_tokenizer.py builds the same text for the anchor.
// Each figure is the median of several timed runs after one untimed run, so with the cache on it
// is warm: the repeated text makes hits likelier than in fresh prose, hence the uncached figure
// next to it. Runs are timed by the thread's CPU clock, not the wall clock, so that other work on
// a shared machine does not count (both sides are measured the same way). MB is 10^6 bytes.
//
// From the repository root (the commit comes from --commit, $DSINFER_COMMIT or git):
//   tools/bench_hf_tokenizer.py --out /tmp/hf_anchor.json
//   BUILD/bench/tokenizer_bench --anchor /tmp/hf_anchor.json
#include <time.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "bench/result_file.h"
#include "core/error.h"
#include "core/file.h"
#include "core/json.h"
#include "tokenizer/tokenizer.h"

namespace {

using dsinfer::Error;
using dsinfer::Json;
using dsinfer::tokenizer::Tokenizer;
using dsinfer::tokenizer::TokenizerOptions;

constexpr size_t kTextBytes = 1 << 20;
constexpr int kRuns = 7;

// The DeepSeek-V3 tokenizer: the build decompresses the repository's tokenizer.json.xz into
// DSINFER_DEEPSEEK_V3_TOKENIZER_DIR (src/tokenizer/CMakeLists.txt); results name it by its place in
// the repository.
constexpr const char* kDefaultModel = DSINFER_DEEPSEEK_V3_TOKENIZER_DIR;
constexpr const char* kDefaultModelName = "tests/fixtures/tokenizers/deepseek-v3";

struct Flags {
  std::string model;  // empty: kDefaultModel
  std::string fixtures = "tests/fixtures/tokenizer/deepseek_v3_encode.json";
  std::string commit;  // empty: bench::git_commit()
  std::string anchor;  // JSON written by tools/bench_hf_tokenizer.py
  std::string out = "bench/results/tokenizer_encode.json";
};

Flags parse_flags(int argc, char** argv) {
  const std::pair<std::string_view, std::string Flags::*> known[] = {
      {"--model", &Flags::model},
      {"--fixtures", &Flags::fixtures},
      {"--commit", &Flags::commit},
      {"--anchor", &Flags::anchor},
      {"--out", &Flags::out}};
  Flags flags;
  for (int i = 1; i < argc; i += 2) {
    std::string_view flag = argv[i];
    auto found = std::find_if(std::begin(known), std::end(known),
                              [&](const auto& entry) { return entry.first == flag; });
    DSINFER_CHECK(found != std::end(known), "unknown flag ", flag,
                  " (--model --fixtures --commit --anchor --out)");
    DSINFER_CHECK(i + 1 < argc, flag, " needs a value");
    flags.*(found->second) = argv[i + 1];
  }
  return flags;
}

std::string benchmark_text(const std::string& fixtures) {
  Json cases = Json::parse(dsinfer::read_file(fixtures));
  std::string text;
  while (text.size() < kTextBytes) {
    for (const Json& item : cases.as_array()) {
      text += item.find("text")->as_string();
      text += '\n';
    }
  }
  return text;
}

double thread_cpu_seconds() {
  timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// Median thread CPU seconds of kRuns calls of work(), after one untimed call.
template <typename Work>
double median_seconds(Work work) {
  work();
  std::vector<double> seconds;
  for (int run = 0; run < kRuns; ++run) {
    double start = thread_cpu_seconds();
    work();
    seconds.push_back(thread_cpu_seconds() - start);
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[kRuns / 2];
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Flags flags = parse_flags(argc, argv);
    std::string text = benchmark_text(flags.fixtures);
    double megabytes = static_cast<double>(text.size()) / 1e6;

    const std::string model = flags.model.empty() ? kDefaultModel : flags.model;
    Tokenizer cached = Tokenizer::from_dir(model);
    Tokenizer uncached = Tokenizer::from_dir(model, TokenizerOptions{.word_cache_capacity = 0});
    std::vector<int32_t> ids;
    double encode_s = median_seconds([&] { ids = cached.encode(text); });
    double encode_uncached_s = median_seconds([&] { uncached.encode(text); });
    std::string decoded;
    double decode_s = median_seconds([&] { decoded = cached.decode(ids); });
    DSINFER_CHECK(decoded == text, "decode(encode(text)) differs from the text");

    Json result = Json::object();
    result["benchmark"] = "tokenizer_encode";
    if (!flags.commit.empty()) result["commit"] = flags.commit;
    Json& config = result["config"];
    config["tokenizer"] = flags.model.empty() ? kDefaultModelName : flags.model;
    config["text"] = "deepseek_v3_encode.json fixture strings, newline-joined, repeated to 1 MiB";
    config["text_bytes"] = static_cast<int64_t>(text.size());
    config["tokens"] = static_cast<int64_t>(ids.size());
    config["threads"] = 1;
    config["runs"] = kRuns;
    config["statistic"] = "median after one warm-up run";
    config["timer"] = "thread CPU time (CLOCK_THREAD_CPUTIME_ID)";
    config["word_cache"] =
        "on (10000 words, warm after the warm-up run); encode_uncached_mb_per_s: off";
    Json& figures = result["figures"];
    figures["encode_mb_per_s"] = megabytes / encode_s;
    figures["encode_uncached_mb_per_s"] = megabytes / encode_uncached_s;
    figures["decode_mb_per_s"] = megabytes / decode_s;
    figures["tokens_per_s"] = static_cast<double>(ids.size()) / encode_s;
    if (!flags.anchor.empty()) result["anchor"] = Json::parse(dsinfer::read_file(flags.anchor));

    dsinfer::bench::write_result(flags.out, result);
    std::cout << dsinfer::read_file(flags.out);
    return 0;
  } catch (const Error& error) {
    std::cerr << "tokenizer_bench: " << error.what() << "\n";
    return 1;
  }
}
