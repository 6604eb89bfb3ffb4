#include "cli/router_flags.h"

#include <limits>

#include "cli/http_flags.h"
#include "core/error.h"
#include "core/strings.h"
#include "http/http.h"

namespace dsinfer::cli {
namespace {

constexpr double kNoMax = std::numeric_limits<double>::infinity();

std::chrono::milliseconds seconds_flag(const Flags& flags, const char* name) {
  return std::chrono::milliseconds(static_cast<int64_t>(flags.get_double(name) * 1000));
}

// A --prefill's optional second value: a bootstrap port, or "none".
bool is_port_value(const std::string& text) {
  int64_t number = 0;
  return text == "none" || parse_int64(text, &number);
}

}  // namespace

Flags router_flags() {
  Flags flags("dsinfer router --prefill URL [BOOTSTRAP_PORT] ... --decode URL ... [flags]",
              "Routes OpenAI requests (/v1/chat/completions, /v1/completions) to a prefill and a decode instance "
              "each, in SGLang's prefill/decode protocol; answers /v1/models from a decode instance, and its own "
              "/health and /metrics.");
  // Declared for --help; take_worker_args reads them.
  flags.add_string("prefill", "URL [PORT]", "a prefill instance, optionally with its bootstrap port (else its "
                   "/server_info's disaggregation_bootstrap_port); repeat for each");
  flags.add_string("decode", "URL", "a decode instance; repeat for each");
  flags.add_bool("pd-disaggregation", "no effect: this router always splits prefill and decode (SGLang's flag)");
  add_address_flags(flags, 8000);
  flags.add_string("api-key", "KEY", "the workers' API key, for the router's own calls (/server_info, /v1/loads); "
                   "else $DSINFER_API_KEY. Clients' Authorization headers are passed on as they come");
  // Placement.
  flags.add_int("balance-abs-threshold", "a prompt goes to the prefill instance that holds most of its prefix, "
                "unless that one has more than this many requests in flight above the least loaded one (and "
                "--balance-rel-threshold times as many): then to the least loaded", 16);
  flags.add_double("balance-rel-threshold", "see --balance-abs-threshold", 1.5);
  flags.add_int("prefix-block-chars", "characters of prompt text per block of the prefix record (256: about one "
                "64-token KV page)", 256);
  flags.add_int("prefix-cache-blocks", "blocks the prefix record keeps per prefill instance (least recently used "
                "forgotten first)", 1 << 16);
  flags.add_int("decode-absorbs-below", "prompts shorter than this many characters go to a decode instance alone, "
                "without a prefill instance (0: never)", 0);
  // Admission.
  flags.add_int("decode-slots", "requests each decode instance holds at once (default: its /server_info "
                "max_running_requests, else 256)");
  flags.add_int("max-queued-requests", "requests that may wait for a decode slot (503 with Retry-After above)", 256);
  flags.add_alias("queue-size", "max-queued-requests");  // SGLang
  flags.add_double("queue-timeout", "seconds a request may wait for a decode slot (503 after)", 60);
  flags.add_alias("queue-timeout-secs", "queue-timeout");  // SGLang
  flags.add_double("scale-out-window", "seconds of queueing (or of expected queue drain) after which "
                   "dsinfer_router_scale_out_recommended turns 1", 30);
  // Health and failures.
  flags.add_double("health-check-interval", "seconds between GET /health checks of each worker (also at once after "
                   "a failed connection)", 5);
  flags.add_alias("health-check-interval-secs", "health-check-interval");  // SGLang
  flags.add_double("load-poll-interval", "seconds between GET /v1/loads polls of each decode instance", 1);
  flags.add_int("max-retries", "times a request that could not reach a worker, before its client got a byte, is "
                "sent to another pair", 1);
  flags.add_alias("retry-max-retries", "max-retries");  // SGLang
  flags.add_double("request-timeout", "seconds a call to a worker may take in all", 1800);
  flags.add_alias("request-timeout-secs", "request-timeout");  // SGLang
  add_http_limit_flags(flags);

  flags.set_range("balance-abs-threshold", 0, kNoMax);
  flags.set_range("balance-rel-threshold", 1, kNoMax);
  flags.set_range("prefix-block-chars", 1, 1 << 20);
  flags.set_range("prefix-cache-blocks", 1, kNoMax);
  flags.set_range("decode-absorbs-below", 0, kNoMax);
  flags.set_range("decode-slots", 1, kNoMax);
  flags.set_range("max-queued-requests", 0, kNoMax);
  flags.set_range("queue-timeout", 0, 86400);
  flags.set_range("scale-out-window", 0, 86400);
  flags.set_range("health-check-interval", 0.01, 3600);
  flags.set_range("load-poll-interval", 0.01, 3600);
  flags.set_range("max-retries", 0, 10);
  flags.set_range("request-timeout", 0.001, 86400 * 7);
  return flags;
}

std::vector<router::WorkerSpec> take_worker_args(std::vector<std::string>& args) {
  std::vector<router::WorkerSpec> workers;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const bool prefill = arg == "--prefill" || arg.starts_with("--prefill=");
    const bool decode = arg == "--decode" || arg.starts_with("--decode=");
    if (!prefill && !decode) {
      rest.push_back(arg);
      continue;
    }
    const std::string name = prefill ? "--prefill" : "--decode";
    router::WorkerSpec spec;
    spec.role = prefill ? router::WorkerRole::kPrefill : router::WorkerRole::kDecode;
    const bool inline_value = arg.size() > name.size();
    if (inline_value) {
      spec.url = arg.substr(name.size() + 1);
    } else {
      DSINFER_CHECK(i + 1 < args.size() && !args[i + 1].starts_with("--"), name, " needs a URL (", name,
                    prefill ? " http://host:port [BOOTSTRAP_PORT])" : " http://host:port)");
      spec.url = args[++i];
    }
    try {
      server::parse_url(spec.url);
    } catch (const Error& error) {
      throw Error(str_cat(name, ": ", error.what()));
    }
    if (prefill && !inline_value && i + 1 < args.size() && !args[i + 1].starts_with("--")) {
      const std::string& port = args[++i];
      DSINFER_CHECK(is_port_value(port), "--prefill ", spec.url, " ", port, ": the value after a prefill URL is its "
                    "bootstrap port (1 to 65535, or none); give each further instance its own --prefill");
      int64_t number = 0;
      if (port != "none") {
        parse_int64(port, &number);
        DSINFER_CHECK(number >= 1 && number <= 65535, "--prefill ", spec.url, " ", port,
                      ": the bootstrap port must be from 1 to 65535");
        spec.bootstrap_port = static_cast<uint16_t>(number);
      }
    }
    DSINFER_CHECK(!decode || i + 1 >= args.size() || args[i + 1].starts_with("--"), "--decode ", spec.url, " ",
                  args[i + 1], ": --decode takes one URL; give each further instance its own --decode");
    workers.push_back(std::move(spec));
  }
  args = std::move(rest);
  return workers;
}

std::optional<router::RouterOptions> router_options(int argc, char** argv, const char* api_key_from_environment) {
  std::vector<std::string> args(argv, argv + argc);
  router::RouterOptions options;
  options.workers = take_worker_args(args);
  Flags flags = router_flags();
  std::vector<char*> rest;
  for (std::string& arg : args) rest.push_back(arg.data());
  if (!flags.parse(static_cast<int>(rest.size()), rest.data())) return std::nullopt;

  bool has_prefill = false, has_decode = false;
  for (const router::WorkerSpec& spec : options.workers)
    (spec.role == router::WorkerRole::kPrefill ? has_prefill : has_decode) = true;
  DSINFER_CHECK(has_prefill && has_decode, "the router needs at least one prefill and one decode instance: "
                "--prefill URL [BOOTSTRAP_PORT] --decode URL (see --help)");

  options.http = http_options(flags);
  options.health.api_key = flags.get_string("api-key");
  if (options.health.api_key.empty() && api_key_from_environment) options.health.api_key = api_key_from_environment;
  options.health.interval = seconds_flag(flags, "health-check-interval");
  options.health.load_interval = seconds_flag(flags, "load-poll-interval");
  options.balance.absolute = flags.get_int("balance-abs-threshold");
  options.balance.relative = flags.get_double("balance-rel-threshold");
  options.prefix_block_chars = static_cast<size_t>(flags.get_int("prefix-block-chars"));
  options.registry.prefix_record_blocks = static_cast<size_t>(flags.get_int("prefix-cache-blocks"));
  options.decode_absorbs_below = static_cast<size_t>(flags.get_int("decode-absorbs-below"));
  if (flags.has("decode-slots")) options.registry.decode_slots = flags.get_int("decode-slots");
  options.max_queued_requests = static_cast<size_t>(flags.get_int("max-queued-requests"));
  options.queue_timeout = seconds_flag(flags, "queue-timeout");
  options.scale_out_window = seconds_flag(flags, "scale-out-window");
  options.max_retries = static_cast<int>(flags.get_int("max-retries"));
  options.request_timeout_seconds = flags.get_double("request-timeout");
  return options;
}

}  // namespace dsinfer::cli
