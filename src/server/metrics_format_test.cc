#include "server/metrics_format.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/strings.h"

namespace dsinfer::server {
namespace {

// The samples of an exposition, by "name{labels}", after checking every line's syntax: comments
// are "# HELP name text" or "# TYPE name type" (the TYPE right after the HELP of the same name),
// samples are "name{labels} value" with a value that parses.
std::map<std::string, double> samples_of(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream lines(text);
  std::string line, help_name;
  while (std::getline(lines, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      help_name = line.substr(7, line.find(' ', 7) - 7);
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      std::vector<std::string> parts = split(line, ' ');
      EXPECT_EQ(parts.size(), 4u) << line;
      EXPECT_EQ(parts[2], help_name) << line;
      EXPECT_TRUE(parts[3] == "gauge" || parts[3] == "counter" || parts[3] == "histogram") << line;
      continue;
    }
    size_t space = line.rfind(' ');
    EXPECT_NE(space, std::string::npos) << line;
    std::string series = line.substr(0, space);
    EXPECT_EQ(series.rfind(help_name, 0), 0u) << "sample outside its family: " << line;
    EXPECT_NE(series.find("model_name=\"dsv3\""), std::string::npos) << line;
    double value = 0;
    EXPECT_TRUE(parse_double(line.substr(space + 1), &value) || line.substr(space + 1) == "+Inf") << line;
    EXPECT_EQ(samples.count(series), 0u) << "duplicate series: " << series;
    samples[series] = value;
  }
  return samples;
}

TEST(MetricsFormat, RendersVllmNamesAndValues) {
  runtime::Metrics metrics;
  metrics.prompt_tokens = 120;
  metrics.generation_tokens = 30;
  metrics.requests_finished_stop = 2;
  metrics.requests_finished_length = 1;
  metrics.requests_aborted = 4;
  metrics.time_to_first_token.observe(0.003);
  metrics.time_to_first_token.observe(0.5);
  metrics.time_to_first_token.observe(9000.0);
  metrics.e2e_request_latency.observe(1.25);
  runtime::EngineStats stats;
  stats.running = 3;
  stats.waiting = 1;
  stats.total_pages = 100;
  stats.free_pages = 75;
  stats.prefix_queries = 640;
  stats.prefix_hits = 128;
  stats.preemptions = 2;
  const ExtraGauge extra[] = {{"dsinfer:open_connections", "Open HTTP connections.", 17}};

  std::string text = format_prometheus(metrics, stats, "dsv3", extra);
  std::map<std::string, double> samples = samples_of(text);
  const std::string m = "{model_name=\"dsv3\"}";
  EXPECT_EQ(samples.at("vllm:num_requests_running" + m), 3);
  EXPECT_EQ(samples.at("vllm:num_requests_waiting" + m), 1);
  EXPECT_EQ(samples.at("vllm:kv_cache_usage_perc" + m), 0.25);
  EXPECT_EQ(samples.at("vllm:gpu_cache_usage_perc" + m), 0.25);
  EXPECT_EQ(samples.at("vllm:prefix_cache_queries_total" + m), 640);
  EXPECT_EQ(samples.at("vllm:prefix_cache_hits_total" + m), 128);
  EXPECT_EQ(samples.at("vllm:num_preemptions_total" + m), 2);
  EXPECT_EQ(samples.at("vllm:prompt_tokens_total" + m), 120);
  EXPECT_EQ(samples.at("vllm:generation_tokens_total" + m), 30);
  EXPECT_EQ(samples.at("vllm:request_success_total{model_name=\"dsv3\",finished_reason=\"stop\"}"), 2);
  EXPECT_EQ(samples.at("vllm:request_success_total{model_name=\"dsv3\",finished_reason=\"length\"}"), 1);
  EXPECT_EQ(samples.at("vllm:request_success_total{model_name=\"dsv3\",finished_reason=\"abort\"}"), 4);
  EXPECT_EQ(samples.at("dsinfer:open_connections" + m), 17);

  // Histogram buckets are cumulative, end with +Inf, and agree with _count.
  EXPECT_EQ(samples.at("vllm:time_to_first_token_seconds_bucket{model_name=\"dsv3\",le=\"0.001\"}"), 0);
  EXPECT_EQ(samples.at("vllm:time_to_first_token_seconds_bucket{model_name=\"dsv3\",le=\"0.005\"}"), 1);
  EXPECT_EQ(samples.at("vllm:time_to_first_token_seconds_bucket{model_name=\"dsv3\",le=\"0.5\"}"), 2);
  EXPECT_EQ(samples.at("vllm:time_to_first_token_seconds_bucket{model_name=\"dsv3\",le=\"2560.0\"}"), 2);
  EXPECT_EQ(samples.at("vllm:time_to_first_token_seconds_bucket{model_name=\"dsv3\",le=\"+Inf\"}"), 3);
  EXPECT_EQ(samples.at("vllm:time_to_first_token_seconds_count" + m), 3);
  EXPECT_DOUBLE_EQ(samples.at("vllm:time_to_first_token_seconds_sum" + m), 9000.503);
  EXPECT_EQ(samples.at("vllm:e2e_request_latency_seconds_count" + m), 1);
  for (const char* family : {"vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds",
                             "vllm:request_queue_time_seconds"})
    EXPECT_EQ(samples.at(std::string(family) + "_count" + m), 0) << family;

  EXPECT_NE(text.find("# HELP vllm:prompt_tokens_total Number of prefill tokens processed.\n"
                      "# TYPE vllm:prompt_tokens_total counter\n"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE vllm:e2e_request_latency_seconds histogram\n"), std::string::npos);
  EXPECT_EQ(text.back(), '\n');
}

TEST(MetricsFormat, EscapesTheModelNameAndSurvivesAnEmptyPool) {
  runtime::Metrics metrics;
  std::string text = format_prometheus(metrics, runtime::EngineStats{}, "a\"b\\c\nd");
  EXPECT_NE(text.find("vllm:kv_cache_usage_perc{model_name=\"a\\\"b\\\\c\\nd\"} 0.0\n"), std::string::npos);
}

TEST(MetricsFormat, RendersThePerRequestAndPerStepHistogramsUnderVllmsNames) {
  runtime::Metrics metrics;
  // One request of 120 prompt and 30 output tokens: scheduled 0.1 s after arrival, first token
  // at 0.5 s, last at 2.5 s.
  metrics.observe_finished_request(120, 30, 0.1, 0.5, 2.5);
  metrics.observe_finished_request(7, 0, -1.0, -1.0, 0.0);  // aborted while waiting: counts only
  metrics.iteration_tokens.observe(1);
  metrics.iteration_tokens.observe(300);
  std::map<std::string, double> samples = samples_of(format_prometheus(metrics, runtime::EngineStats{}, "dsv3"));
  const std::string m = "{model_name=\"dsv3\"}";
  auto bucket = [](const std::string& family, const std::string& le) {
    return family + "_bucket{model_name=\"dsv3\",le=\"" + le + "\"}";
  };
  EXPECT_EQ(samples.at("vllm:request_prompt_tokens_count" + m), 2);
  EXPECT_EQ(samples.at("vllm:request_prompt_tokens_sum" + m), 127);
  EXPECT_EQ(samples.at(bucket("vllm:request_prompt_tokens", "10.0")), 1);
  EXPECT_EQ(samples.at(bucket("vllm:request_prompt_tokens", "100.0")), 1);
  EXPECT_EQ(samples.at(bucket("vllm:request_prompt_tokens", "200.0")), 2);
  EXPECT_EQ(samples.at("vllm:request_generation_tokens_sum" + m), 30);
  // vLLM's 1-2-5 token buckets, labelled as prometheus_client labels them.
  EXPECT_EQ(samples.at(bucket("vllm:request_generation_tokens", "100000.0")), 2);
  EXPECT_EQ(samples.at(bucket("vllm:request_generation_tokens", "1e+06")), 2);
  EXPECT_EQ(samples.at("vllm:request_prefill_time_seconds_count" + m), 1);
  EXPECT_DOUBLE_EQ(samples.at("vllm:request_prefill_time_seconds_sum" + m), 0.4);
  EXPECT_EQ(samples.at("vllm:request_decode_time_seconds_count" + m), 1);
  EXPECT_DOUBLE_EQ(samples.at("vllm:request_decode_time_seconds_sum" + m), 2.0);
  EXPECT_EQ(samples.at(bucket("vllm:request_decode_time_seconds", "1.5")), 0);
  EXPECT_EQ(samples.at(bucket("vllm:request_decode_time_seconds", "2.0")), 1);
  EXPECT_EQ(samples.at("vllm:iteration_tokens_total_count" + m), 2);
  EXPECT_EQ(samples.at(bucket("vllm:iteration_tokens_total", "1.0")), 1);
  EXPECT_EQ(samples.at(bucket("vllm:iteration_tokens_total", "256.0")), 1);
  EXPECT_EQ(samples.at(bucket("vllm:iteration_tokens_total", "512.0")), 2);
}

TEST(MetricsFormat, RendersSpecDecodeCountersUnderVllmsNamesOnlyWhenSpeculativeDecodingIsOn) {
  runtime::Metrics metrics;
  metrics.spec_decode_drafts = 100;
  metrics.spec_decode_draft_tokens = 200;
  metrics.spec_decode_accepted_tokens = 150;
  metrics.spec_decode_accepted_per_position[0] = 90;
  metrics.spec_decode_accepted_per_position[1] = 60;
  metrics.spec_decode_accepted_per_position[2] = 7;  // a position past N = 2: not shown
  runtime::SpeculativeConfig speculative;
  speculative.num_tokens = 2;
  const std::string text = format_prometheus(metrics, runtime::EngineStats{}, "dsv3", {}, speculative);
  std::map<std::string, double> samples = samples_of(text);
  const std::string m = "{model_name=\"dsv3\"}";
  EXPECT_EQ(samples.at("vllm:spec_decode_num_drafts_total" + m), 100);
  EXPECT_EQ(samples.at("vllm:spec_decode_num_draft_tokens_total" + m), 200);
  EXPECT_EQ(samples.at("vllm:spec_decode_num_accepted_tokens_total" + m), 150);
  const std::string per_position = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
  EXPECT_EQ(samples.at(per_position + "{model_name=\"dsv3\",position=\"0\"}"), 90);
  EXPECT_EQ(samples.at(per_position + "{model_name=\"dsv3\",position=\"1\"}"), 60);
  EXPECT_EQ(samples.count(per_position + "{model_name=\"dsv3\",position=\"2\"}"), 0u);
  for (const char* head : {"# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n"
                           "# TYPE vllm:spec_decode_num_drafts_total counter\n",
                           "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter\n"})
    EXPECT_NE(text.find(head), std::string::npos) << head;

  speculative.num_tokens = 3;
  samples = samples_of(format_prometheus(metrics, runtime::EngineStats{}, "dsv3", {}, speculative));
  EXPECT_EQ(samples.at(per_position + "{model_name=\"dsv3\",position=\"2\"}"), 7);

  // Off: no spec_decode family at all, as vLLM without a speculative config.
  EXPECT_EQ(format_prometheus(metrics, runtime::EngineStats{}, "dsv3").find("spec_decode"), std::string::npos);
}

TEST(MetricsFormat, RendersTheHostKvTierOnlyWhenItIsOn) {
  runtime::Metrics metrics;
  runtime::EngineStats stats;
  stats.host_kv.capacity_bytes = 1 << 30;
  stats.host_kv.pages = 3;
  stats.host_kv.bytes = 3 * 4096;
  stats.host_kv.spilled_pages = 10;
  stats.host_kv.restored_pages = 4;
  stats.host_kv.hit_tokens = 256;
  std::map<std::string, double> samples = samples_of(format_prometheus(metrics, stats, "dsv3"));
  const std::string m = "{model_name=\"dsv3\"}";
  EXPECT_EQ(samples.at("dsinfer:host_kv_cache_capacity_bytes" + m), 1 << 30);
  EXPECT_EQ(samples.at("dsinfer:host_kv_cache_pages" + m), 3);
  EXPECT_EQ(samples.at("dsinfer:host_kv_cache_bytes" + m), 3 * 4096);
  EXPECT_EQ(samples.at("dsinfer:host_kv_cache_spilled_pages_total" + m), 10);
  EXPECT_EQ(samples.at("dsinfer:host_kv_cache_restored_pages_total" + m), 4);
  EXPECT_EQ(samples.at("dsinfer:host_kv_cache_hit_tokens_total" + m), 256);
  EXPECT_EQ(format_prometheus(metrics, runtime::EngineStats{}, "dsv3").find("host_kv"), std::string::npos);
}

TEST(MetricsFormat, RendersAPrefillInstancesPushesOnlyThere) {
  runtime::Metrics metrics;
  runtime::EngineStats stats;
  stats.kv_pushes = 7;
  stats.kv_layerwise_pushes = 2;
  std::map<std::string, double> samples =
      samples_of(format_prometheus(metrics, stats, "dsv3", {}, {}, runtime::DisaggregationMode::kPrefill));
  const std::string m = "{model_name=\"dsv3\"}";
  EXPECT_EQ(samples.at("dsinfer:kv_pushes_total" + m), 7);
  EXPECT_EQ(samples.at("dsinfer:kv_layerwise_pushes_total" + m), 2);
  for (runtime::DisaggregationMode mode : {runtime::DisaggregationMode::kNone, runtime::DisaggregationMode::kDecode})
    EXPECT_EQ(format_prometheus(metrics, stats, "dsv3", {}, {}, mode).find("kv_pushes"), std::string::npos);
}

TEST(MetricsFormat, RendersTheCacheConfigAsAnInfoGauge) {
  std::string text = format_cache_config_info({64, 1234, false, "auto"}, "dsv3");
  EXPECT_EQ(text,
            "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
            "# TYPE vllm:cache_config_info gauge\n"
            "vllm:cache_config_info{model_name=\"dsv3\",block_size=\"64\",cache_dtype=\"auto\","
            "enable_prefix_caching=\"False\",num_gpu_blocks=\"1234\"} 1.0\n");
}

TEST(MetricsFormat, RendersProcessMetricsWithoutLabelsAsPrometheusClientWritesThem) {
  ProcessStats process;
  process.resident_memory_bytes = 12345678;
  process.virtual_memory_bytes = 100000;
  process.cpu_seconds = 1.25;
  process.start_time_seconds = 1732480000.5;
  process.open_fds = 17;
  process.max_fds = 1048576;
  std::string text = format_process_metrics(process);
  for (const char* line : {"# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes 1.2345678e+07\n",
                           "process_virtual_memory_bytes 100000.0\n",
                           "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.25\n",
                           "process_start_time_seconds 1.7324800005e+09\n", "process_open_fds 17.0\n",
                           "process_max_fds 1.048576e+06\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin:\n" << text;
  EXPECT_EQ(text.find('{'), std::string::npos) << "process_* metrics carry no labels";
}

}  // namespace
}  // namespace dsinfer::server
