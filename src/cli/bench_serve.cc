// dsinfer bench serve: the load generator, against any OpenAI-compatible server. Flags are those of
// `vllm bench serve` where it has one; the parts (workload, SSE, metrics, the HTTP driver, the
// max-QPM search, the server's speculative decoding counters) live in src/loadgen/.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/result_file.h"
#include "cli/flags.h"
#include "cli/verbs.h"
#include "core/error.h"
#include "core/json.h"
#include "loadgen/load_generator.h"
#include "loadgen/max_qpm_search.h"
#include "loadgen/report.h"
#include "loadgen/request_metrics.h"
#include "loadgen/spec_decode_stats.h"
#include "loadgen/workload.h"
#include "http/http.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::cli {
namespace {

constexpr std::string_view kBenchUsage = "usage: dsinfer bench serve [flags] (see dsinfer bench serve --help)";

Flags bench_serve_flags() {
  Flags flags("dsinfer bench serve [flags]",
              "Measures an OpenAI-compatible server with random prompts: TTFT, TPOT, ITL, E2E, throughput, QPM and "
              "goodput, as vLLM's and SGLang's serving benchmarks define them.");
  flags.add_string("base-url", "URL", "the server", false, "http://127.0.0.1:8000");
  flags.add_string("endpoint", "PATH", "/v1/completions (token-id prompts) or /v1/chat/completions (text)", false,
                   "/v1/completions");
  flags.add_string("model", "NAME", "model name in requests (default: the first of GET /v1/models)");
  flags.add_string("tokenizer", "DIR", "the model's tokenizer: prompts from its whole vocabulary, exact text lengths");
  flags.add_int("vocab-size", "without --tokenizer, token ids are drawn from [0, N)", 1000);
  flags.add_int("input-len", "input tokens per request (the middle of the range)", 1024);
  flags.add_int("output-len", "output tokens per request (the middle of the range)", 128);
  flags.add_double("range-ratio", "lengths uniform in [len*(1-R), len*(1+R)], R in [0, 1)", 0.0);
  flags.add_int("num-prompts", "requests to send (per probe with --find-max-qpm)", 1000);
  flags.add_double("request-rate", "requests/s (inf: all at once); the first probe's rate with --find-max-qpm",
                   std::numeric_limits<double>::infinity());
  flags.add_double("burstiness", "arrival gaps: 1 Poisson, inf equal, other values gamma of that shape", 1.0);
  flags.add_int("max-concurrency", "requests in flight at most (default: no limit)");
  flags.add_bool("ignore-eos", "ask for exactly the output length (ignore_eos, min_tokens); the default");
  flags.add_bool("no-ignore-eos", "let requests stop at end-of-sequence");
  flags.add_int("seed", "seed of the prompts and arrival times", 0);
  flags.add_double("slo-ttft-ms", "goodput: TTFT target in ms");
  flags.add_double("slo-tpot-ms", "goodput: TPOT target in ms; the target of --find-max-qpm");
  flags.add_bool("find-max-qpm", "search the request rate for the highest QPM whose p90 TPOT meets --slo-tpot-ms");
  flags.add_int("max-probes", "runs of the --find-max-qpm search at most", 8);
  flags.add_string("api-key", "KEY", "sent as 'Authorization: Bearer KEY' (or $OPENAI_API_KEY)");
  flags.add_string("out", "FILE.json", "write the results as JSON");
  flags.add_bool("save-detailed", "with --out, add per-request arrays (lengths, TTFT, TPOT, E2E, errors)");
  flags.add_bool("disable-progress", "no progress bar on stderr");
  return flags;
}

loadgen::Target read_target(const Flags& flags) {
  const server::Url url = server::parse_url(flags.get_string("base-url"));
  loadgen::Target target;
  target.host = url.host;
  target.port = url.port;
  target.base_path = url.path;
  target.endpoint = flags.get_string("endpoint");
  DSINFER_CHECK(target.endpoint.starts_with('/'), "--endpoint must start with '/', got '", target.endpoint, "'");
  target.api_key = flags.get_string("api-key");
  if (const char* key = std::getenv("OPENAI_API_KEY"); target.api_key.empty() && key) target.api_key = key;
  target.model = flags.has("model") ? flags.get_string("model") : loadgen::first_served_model(target);
  return target;
}

loadgen::LoadOptions read_load_options(const Flags& flags) {
  loadgen::LoadOptions options;
  options.request_rate = flags.get_double("request-rate");
  options.burstiness = flags.get_double("burstiness");
  options.max_concurrency = flags.get_int("max-concurrency");
  DSINFER_CHECK(!flags.has("max-concurrency") || options.max_concurrency > 0, "--max-concurrency must be above 0");
  DSINFER_CHECK(!(flags.get_bool("ignore-eos") && flags.get_bool("no-ignore-eos")),
                "--ignore-eos and --no-ignore-eos contradict each other");
  options.ignore_eos = !flags.get_bool("no-ignore-eos");
  options.progress = !flags.get_bool("disable-progress");
  options.seed = static_cast<uint64_t>(flags.get_int("seed"));
  return options;
}

loadgen::Slo read_slo(const Flags& flags) {
  loadgen::Slo slo;
  if (flags.has("slo-ttft-ms")) slo.ttft_ms = flags.get_double("slo-ttft-ms");
  if (flags.has("slo-tpot-ms")) slo.tpot_ms = flags.get_double("slo-tpot-ms");
  return slo;
}

loadgen::WorkloadOptions read_workload(const Flags& flags) {
  loadgen::WorkloadOptions workload;
  workload.num_prompts = flags.get_int("num-prompts");
  workload.input_len = flags.get_int("input-len");
  workload.output_len = flags.get_int("output-len");
  workload.range_ratio = flags.get_double("range-ratio");
  workload.seed = static_cast<uint64_t>(flags.get_int("seed"));
  return workload;
}

// JSON has no infinity: "inf" as vLLM writes it.
Json rate_json(double rate) { return std::isinf(rate) ? Json("inf") : Json(rate); }

Json config_json(const Flags& flags, const loadgen::Target& target, bool ignore_eos) {
  Json config;
  config["base_url"] = flags.get_string("base-url");
  config["endpoint"] = target.endpoint;
  config["model"] = target.model;
  config["tokenizer"] = flags.has("tokenizer") ? Json(flags.get_string("tokenizer")) : Json();
  config["vocab_size"] = flags.has("tokenizer") ? Json() : Json(flags.get_int("vocab-size"));
  config["input_len"] = flags.get_int("input-len");
  config["output_len"] = flags.get_int("output-len");
  config["range_ratio"] = flags.get_double("range-ratio");
  config["num_prompts"] = flags.get_int("num-prompts");
  config["request_rate"] = rate_json(flags.get_double("request-rate"));
  config["burstiness"] = rate_json(flags.get_double("burstiness"));
  config["max_concurrency"] = flags.has("max-concurrency") ? Json(flags.get_int("max-concurrency")) : Json();
  config["ignore_eos"] = ignore_eos;
  config["seed"] = flags.get_int("seed");
  config["slo_ttft_ms"] = flags.has("slo-ttft-ms") ? Json(flags.get_double("slo-ttft-ms")) : Json();
  config["slo_tpot_ms"] = flags.has("slo-tpot-ms") ? Json(flags.get_double("slo-tpot-ms")) : Json();
  config["find_max_qpm"] = flags.get_bool("find-max-qpm");
  config["max_probes"] = flags.get_int("max-probes");
  return config;
}

// What every run shares: where requests go, how prompts are made, what counts as good.
struct Benchmark {
  loadgen::Target target;
  loadgen::WorkloadOptions workload;
  loadgen::LoadOptions load;
  loadgen::Slo slo;
  loadgen::PromptFormat format = loadgen::PromptFormat::kTokenIds;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;  // with --tokenizer
  loadgen::PromptVocabulary vocabulary;

  // The prompts of run `index`: each run of a search gets its own (seed + index).
  std::vector<loadgen::Prompt> prompts(int index) const {
    loadgen::WorkloadOptions options = workload;
    options.seed += static_cast<uint64_t>(index);
    return loadgen::make_prompts(options, format, vocabulary);
  }
  // Sends the prompts; the errors of failed requests go to stderr.
  loadgen::LoadResult run(const std::vector<loadgen::Prompt>& prompts, const loadgen::LoadOptions& options) const {
    loadgen::LoadResult result = loadgen::run_load(target, prompts, options);
    std::fputs(loadgen::failure_lines(result.records).c_str(), stderr);
    return result;
  }
  loadgen::RunMetrics metrics(const loadgen::LoadResult& result) const {
    return loadgen::compute_metrics(result.records, result.duration_s, slo);
  }
  // The server's speculative decoding counters now; null without them (no drafting, no /metrics).
  std::optional<loadgen::SpecDecodeCounters> spec_decode_counters() const {
    const std::optional<std::string> text = loadgen::fetch_metrics_text(target);
    return text ? loadgen::parse_spec_decode_counters(*text) : std::nullopt;
  }
  bool has_slo() const { return slo.ttft_ms || slo.tpot_ms; }
};

Benchmark read_benchmark(const Flags& flags) {
  const int64_t vocab_size = flags.get_int("vocab-size");
  DSINFER_CHECK(vocab_size > 0 && vocab_size <= std::numeric_limits<int32_t>::max(), "--vocab-size must be above 0");
  Benchmark benchmark;
  benchmark.target = read_target(flags);
  benchmark.workload = read_workload(flags);
  benchmark.load = read_load_options(flags);
  benchmark.slo = read_slo(flags);
  benchmark.format = loadgen::is_chat(benchmark.target) ? loadgen::PromptFormat::kText : loadgen::PromptFormat::kTokenIds;
  if (flags.has("tokenizer")) {
    benchmark.tokenizer =
        std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_dir(flags.get_string("tokenizer")));
  }
  benchmark.vocabulary = {static_cast<int32_t>(vocab_size), benchmark.tokenizer.get()};
  return benchmark;
}

void print_plan(const Benchmark& benchmark, const std::string& base_url) {
  const loadgen::WorkloadOptions& workload = benchmark.workload;
  const std::string concurrency =
      benchmark.load.max_concurrency > 0 ? std::to_string(benchmark.load.max_concurrency) : "none";
  std::printf("model %s at %s%s: %lld prompts of %lld input and %lld output tokens (range ratio %g), "
              "request rate %g/s, max concurrency %s\n",
              benchmark.target.model.c_str(), base_url.c_str(), benchmark.target.endpoint.c_str(),
              static_cast<long long>(workload.num_prompts), static_cast<long long>(workload.input_len),
              static_cast<long long>(workload.output_len), workload.range_ratio, benchmark.load.request_rate,
              concurrency.c_str());
  std::fflush(stdout);
}

// One request before the measured run, as vLLM's initial test run and SGLang's warm-up: wrong
// arguments fail here with the server's own message, and first-request costs stay out of the figures.
void check_endpoint(const Benchmark& benchmark) {
  std::vector<loadgen::Prompt> prompt = benchmark.prompts(0);
  prompt.resize(1);
  loadgen::LoadOptions options = benchmark.load;
  options.request_rate = std::numeric_limits<double>::infinity();
  options.progress = false;
  const loadgen::LoadResult result = loadgen::run_load(benchmark.target, prompt, options);
  DSINFER_CHECK(result.records[0].success, "the test request to ", benchmark.target.endpoint,
                " failed: ", result.records[0].error);
}

Json run_once(const Benchmark& benchmark, bool detailed) {
  const std::optional<loadgen::SpecDecodeCounters> spec_before = benchmark.spec_decode_counters();
  const loadgen::LoadResult run = benchmark.run(benchmark.prompts(0), benchmark.load);
  const std::optional<loadgen::SpecDecodeStats> spec =
      loadgen::spec_decode_stats(spec_before, benchmark.spec_decode_counters());
  const loadgen::RunMetrics metrics = benchmark.metrics(run);
  const loadgen::RunSetting setting{benchmark.load.request_rate, benchmark.load.max_concurrency, benchmark.has_slo()};
  std::fputs(loadgen::summary_table(metrics, setting, spec).c_str(), stdout);
  Json result;
  result["figures"] = loadgen::figures_json(metrics, benchmark.has_slo());
  if (spec) loadgen::add_spec_decode_figures(result["figures"], *spec);
  if (detailed) result["per_request"] = loadgen::per_request_json(run.records);
  return result;
}

Json run_search(const Benchmark& benchmark, int max_probes) {
  loadgen::SearchOptions options;
  options.slo_tpot_ms = *benchmark.slo.tpot_ms;
  options.initial_rate = std::isinf(benchmark.load.request_rate) ? 1.0 : benchmark.load.request_rate;
  options.max_probes = max_probes;
  const auto run_probe = [&](double rate, int index) {
    loadgen::LoadOptions load = benchmark.load;
    load.request_rate = rate;
    load.seed += static_cast<uint64_t>(index);
    const loadgen::RunMetrics metrics = benchmark.metrics(benchmark.run(benchmark.prompts(index), load));
    std::printf("probe %d: %.3f req/s -> %.2f QPM, p90 TPOT %.2f ms, %lld failed\n", index, rate, metrics.qpm,
                metrics.tpot.p90_ms, static_cast<long long>(metrics.failed));
    std::fflush(stdout);
    return metrics;
  };
  const std::optional<loadgen::SpecDecodeCounters> spec_before = benchmark.spec_decode_counters();
  const loadgen::SearchResult search = loadgen::find_max_qpm(run_probe, options);
  const std::optional<loadgen::SpecDecodeStats> spec =
      loadgen::spec_decode_stats(spec_before, benchmark.spec_decode_counters());
  std::fputs(loadgen::search_table(search, options.slo_tpot_ms).c_str(), stdout);
  Json figures = loadgen::search_json(search, options.slo_tpot_ms);
  if (search.best) figures["best_probe"] = loadgen::figures_json(search.best->metrics, true);
  if (spec) {
    // Over every probe of the search: acceptance depends on the text, not on the request rate.
    std::fputs(loadgen::spec_decode_table(*spec).c_str(), stdout);
    loadgen::add_spec_decode_figures(figures, *spec);
  }
  Json result;
  result["figures"] = figures;
  return result;
}

int run_bench_serve(int argc, char** argv) {
  Flags flags = bench_serve_flags();
  if (!flags.parse(argc, argv)) return 0;
  const bool search = flags.get_bool("find-max-qpm");
  DSINFER_CHECK(!search || flags.has("slo-tpot-ms"), "--find-max-qpm needs --slo-tpot-ms");
  DSINFER_CHECK(flags.get_int("max-probes") >= 1, "--max-probes must be at least 1");
  const Benchmark benchmark = read_benchmark(flags);
  print_plan(benchmark, flags.get_string("base-url"));
  check_endpoint(benchmark);

  Json result = search ? run_search(benchmark, static_cast<int>(flags.get_int("max-probes")))
                       : run_once(benchmark, flags.get_bool("save-detailed"));
  if (flags.has("out")) {
    Json out;
    out["benchmark"] = "serve";
    out["config"] = config_json(flags, benchmark.target, benchmark.load.ignore_eos);
    for (auto& [key, value] : result.as_object()) out[key] = std::move(value);
    bench::write_result(flags.get_string("out"), std::move(out));
  }
  return 0;
}

}  // namespace

int run_bench(int argc, char** argv) {
  const std::string_view benchmark = argc >= 1 ? argv[0] : "";
  if (benchmark == "serve") return run_bench_serve(argc - 1, argv + 1);
  if (benchmark == "--help" || benchmark == "-h") {
    std::printf("%s\n", std::string(kBenchUsage).c_str());
    return 0;
  }
  DSINFER_CHECK(benchmark.empty(), "unknown benchmark '", benchmark, "'; ", kBenchUsage);
  throw Error(std::string(kBenchUsage));
}

}  // namespace dsinfer::cli
