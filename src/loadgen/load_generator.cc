// run_load: the calling thread dispatches (sleeps until each arrival, waits for a free slot, sends);
// the HttpClient's loop thread times the pieces of every stream as they arrive and closes each
// request's record when its response ends.
#include "loadgen/load_generator.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "loadgen/progress_bar.h"
#include "loadgen/stream_recorder.h"
#include "core/error.h"
#include "core/json.h"
#include "http/http.h"

namespace dsinfer::loadgen {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kKeptBodyBytes = 512;  // of a failed response's body, for its error message

double seconds_since(Clock::time_point origin) { return std::chrono::duration<double>(Clock::now() - origin).count(); }

server::HttpCall call_to(const Target& target, std::string method, std::string path) {
  server::HttpCall call;
  call.method = std::move(method);
  call.host = target.host;
  call.port = target.port;
  call.target = target.base_path + path;
  call.headers = {{"Content-Type", "application/json"}};
  if (!target.api_key.empty()) call.headers.emplace_back("Authorization", "Bearer " + target.api_key);
  return call;
}

// "HTTP 404: The model `x` does not exist." from an OpenAI error body, else its first bytes.
std::string status_error(int status, const std::string& body) {
  std::string message = body;
  try {
    const Json parsed = Json::parse(body);
    const Json* error = parsed.find("error");
    const Json* text = error != nullptr ? error->find("message") : nullptr;
    if (text != nullptr && text->is_string()) message = text->as_string();
  } catch (const Error&) {
  }
  return str_cat("HTTP ", status, message.empty() ? "" : ": ", message);
}

// One request in flight, shared by its callbacks.
struct Exchange {
  double sent_s = 0;
  StreamRecorder stream;
  std::string body_start;  // the first bytes, for the message of an error status
};

RequestRecord outcome(const Exchange& exchange, const server::HttpClientResponse& response, const Prompt& prompt) {
  RequestRecord record;
  record.start_s = exchange.sent_s;
  const StreamRecorder& stream = exchange.stream;
  if (!response.error.empty()) {
    record.error = response.error;
  } else if (response.status != 200) {
    record.error = status_error(response.status, exchange.body_start);
  } else if (!stream.error().empty()) {
    record.error = stream.error();
  } else if (stream.token_chunk_times().empty()) {
    record.error = "the stream carried no token";
  } else if (!stream.done()) {
    record.error = "the stream ended without data: [DONE]";
  }
  if (!record.error.empty()) return record;
  record.success = true;
  set_chunk_timings(record, exchange.sent_s, stream.token_chunk_times());
  record.prompt_tokens = stream.prompt_tokens().value_or(prompt.input_len);
  record.output_tokens =
      stream.completion_tokens().value_or(static_cast<int64_t>(stream.token_chunk_times().size()));
  return record;
}

// Requests in flight and finished, shared by the dispatcher and the client's thread.
class Tally {
 public:
  Tally(int64_t total, bool progress) : total_(total), bar_(total, progress) {}

  // Takes a slot once fewer than max_concurrency (0: any number) requests are in flight.
  void acquire(int64_t max_concurrency) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return max_concurrency <= 0 || in_flight_ < max_concurrency; });
    ++in_flight_;
  }
  void release(bool success) {
    std::lock_guard lock(mutex_);
    --in_flight_;
    ++finished_;
    if (!success) ++failed_;
    bar_.update(finished_, failed_);
    changed_.notify_all();
  }
  void wait_all() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return finished_ == total_; });
    bar_.finish();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  const int64_t total_;
  int64_t in_flight_ = 0;
  int64_t finished_ = 0;
  int64_t failed_ = 0;
  ProgressBar bar_;
};

}  // namespace

bool is_chat(const Target& target) { return target.endpoint.ends_with("chat/completions"); }

std::string first_served_model(const Target& target) {
  server::HttpClient client;
  server::HttpCall call = call_to(target, "GET", "/v1/models");
  call.timeout_seconds = 30;
  const server::HttpClientResponse response = client.fetch(call);
  const std::string url = str_cat("http://", target.host, ":", target.port, call.target);
  DSINFER_CHECK(response.error.empty(), "cannot read ", url, ": ", response.error);
  DSINFER_CHECK(response.status == 200, url, " answered ", status_error(response.status, response.body));
  const Json models = Json::parse(response.body);
  const Json* data = models.find("data");
  DSINFER_CHECK(data != nullptr && data->is_array() && data->size() > 0 && data->at(0).find("id") != nullptr,
                url, " lists no model (pass --model)");
  return data->at(0).find("id")->as_string();
}

std::optional<std::string> fetch_metrics_text(const Target& target) {
  server::HttpClient client;
  server::HttpCall call = call_to(target, "GET", "/metrics");
  call.timeout_seconds = 30;
  server::HttpClientResponse response = client.fetch(call);
  if (!response.error.empty() || response.status != 200) return std::nullopt;
  return std::move(response.body);
}

std::string request_body(const Target& target, const Prompt& prompt, bool ignore_eos) {
  Json body;
  body["model"] = target.model;
  if (is_chat(target)) {
    Json message;
    message["role"] = "user";
    message["content"] = prompt.text;
    body["messages"] = Json::Array{message};
  } else if (!prompt.token_ids.empty()) {
    Json ids = Json::array();
    for (int32_t id : prompt.token_ids) ids.push_back(id);
    body["prompt"] = ids;
  } else {
    body["prompt"] = prompt.text;
  }
  body["max_tokens"] = prompt.output_len;
  if (ignore_eos) {
    body["min_tokens"] = prompt.output_len;
    body["ignore_eos"] = true;
  }
  body["stream"] = true;
  body["stream_options"]["include_usage"] = true;
  return body.dump();
}

LoadResult run_load(const Target& target, const std::vector<Prompt>& prompts, const LoadOptions& options) {
  const auto count = static_cast<int64_t>(prompts.size());
  const std::vector<double> arrivals = arrival_times(count, options.request_rate, options.burstiness, options.seed);
  LoadResult result;
  result.records.resize(prompts.size());
  Tally tally(count, options.progress);
  server::HttpClient client;

  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(arrivals[i])));
    tally.acquire(options.max_concurrency);
    auto exchange = std::make_shared<Exchange>();
    server::HttpCall call = call_to(target, "POST", target.endpoint);
    call.body = request_body(target, prompts[i], options.ignore_eos);
    call.timeout_seconds = options.request_timeout_s;
    call.on_data = [exchange, start](std::string_view piece) {
      exchange->stream.on_piece(piece, seconds_since(start));
      if (exchange->body_start.size() < kKeptBodyBytes) exchange->body_start.append(piece.substr(0, kKeptBodyBytes));
    };
    call.on_done = [exchange, start, &prompt = prompts[i], &record = result.records[i],
                    &tally](const server::HttpClientResponse& response) {
      exchange->stream.on_end(seconds_since(start));
      record = outcome(*exchange, response, prompt);
      tally.release(record.success);
    };
    exchange->sent_s = seconds_since(start);
    client.start(std::move(call));
  }
  tally.wait_all();
  result.duration_s = seconds_since(start);
  return result;
}

}  // namespace dsinfer::loadgen
