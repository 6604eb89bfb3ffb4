// The disaggregation tests' harness: a prefill engine and a decode engine in one process, each with
// its own copy of the v3-tiny fixture model and its own UCX agent over TCP, the decode engine's
// announce carried to the prefill engine's add_kv_destination through the control plane's string
// form, as the server layer will. The test steers the announce (deliver, drop, fail, hold) and the
// agents (a stalled one makes no progress; a deaf one drops its notes).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "core/source_path.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"
#include "transfer/ucx_transfer.h"

namespace dsinfer::runtime::testing {

using namespace std::chrono_literals;

// A request's stream as its sink saw it; shared with the sink, which may outlive the test's scope.
struct Collector {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;
  bool finished = false;
  FinishReason reason = FinishReason::kNone;
  std::string error;

  static StreamSink sink(const std::shared_ptr<Collector>& collector) {
    return [collector](const StreamOutput& output) {
      std::lock_guard lock(collector->mutex);
      collector->tokens.insert(collector->tokens.end(), output.token_ids.begin(), output.token_ids.end());
      collector->logprobs.insert(collector->logprobs.end(), output.logprobs.begin(), output.logprobs.end());
      if (output.finished) {
        collector->finished = true;
        collector->reason = output.finish_reason;
        collector->error = output.error;
      }
      collector->changed.notify_all();
    };
  }
  // Until it finished (20 s at most); whether it did.
  bool wait() {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, 20s, [&] { return finished; });
  }
  bool wait_for_tokens(size_t count) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, 20s, [&] { return tokens.size() >= count || finished; }) && tokens.size() >= count;
  }
};

// What the test does to an agent: stalled, it makes no progress (writes into it do not land, the
// notes for it stay unread); deaf, it drops the notes it receives.
struct AgentControl {
  std::atomic<bool> stalled{false};
  std::atomic<bool> deaf{false};
};

class ControlledTransfer final : public transfer::KvTransfer {
 public:
  ControlledTransfer(std::unique_ptr<transfer::KvTransfer> inner, std::shared_ptr<AgentControl> control)
      : inner_(std::move(inner)), control_(std::move(control)) {}
  transfer::Blob address() const override { return inner_->address(); }
  int register_memory(void* base, uint64_t bytes, transfer::MemoryKind kind) override {
    return inner_->register_memory(base, bytes, kind);
  }
  transfer::Blob describe(int region) const override { return inner_->describe(region); }
  int connect(const transfer::Blob& address) override { return inner_->connect(address); }
  int import(int peer, const transfer::Blob& descriptor) override { return inner_->import(peer, descriptor); }
  uint64_t post(int local, int remote, std::span<const transfer::Write> writes, const transfer::Blob& note) override {
    return inner_->post(local, remote, writes, note);
  }
  transfer::TransferState poll(uint64_t transfer) override {
    return control_->stalled ? transfer::TransferState::kInFlight : inner_->poll(transfer);
  }
  std::string error(uint64_t transfer) const override { return inner_->error(transfer); }
  void release(uint64_t transfer) override { inner_->release(transfer); }
  std::vector<transfer::Blob> take_notes() override {
    if (control_->stalled) return {};
    std::vector<transfer::Blob> notes = inner_->take_notes();
    if (control_->deaf) notes.clear();
    return notes;
  }
  void progress() override {
    if (!control_->stalled) inner_->progress();
  }

 private:
  std::unique_ptr<transfer::KvTransfer> inner_;
  std::shared_ptr<AgentControl> control_;
};

struct Model {
  std::unique_ptr<backend::Backend> backend = backend::make_cpu_backend();
  std::unique_ptr<model::DeepseekModel> model;
  explicit Model(const std::string& dir) : model(model::DeepseekModel::load(dir, *backend)) {}
};

// The fixture models: one for each engine of a pair and one for the reference engine (an engine
// drives its backend from its own thread).
struct Models {
  std::string dir = source_path("tests/fixtures/models/v3-tiny");
  Model prefill{dir}, decode{dir}, reference{dir};
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(dir);
};

// How the decode engine's destinations reach the prefill engine.
struct Announcer {
  enum class Policy { kDeliver, kDrop, kFail, kHold };
  std::mutex mutex;
  Policy policy = Policy::kDeliver;
  std::vector<KvDestination> announced;  // every one, in order
  std::vector<std::string> held;         // kHold: their string forms, for the test to deliver
  std::atomic<Engine*> prefill{nullptr};

  void announce(const KvDestination& destination, const std::function<void(std::string)>& done) {
    std::string wire = destination.to_string();
    Policy now;
    {
      std::lock_guard lock(mutex);
      announced.push_back(destination);
      now = policy;
      if (now == Policy::kHold) held.push_back(wire);
    }
    if (now == Policy::kDeliver) prefill.load()->add_kv_destination(KvDestination::from_string(wire));
    done(now == Policy::kFail ? "the bootstrap server is unreachable" : "");
  }
  void set(Policy value) {
    std::lock_guard lock(mutex);
    policy = value;
  }
  size_t count() {
    std::lock_guard lock(mutex);
    return announced.size();
  }
  // Hands the held destinations to the prefill engine.
  void deliver_held() {
    std::vector<std::string> wires;
    {
      std::lock_guard lock(mutex);
      wires.swap(held);
    }
    for (const std::string& wire : wires) prefill.load()->add_kv_destination(KvDestination::from_string(wire));
  }
};

// A request's KvHandoff: its role and room (no bootstrap peer: the tests' announcer takes every
// destination).
inline KvHandoff handoff(KvHandoff::Role role, std::string room) {
  KvHandoff out;
  out.role = role;
  out.room = std::move(room);
  return out;
}

struct PairOptions {
  std::chrono::milliseconds bootstrap_timeout = 20s;
  int64_t layerwise_threshold = 0;
  int drafts = 0;          // both sides' speculative num_tokens
  int prefill_drafts = -1;  // the prefill side's, when it differs
  std::chrono::milliseconds transfer_timeout = 5s;  // the prefill agent's
  int64_t prefill_pages = 96;
  int64_t decode_pages = 64;
  // The prefill engine's executor from the model's (drafts 0): a stand-in for another device.
  std::function<std::unique_ptr<StepExecutor>(std::unique_ptr<StepExecutor>)> wrap_prefill_executor;
};

struct Handed {
  std::shared_ptr<Collector> prefill = std::make_shared<Collector>();
  std::shared_ptr<Collector> decode = std::make_shared<Collector>();
  RequestId prefill_id = 0, decode_id = 0;
};

class PdPair {
 public:
  PdPair(Models& models, const PairOptions& options) : models_(models), options_(options) {
    start_prefill();
    EngineConfig decode = config(DisaggregationMode::kDecode, options.decode_pages, options.drafts, 0s, decode_agent);
    decode.disaggregation.announce = [announcer = announcer](const std::string&, const KvDestination& destination,
                                                            std::function<void(std::string)> done) {
      announcer->announce(destination, done);
    };
    decode_ = std::make_unique<Engine>(*models.decode.model, models.tokenizer, decode);
  }

  Engine& prefill() { return *prefill_; }
  Engine& decode() { return *decode_; }

  // The prefill engine destroyed (its agent with it) and, with restart, made anew.
  void destroy_prefill(bool restart) {
    announcer->prefill = nullptr;
    prefill_.reset();
    if (restart) start_prefill();
  }

  // The decode engine destroyed (its agent with it): its peers' transfers fail.
  void destroy_decode() { decode_.reset(); }

  // One request to both sides, the decode side first (as a router may).
  Handed submit(const std::vector<int32_t>& prompt, RequestOptions options, const std::string& room) {
    Handed handed;
    options.kv_handoff = handoff(KvHandoff::Role::kReceive, room);
    handed.decode_id = decode_->submit(prompt, options, Collector::sink(handed.decode));
    options.kv_handoff = handoff(KvHandoff::Role::kSend, room);
    handed.prefill_id = prefill_->submit(prompt, options, Collector::sink(handed.prefill));
    return handed;
  }

  std::shared_ptr<Announcer> announcer = std::make_shared<Announcer>();
  std::shared_ptr<AgentControl> prefill_agent = std::make_shared<AgentControl>();
  std::shared_ptr<AgentControl> decode_agent = std::make_shared<AgentControl>();

 private:
  EngineConfig config(DisaggregationMode mode, int64_t pages, int drafts, std::chrono::milliseconds transfer_timeout,
                      std::shared_ptr<AgentControl> control) const {
    EngineConfig config;
    config.num_pages = pages;
    config.max_num_batched_tokens = 128;  // long prompts in chunks, beside decodes
    config.speculative.num_tokens = drafts;
    config.disaggregation.mode = mode;
    config.disaggregation.bootstrap_timeout = options_.bootstrap_timeout;
    config.disaggregation.layerwise_threshold = options_.layerwise_threshold;
    config.disaggregation.make_transfer = [transfer_timeout, control] {
      return std::make_unique<ControlledTransfer>(transfer::make_ucx_transfer({"tcp", transfer_timeout}), control);
    };
    return config;
  }
  void start_prefill() {
    const int drafts = options_.prefill_drafts >= 0 ? options_.prefill_drafts : options_.drafts;
    EngineConfig prefill =
        config(DisaggregationMode::kPrefill, options_.prefill_pages, drafts, options_.transfer_timeout, prefill_agent);
    if (options_.wrap_prefill_executor) {
      DSINFER_CHECK(drafts == 0, "pd_pair_testing: a wrapped prefill executor drafts nothing");
      prefill_ = std::make_unique<Engine>(
          options_.wrap_prefill_executor(make_model_executor(*models_.prefill.model, options_.prefill_pages)),
          models_.tokenizer, prefill);
    } else {
      prefill_ = std::make_unique<Engine>(*models_.prefill.model, models_.tokenizer, prefill);
    }
    announcer->prefill = prefill_.get();
  }

  Models& models_;
  PairOptions options_;
  std::unique_ptr<Engine> prefill_;
  std::unique_ptr<Engine> decode_;
};

inline RequestOptions greedy(int64_t max_tokens) {
  RequestOptions options;
  options.sampling.temperature = 0.0f;
  options.max_tokens = max_tokens;
  options.ignore_eos = true;
  return options;
}

inline std::vector<int32_t> prompt_of(int length, int salt) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < length; ++i) prompt.push_back(16 + (i * 37 + salt * 101) % 1000);
  return prompt;
}

// One engine's outputs for every prompt, all submitted at once (a CPU engine's outputs do not
// depend on what else runs); with logprobs when the options ask for them.
inline std::vector<std::shared_ptr<Collector>> reference_outputs(Models& models,
                                                                 const std::vector<std::vector<int32_t>>& prompts,
                                                                 const std::vector<RequestOptions>& options) {
  EngineConfig config;
  config.num_pages = 256;
  Engine engine(*models.reference.model, models.tokenizer, config);
  std::vector<std::shared_ptr<Collector>> out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    out.push_back(std::make_shared<Collector>());
    engine.submit(prompts[i], options[i], Collector::sink(out.back()));
  }
  for (auto& collector : out) EXPECT_TRUE(collector->wait());
  return out;
}

// Idle, its prefix cache flushed, every page free: what any scenario must end with. Held pages may
// take a while to come back (a decode side keeps those a prefill side may still write).
inline void expect_every_page_back(Engine& engine, std::chrono::milliseconds within = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  EngineStats stats;
  while (std::chrono::steady_clock::now() < deadline) {
    stats = engine.stats();
    if (stats.running + stats.waiting == 0 && engine.flush_prefix_cache()) {
      stats = engine.stats();
      if (stats.free_pages == stats.total_pages && stats.cached_pages == 0) return;
    }
    std::this_thread::sleep_for(5ms);
  }
  ADD_FAILURE() << "pages not back: " << stats.free_pages << " of " << stats.total_pages << " free, "
                << stats.running << " running, " << stats.waiting << " waiting";
}

// A request with no handoff on each engine still gives the reference's tokens.
inline void expect_plain_requests_work(Models& models, PdPair& pair) {
  const std::vector<int32_t> prompt = prompt_of(90, 77);
  const std::vector<std::shared_ptr<Collector>> expected = reference_outputs(models, {prompt}, {greedy(6)});
  for (Engine* engine : {&pair.prefill(), &pair.decode()}) {
    auto collector = std::make_shared<Collector>();
    engine->submit(prompt, greedy(6), Collector::sink(collector));
    ASSERT_TRUE(collector->wait());
    EXPECT_EQ(collector->reason, FinishReason::kLength) << collector->error;
    EXPECT_EQ(collector->tokens, expected[0]->tokens);
  }
}

}  // namespace dsinfer::runtime::testing
