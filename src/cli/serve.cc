// dsinfer serve: the OpenAI-compatible server on one model.
#include <signal.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <thread>

#include "cli/disaggregation_setup.h"
#include "cli/flags.h"
#include "cli/http_flags.h"
#include "cli/host_kv_flags.h"
#include "cli/model_files.h"
#include "cli/serve_flags.h"
#include "cli/version.h"
#include "cli/verbs.h"
#include "core/file.h"
#include "core/json.h"
#include "core/log.h"
#include "backend/make_backend.h"
#include "cli/parallel_flags.h"
#include "cli/served_model.h"
#include "core/parallel.h"
#include "model/kv_cache.h"
#include "runtime/engine.h"
#include "runtime/memory_plan.h"
#include "runtime/sharded_executor.h"
#include "server/openai_server.h"

namespace dsinfer::cli {
namespace {

// --chat-template FILE: its template, with the model directory's bos and eos tokens.
chat::ChatTemplate chat_template_from_file(const std::string& file, const std::string& dir) {
  DSINFER_CHECK(file_exists(file), "--chat-template ", file, ": no such file");
  Json config = Json::object();
  if (file_exists(dir + "/tokenizer_config.json")) config = Json::parse(read_file(dir + "/tokenizer_config.json"));
  config["chat_template"] = read_file(file);
  try {
    return chat::ChatTemplate::from_tokenizer_config(config, file);
  } catch (const Error& error) {
    throw Error(str_cat("--chat-template ", file, ": ", error.what()));
  }
}

// Waits for SIGINT or SIGTERM (returned), or for the engine to fail for good (0), which it checks
// every kHealthPoll.
constexpr timespec kHealthPoll = {0, 200'000'000};

int wait_for_signal_or_failure(const runtime::Engine& engine) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  while (engine.healthy()) {
    int received = sigtimedwait(&signals, nullptr, &kHealthPoll);
    if (received > 0) return received;  // else the poll interval passed (or another signal came)
  }
  return 0;
}

// After a fatal device error: how long /health keeps answering 503, and the failed requests get
// their error answers, before the server stops.
constexpr auto kFailureGrace = std::chrono::seconds(1);

// The graceful stop: the running requests get `timeout` to finish (OpenAIServer::drain); a second
// SIGINT or SIGTERM meanwhile ends them at once.
void shut_down_gracefully(server::OpenAIServer& server, std::chrono::seconds timeout) {
  std::future<bool> drained = std::async(std::launch::async, [&server, timeout] { return server.drain(timeout); });
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  while (drained.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    if (sigtimedwait(&signals, nullptr, &kHealthPoll) > 0) {
      log_info("second signal: ending the running requests now");
      server.drain(std::chrono::seconds(0));
    }
  }
  drained.get();
}

}  // namespace

// What the gateway routes report about the model (/server_info, /model_info): its directory and
// config.json's model_type and architectures, read before the weights load.
server::GatewayOptions gateway_options(const std::string& dir) {
  server::GatewayOptions gateway;
  gateway.model_path = dir;
  gateway.tokenizer_path = dir;
  const std::string config_file = dir + "/config.json";
  if (!file_exists(config_file)) return gateway;  // the load reports what is missing
  Json config = Json::parse(read_file(config_file));
  if (const Json* type = config.find("model_type"); type && type->is_string()) gateway.model_type = type->as_string();
  if (const Json* architectures = config.find("architectures"); architectures && architectures->is_array())
    for (const Json& name : architectures->as_array())
      if (name.is_string()) gateway.architectures.push_back(name.as_string());
  return gateway;
}

int run_serve(int argc, char** argv) {
  Flags flags = serve_flags();
  if (!flags.parse(argc, argv)) return 0;
  DSINFER_CHECK(backend::backend_built(flags.get_string("device")), "--device ", flags.get_string("device"),
                " is not available in this build");
  check_serve_flags(flags);
  const server::HttpServerOptions http = http_options(flags);
  // A prefill instance's bootstrap listener binds now, so that /server_info names its port.
  DisaggregationSetup disaggregation(disaggregation_settings(flags), http.host);
  // The ranges of the numbers were checked while parsing (serve_flags); what needs more is checked
  // here, before the model loads, except what needs the model (below).
  const int64_t threads = flags.get_int("threads");
  const int64_t max_model_len = flags.get_int("max-model-len");
  const int64_t num_kv_pages = flags.get_int("num-kv-pages");
  DSINFER_CHECK(flags.get_double("kv-cache-gb") > 0, "--kv-cache-gb must be positive, got ",
                flags.get_double("kv-cache-gb"));
  const int64_t request_threads = flags.get_int("request-threads");
  const int64_t shutdown_timeout = flags.get_int("shutdown-timeout");
  if (threads > 0) set_num_threads(static_cast<int>(threads));

  // SIGINT/SIGTERM are taken by sigwait below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::string dir = flags.get_string("model");
  server::ServerOptions options;
  options.served_model_name = flags.has("served-model-name") ? flags.get_string("served-model-name") : dir;
  options.kv_cache_dtype = std::string(model::cache_format_name(kv_cache_format(flags)));
  options.api_key = api_key(flags, std::getenv("DSINFER_API_KEY"), std::getenv("VLLM_API_KEY"));
  options.reasoning = reasoning_enabled(flags);
  options.allowed_origins = allowed_origins(flags);
  options.version = kVersion;
  options.commit = kCommit;
  options.tool_call_parser = flags.get_string("tool-call-parser");
  options.enable_auto_tool_choice = flags.get_bool("enable-auto-tool-choice");
  options.log_requests = log_requests_enabled(flags);
  options.gateway = gateway_options(dir);
  const parallel::ParallelConfig layout = parallel_config(flags);
  options.gateway.tp_size = layout.world_size();
  options.gateway.dp_size = layout.attention_dp;
  options.gateway.ep_size = layout.ep_size();
  options.gateway.role = disaggregation.role();
  options.gateway.bootstrap_port = disaggregation.bootstrap_port();
  // A template that does not parse stops the start, before the model loads.
  std::unique_ptr<chat::ChatTemplate> chat_template;
  if (flags.has("chat-template")) {
    std::string file = flags.get_string("chat-template");
    chat_template = std::make_unique<chat::ChatTemplate>(chat_template_from_file(file, dir));
  }
  options.http = http;  // the server adds its error body and head check to these
  options.request_workers.threads = static_cast<size_t>(request_threads);

  // Listen first, so /health answers 503 while the model loads.
  server::OpenAIServer server(options);
  server.start();
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(dir);
  if (!chat_template && file_exists(dir + "/tokenizer_config.json")) {
    try {
      chat_template = std::make_unique<chat::ChatTemplate>(load_chat_template(dir));
    } catch (const Error& error) {
      log_warning("no chat template: ", error.what());
    }
  }
  auto served = ServedModel::load(dir, flags, model_options(flags));
  const model::DeepseekModel& model = served->model();
  DSINFER_CHECK(max_model_len <= model.max_positions(), "--max-model-len ", max_model_len,
                " is above the model's limit of ", model.max_positions(),
                " positions (config.json: max_position_embeddings)");

  runtime::EngineConfig config;
  config.max_num_seqs = flags.get_int("max-num-seqs");
  config.max_num_batched_tokens = flags.get_int("max-num-batched-tokens");
  config.max_model_len = max_model_len;
  config.num_pages = num_kv_pages;
  config.kv_cache_bytes = static_cast<int64_t>(flags.get_double("kv-cache-gb") * (1 << 30));
  config.enable_prefix_caching = prefix_caching_enabled(flags);
  config.host_kv_cache = host_kv_cache(flags);
  config.seed = static_cast<uint64_t>(flags.get_int("seed"));
  config.cuda_graph_max_batch = cuda_graph_max_batch(flags);
  config.overlap_schedule = !flags.get_bool("disable-overlap-schedule");
  config.disaggregation = disaggregation.engine_config();
  if (model.backend().device() != Device::kCpu && config.num_pages == 0) {
    // The GPU's memory plan: a dry run of the largest steps, then pages from what is left. A sharded
    // model plans on every rank at once (the dry runs' collectives need them all); the rank with the
    // least room sets every rank's pool.
    runtime::MemoryPlanInputs inputs;
    inputs.gpu_memory_utilization = flags.get_double("gpu-memory-utilization");
    inputs.max_num_batched_tokens = config.max_num_batched_tokens;
    inputs.max_num_seqs = config.max_num_seqs;
    inputs.max_model_len = config.max_model_len;
    const auto graphs = static_cast<int>(std::min(config.cuda_graph_max_batch, config.max_num_seqs));
    inputs.cuda_graph_max_batch = served->sharded() ? runtime::sharded_graph_batch(*served->shards(), graphs) : graphs;
    inputs.speculative_tokens = served->speculative().num_tokens;
    std::vector<runtime::MemoryPlan> plans(served->sharded() ? served->shards()->size() : 1);
    if (served->sharded()) {
      served->shards()->on_every_rank([&](int r) { plans[r] = runtime::plan_memory(served->shards()->rank(r), inputs); });
    } else {
      plans[0] = runtime::plan_memory(model, inputs);
    }
    std::printf("%s", plans[0].table().c_str());
    config.num_pages = plans[0].pages;
    for (const runtime::MemoryPlan& plan : plans) config.num_pages = std::min(config.num_pages, plan.pages);
  }
  std::unique_ptr<runtime::Engine> engine_holder = served->engine(tokenizer, config);
  runtime::Engine& engine = *engine_holder;
  // Destinations reach the engine from now on, and stop before it goes (the guard goes first).
  disaggregation.attach(engine);
  struct Detach {
    DisaggregationSetup& setup;
    ~Detach() { setup.detach(); }
  } detach_before_the_engine_goes{disaggregation};
  // A pool smaller than one context would cut answers short with finish_reason "length" (under DP
  // attention a sequence lives in one group's pages).
  const int64_t group_pages = engine.stats().total_pages / engine.stats().page_groups;
  const int64_t pool_tokens = group_pages * model::kPageSize;
  DSINFER_CHECK(pool_tokens >= engine.max_model_len(), "the KV cache holds ", group_pages, " pages of ",
                model::kPageSize, " tokens", engine.stats().page_groups > 1 ? " a DP group" : "", " (", pool_tokens,
                " tokens), less than one sequence of the "
                "context length (", engine.max_model_len(), " tokens). Lower --max-model-len to at most ", pool_tokens,
                ", or give the cache more room (--num-kv-pages, --kv-cache-gb on the CPU, --gpu-memory-utilization "
                "on a GPU).");
  server.attach({&engine, &tokenizer, chat_template.get()});

  runtime::EngineStats stats = engine.stats();
  std::string url = "http://" + options.http.host + ":" + std::to_string(server.port());
  std::printf("dsinfer %s (commit %s): serving %s at %s (context %ld tokens, KV cache %ld pages of 64 tokens)\n",
              kVersion, kCommit, options.served_model_name.c_str(), url.c_str(),
              static_cast<long>(engine.max_model_len()), static_cast<long>(stats.total_pages));
  if (disaggregation.role() == server::InstanceRole::kPrefill)
    std::printf("prefill instance: decode instances hand over their pages at %s:%u (bootstrap port)\n",
                options.http.host.c_str(), static_cast<unsigned>(disaggregation.bootstrap_port()));
  if (disaggregation.role() == server::InstanceRole::kDecode)
    std::printf("decode instance: requests come with a prefill instance's bootstrap_host, bootstrap_port and room\n");
  std::string auth = options.api_key.empty() ? "" : " -H 'Authorization: Bearer $DSINFER_API_KEY'";
  std::printf("try:\n  curl %s/v1/chat/completions -H 'Content-Type: application/json'%s \\\n"
              "    -d '{\"model\": \"%s\", \"messages\": [{\"role\": \"user\", \"content\": \"What is 123+456?\"}]}'\n",
              url.c_str(), auth.c_str(), options.served_model_name.c_str());
  std::fflush(stdout);

  int signal_number = wait_for_signal_or_failure(engine);
  if (signal_number == 0) {
    std::fprintf(stderr, "dsinfer serve: %s; shutting down\n", engine.fatal_error().c_str());
    std::this_thread::sleep_for(kFailureGrace);
    server.stop();
    return 1;
  }
  log_info("signal ", signal_number, ": shutting down; running requests get ", shutdown_timeout, " s to finish");
  shut_down_gracefully(server, std::chrono::seconds(shutdown_timeout));
  server.stop();
  return 0;
}

}  // namespace dsinfer::cli
