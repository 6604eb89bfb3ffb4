// Per-request latencies and the figures of a whole run, defined as vLLM's `vllm bench serve`
// defines them (vllm/benchmarks/serve.py: calculate_metrics; vllm/benchmarks/lib/
// endpoint_request_func.py) and SGLang's bench_serving.py (calculate_metrics) does too:
//
//   TTFT  arrival of the first token chunk - the moment the request was sent
//   ITL   the gaps between consecutive token chunks (a chunk may carry several tokens)
//   E2E   arrival of the last token chunk - the moment the request was sent (vLLM; SGLang ends it
//         at the last line read, "[DONE]", which servers send right after the last token chunk)
//   TPOT  (E2E - TTFT) / (output tokens - 1), only for requests with more than one output token
//
// The run's figures count successful requests only. Mean, median and percentiles are numpy's
// (np.mean, np.median, np.percentile with linear interpolation), and 0 for no values (vLLM's
// `values or 0`); ITL pools the gaps of every request. Throughputs divide by the run's duration
// (first send to last completion): requests, input tokens, output tokens, input + output. QPM is
// requests per minute. Goodput (DistServe's, as vLLM reports it) counts the requests whose every
// given SLO holds (TTFT <= target, TPOT <= target, a one-token request having TPOT 0), per second.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace dsinfer::loadgen {

// One request as the client saw it; times in seconds.
struct RequestRecord {
  bool success = false;
  std::string error;         // why it failed
  double start_s = 0;        // when it was sent, from the start of the run
  double ttft_s = 0;
  double e2e_s = 0;
  std::vector<double> itl_s;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
};

// Sets TTFT, ITL and E2E of a request sent at sent_s whose token chunks arrived at chunk_times_s
// (the same clock; at least one chunk).
void set_chunk_timings(RequestRecord& record, double sent_s, std::span<const double> chunk_times_s);
// TPOT in seconds; none for a request with fewer than two output tokens.
std::optional<double> tpot_s(const RequestRecord& record);

// np.percentile(values, p) (linear interpolation between the two nearest ranks), p in [0, 100];
// 0 for no values.
double percentile(std::vector<double> values, double p);

struct Distribution {  // milliseconds
  double mean_ms = 0;
  double median_ms = 0;
  double p90_ms = 0;
  double p99_ms = 0;
};
Distribution distribution_ms(const std::vector<double>& seconds);

// Service-level objectives for goodput, in milliseconds; unset ones do not count.
struct Slo {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
};
bool meets_slo(const RequestRecord& record, const Slo& slo);

struct RunMetrics {
  int64_t completed = 0;
  int64_t failed = 0;
  double duration_s = 0;
  int64_t total_input_tokens = 0;
  int64_t total_output_tokens = 0;
  double request_throughput = 0;      // requests/s
  double input_throughput = 0;        // tokens/s
  double output_throughput = 0;       // tokens/s
  double total_token_throughput = 0;  // tokens/s
  double qpm = 0;                     // requests/minute
  int64_t good_requests = 0;          // meeting the SLOs (all completed ones when none is set)
  double request_goodput = 0;         // good requests/s
  Distribution ttft, tpot, itl, e2e;
};
RunMetrics compute_metrics(std::span<const RequestRecord> records, double duration_s, const Slo& slo);

}  // namespace dsinfer::loadgen
