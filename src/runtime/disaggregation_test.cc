// Prefill/decode disaggregation end to end on the CPU (pd_pair_testing.h): the decode engine's
// outputs equal one engine's token for token, whole-request and layer-wise, with prefix-cache hits
// on the decode side, with MTP drafts; what is not supported is refused; the control plane's
// encodings round-trip. The faults are in disaggregation_fault_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "runtime/pd_pair_testing.h"

namespace dsinfer::runtime {
namespace {

using namespace testing;

// The model's executor as other executors show themselves: without a cache the handoff can register
// (a sharded model's ranks each hold their own), or without layer reports.
class MaskedExecutor final : public StepExecutor {
 public:
  MaskedExecutor(std::unique_ptr<StepExecutor> inner, bool cache, bool layers)
      : inner_(std::move(inner)), cache_(cache), layers_(layers) {}
  backend::SampledTokens run(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) override {
    return inner_->run(batch, sampling);
  }
  model::LatentCache* kv_cache() override { return cache_ ? inner_->kv_cache() : nullptr; }
  int64_t reported_layers() const override { return layers_ ? inner_->reported_layers() : 0; }
  int64_t vocab_size() const override { return inner_->vocab_size(); }
  int64_t max_model_len() const override { return inner_->max_model_len(); }
  int64_t num_pages() const override { return inner_->num_pages(); }
  std::vector<int32_t> eos_token_ids() const override { return inner_->eos_token_ids(); }

 private:
  std::unique_ptr<StepExecutor> inner_;
  bool cache_, layers_;
};

// A device's layer reports, on the CPU: after_layer comes as each layer is queued, and the layer is
// written later. Its marks are reached one at a time while the engine waits for the step's tokens
// (the wait poll runs before each, while it says it has work), the last before the tokens come back.
class DeviceLikeExecutor final : public StepExecutor {
 public:
  explicit DeviceLikeExecutor(std::unique_ptr<StepExecutor> inner) : inner_(std::move(inner)) {}
  backend::SampledTokens run(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) override {
    backend::SampledTokens tokens = inner_->run(batch, sampling);
    bool polling = static_cast<bool>(poll_);  // until the poll says it has nothing left
    while (state_->reached < state_->made) {
      if (polling) {
        polling = poll_();
        ++state_->polls_with_layers_pending;
      }
      ++state_->reached;
    }
    if (polling) poll_();
    return tokens;
  }
  std::unique_ptr<backend::WorkMark> mark_work() override {
    return std::make_unique<Mark>(state_, state_->made++);
  }
  void set_wait_poll(std::function<bool()> poll) override { poll_ = std::move(poll); }
  model::LatentCache* kv_cache() override { return inner_->kv_cache(); }
  int64_t reported_layers() const override { return inner_->reported_layers(); }
  int64_t vocab_size() const override { return inner_->vocab_size(); }
  int64_t max_model_len() const override { return inner_->max_model_len(); }
  int64_t num_pages() const override { return inner_->num_pages(); }
  std::vector<int32_t> eos_token_ids() const override { return inner_->eos_token_ids(); }

  struct State {
    int64_t made = 0, reached = 0;  // marks
    int64_t polls_with_layers_pending = 0;
  };
  std::shared_ptr<const State> state() const { return state_; }

 private:
  struct Mark final : backend::WorkMark {
    Mark(std::shared_ptr<const State> state, int64_t index) : state(std::move(state)), index(index) {}
    bool reached() override { return index < state->reached; }
    std::shared_ptr<const State> state;
    int64_t index;
  };
  std::unique_ptr<StepExecutor> inner_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
  std::function<bool()> poll_;
};

class DisaggregationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { models_ = new Models; }
  static void TearDownTestSuite() { delete models_; }

  // 32 requests: prompts of 3 to 200 tokens, 4 to 9 new tokens, greedy, a few with logprobs and a
  // few sampled with a seed (the decode side takes the draws after the prefill side's).
  static void make_requests(std::vector<std::vector<int32_t>>& prompts, std::vector<RequestOptions>& options) {
    for (int i = 0; i < 32; ++i) {
      prompts.push_back(prompt_of(3 + (i * 61) % 198, i));
      RequestOptions o = greedy(4 + i % 6);
      if (i % 4 == 1) o.logprobs = 2;
      if (i % 8 == 3) {
        o.sampling.temperature = 0.8f;
        o.sampling.seed = 1000 + i;
      }
      options.push_back(o);
    }
  }

  // Every request through the pair at once: the decode side gives the reference's tokens and
  // logprobs; the prefill side ends with the first token, "length".
  static void expect_pair_matches_one_engine(PdPair& pair) {
    std::vector<std::vector<int32_t>> prompts;
    std::vector<RequestOptions> options;
    make_requests(prompts, options);
    const std::vector<std::shared_ptr<Collector>> expected = reference_outputs(*models_, prompts, options);
    std::vector<Handed> handed;
    for (size_t i = 0; i < prompts.size(); ++i)
      handed.push_back(pair.submit(prompts[i], options[i], str_cat("room-", i)));
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_TRUE(handed[i].decode->wait()) << "request " << i;
      ASSERT_TRUE(handed[i].prefill->wait()) << "request " << i;
      EXPECT_EQ(handed[i].decode->reason, FinishReason::kLength) << "request " << i << ": " << handed[i].decode->error;
      EXPECT_EQ(handed[i].decode->tokens, expected[i]->tokens) << "request " << i;
      EXPECT_EQ(handed[i].prefill->reason, FinishReason::kLength) << "request " << i << ": "
                                                                   << handed[i].prefill->error;
      EXPECT_EQ(handed[i].prefill->tokens, std::vector<int32_t>{expected[i]->tokens.at(0)}) << "request " << i;
      if (options[i].logprobs < 0) continue;
      ASSERT_EQ(handed[i].decode->logprobs.size(), expected[i]->logprobs.size()) << "request " << i;
      for (size_t t = 0; t < expected[i]->logprobs.size(); ++t) {
        EXPECT_EQ(handed[i].decode->logprobs[t].token_id, expected[i]->logprobs[t].token_id);
        EXPECT_EQ(handed[i].decode->logprobs[t].logprob, expected[i]->logprobs[t].logprob);
        EXPECT_EQ(handed[i].decode->logprobs[t].top, expected[i]->logprobs[t].top);
      }
    }
    expect_every_page_back(pair.prefill());
    expect_every_page_back(pair.decode());
  }

  // The layer-wise sends of the tests below, through the pair: every prompt's destination first, so
  // that every layer-wise prompt finds its own when its last chunk is planned; long_prompts: how many
  // went layer by layer.
  static void expect_layerwise_outputs(PdPair& pair, int64_t& long_prompts) {
    pair.announcer->set(Announcer::Policy::kHold);
    std::vector<std::vector<int32_t>> prompts;
    std::vector<RequestOptions> requests;
    make_requests(prompts, requests);
    const std::vector<std::shared_ptr<Collector>> expected = reference_outputs(*models_, prompts, requests);
    std::vector<Handed> handed;
    for (size_t i = 0; i < prompts.size(); ++i) {
      RequestOptions o = requests[i];
      o.kv_handoff = handoff(KvHandoff::Role::kReceive, str_cat("room-", i));
      handed.emplace_back();
      handed.back().decode_id = pair.decode().submit(prompts[i], o, Collector::sink(handed.back().decode));
    }
    for (int i = 0; i < 2000 && pair.announcer->count() < prompts.size(); ++i) std::this_thread::sleep_for(1ms);
    ASSERT_EQ(pair.announcer->count(), prompts.size());
    pair.announcer->deliver_held();
    std::this_thread::sleep_for(20ms);  // the prefill engine takes them in
    for (size_t i = 0; i < prompts.size(); ++i) {
      RequestOptions o = requests[i];
      o.kv_handoff = handoff(KvHandoff::Role::kSend, str_cat("room-", i));
      pair.prefill().submit(prompts[i], o, Collector::sink(handed[i].prefill));
    }
    long_prompts = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_TRUE(handed[i].decode->wait());
      EXPECT_EQ(handed[i].decode->reason, FinishReason::kLength) << handed[i].decode->error;
      EXPECT_EQ(handed[i].decode->tokens, expected[i]->tokens) << "request " << i;
      ASSERT_TRUE(handed[i].prefill->wait());
      long_prompts += prompts[i].size() >= 100;
    }
    EXPECT_EQ(pair.prefill().stats().kv_pushes, 32);
    EXPECT_EQ(pair.prefill().stats().kv_layerwise_pushes, long_prompts);
    expect_every_page_back(pair.prefill());
    expect_every_page_back(pair.decode());
  }

  static Models* models_;
};

Models* DisaggregationTest::models_ = nullptr;

TEST_F(DisaggregationTest, DecodeOutputsEqualOneEnginesTokenForToken) {
  PdPair pair(*models_, {});
  expect_pair_matches_one_engine(pair);
  EXPECT_EQ(pair.prefill().stats().kv_pushes, 32);
  EXPECT_EQ(pair.prefill().stats().kv_layerwise_pushes, 0);
  expect_plain_requests_work(*models_, pair);
}

TEST_F(DisaggregationTest, LayerWiseSendsGiveTheSameOutputs) {
  PairOptions options;
  options.layerwise_threshold = 100;  // the longer prompts layer by layer, the shorter whole
  PdPair pair(*models_, options);
  int64_t long_prompts = 0;
  expect_layerwise_outputs(pair, long_prompts);
  EXPECT_GT(long_prompts, 0);
}

// As a GPU runs them: each layer's pages go once its mark says the device has written it, from the
// engine's wait for the step's tokens, in order.
TEST_F(DisaggregationTest, LayerWiseSendsWaitForEachLayerToBeWritten) {
  PairOptions options;
  options.layerwise_threshold = 100;
  std::shared_ptr<const DeviceLikeExecutor::State> device;
  options.wrap_prefill_executor = [&](std::unique_ptr<StepExecutor> inner) {
    auto wrapped = std::make_unique<DeviceLikeExecutor>(std::move(inner));
    device = wrapped->state();
    return wrapped;
  };
  PdPair pair(*models_, options);
  int64_t long_prompts = 0;
  expect_layerwise_outputs(pair, long_prompts);
  EXPECT_GT(long_prompts, 0);
  ASSERT_NE(device, nullptr);
  // A mark for every decoder layer of every step that computed a layer-wise prompt's last chunk.
  const int64_t layers = models_->prefill.model->config().num_hidden_layers;
  EXPECT_GE(device->made, layers);
  EXPECT_EQ(device->made % layers, 0);
  EXPECT_EQ(device->reached, device->made);
  EXPECT_GT(device->polls_with_layers_pending, 0);
}

TEST_F(DisaggregationTest, EveryPromptLayerWiseStillMatches) {
  PairOptions options;
  options.layerwise_threshold = 1;
  PdPair pair(*models_, options);
  // The destination usually arrives before the prefill side's last chunk; one that comes later
  // falls back to a whole-request send.
  expect_pair_matches_one_engine(pair);
  EXPECT_EQ(pair.prefill().stats().kv_pushes, 32);
}

// A decode side with room for four prompts at a time: receivers wait in the queue for pages as new
// requests do, decoding ones that cross into a fourth page preempt each other (and recompute on the
// decode side, prompt and first token), and every output still matches.
TEST_F(DisaggregationTest, ReceiversWaitForPagesLikeNewRequests) {
  PairOptions options;
  options.decode_pages = 12;
  PdPair pair(*models_, options);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestOptions> requests;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(prompt_of(180 + i, 20 + i));
    requests.push_back(greedy(12));
  }
  const std::vector<std::shared_ptr<Collector>> expected = reference_outputs(*models_, prompts, requests);
  std::vector<Handed> handed;
  for (size_t i = 0; i < prompts.size(); ++i) handed.push_back(pair.submit(prompts[i], requests[i], str_cat("q-", i)));
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(handed[i].decode->wait());
    EXPECT_EQ(handed[i].decode->reason, FinishReason::kLength) << handed[i].decode->error;
    EXPECT_EQ(handed[i].decode->tokens, expected[i]->tokens) << "request " << i;
    ASSERT_TRUE(handed[i].prefill->wait());
    EXPECT_EQ(handed[i].prefill->reason, FinishReason::kLength) << handed[i].prefill->error;
  }
  EXPECT_GT(pair.decode().stats().preemptions, 0);
  expect_every_page_back(pair.prefill());
  expect_every_page_back(pair.decode());
}

TEST_F(DisaggregationTest, DecodePrefixHitReceivesOnlyTheRest) {
  PdPair pair(*models_, {});
  const std::vector<int32_t> first = prompt_of(150, 5);
  std::vector<int32_t> second(first.begin(), first.begin() + 140);  // shares two full pages
  for (int i = 0; i < 30; ++i) second.push_back(900 - i);
  const std::vector<std::shared_ptr<Collector>> expected =
      reference_outputs(*models_, {first, second}, {greedy(5), greedy(5)});
  Handed a = pair.submit(first, greedy(5), "first");
  ASSERT_TRUE(a.decode->wait());
  EXPECT_EQ(a.decode->tokens, expected[0]->tokens);
  Handed b = pair.submit(second, greedy(5), "second");
  ASSERT_TRUE(b.decode->wait());
  EXPECT_EQ(b.decode->reason, FinishReason::kLength) << b.decode->error;
  EXPECT_EQ(b.decode->tokens, expected[1]->tokens);
  ASSERT_EQ(pair.announcer->announced.size(), 2u);
  const KvDestination& rest = pair.announcer->announced[1];
  EXPECT_EQ(rest.first_token, 128);  // two pages kept, the third (tokens 128..169) received
  EXPECT_EQ(rest.pages.size(), 1u);
  ASSERT_TRUE(b.prefill->wait());
  expect_every_page_back(pair.prefill());
  expect_every_page_back(pair.decode());
}

TEST_F(DisaggregationTest, DraftingDecodeSideMatchesAndNeedsADraftingPrefillSide) {
  {
    PairOptions options;
    options.drafts = 2;
    PdPair pair(*models_, options);
    expect_pair_matches_one_engine(pair);
  }
  PairOptions options;
  options.drafts = 2;
  options.prefill_drafts = 0;
  options.bootstrap_timeout = 300ms;
  PdPair pair(*models_, options);
  Handed handed = pair.submit(prompt_of(40, 1), greedy(4), "room");
  ASSERT_TRUE(handed.prefill->wait());
  EXPECT_EQ(handed.prefill->reason, FinishReason::kError);
  EXPECT_NE(handed.prefill->error.find("drafts with the model's MTP modules"), std::string::npos)
      << handed.prefill->error;
  ASSERT_TRUE(handed.decode->wait());
  EXPECT_EQ(handed.decode->reason, FinishReason::kError);
  expect_every_page_back(pair.prefill());
  expect_every_page_back(pair.decode());
}

TEST_F(DisaggregationTest, RefusesWhatItDoesNotTake) {
  PdPair pair(*models_, {});
  EngineConfig plain_config;
  plain_config.num_pages = 16;
  Engine plain(*models_->reference.model, models_->tokenizer, plain_config);
  const std::vector<int32_t> prompt = prompt_of(10, 0);
  auto refused = [&](Engine& engine, RequestOptions options, RequestPart part) {
    try {
      engine.submit(prompt, options, [](const StreamOutput&) {});
      ADD_FAILURE() << "accepted";
    } catch (const InvalidRequest& error) {
      EXPECT_EQ(error.part(), part) << error.what();
    }
  };
  RequestOptions send = greedy(4), receive = greedy(4);
  send.kv_handoff = handoff(KvHandoff::Role::kSend, "r");
  receive.kv_handoff = handoff(KvHandoff::Role::kReceive, "r");
  refused(plain, send, RequestPart::kKvHandoff);
  refused(pair.decode(), send, RequestPart::kKvHandoff);
  refused(pair.prefill(), receive, RequestPart::kKvHandoff);
  RequestOptions no_room = send;
  no_room.kv_handoff->room = "";
  refused(pair.prefill(), no_room, RequestPart::kKvHandoff);
  no_room.kv_handoff->room = std::string(kMaxRoomBytes + 1, 'x');
  refused(pair.prefill(), no_room, RequestPart::kKvHandoff);
  RequestOptions no_tokens = receive;
  no_tokens.max_tokens = 0;
  refused(pair.decode(), no_tokens, RequestPart::kTokenBudget);
  RequestOptions scored = receive;
  scored.prompt_logprobs = 1;
  refused(pair.decode(), scored, RequestPart::kPromptLogprobs);
  EXPECT_THROW(plain.add_kv_destination({}), Error);
  EXPECT_THROW(pair.decode().add_kv_destination({}), Error);
  EXPECT_THROW(plain.kv_endpoint(), Error);
  EXPECT_FALSE(pair.decode().kv_endpoint().cache_description.empty());

  // A decode engine without an announce; executors without a cache to register (a sharded model's)
  // or whose steps report no layers: layer-wise sends refused there, whole ones taken.
  EngineConfig decode;
  decode.num_pages = 16;
  decode.disaggregation.mode = DisaggregationMode::kDecode;
  decode.disaggregation.make_transfer = [] { return transfer::make_ucx_transfer({"tcp"}); };
  EXPECT_THROW(Engine(*models_->reference.model, models_->tokenizer, decode), Error);
  decode.disaggregation.announce = [](const std::string&, const KvDestination&, std::function<void(std::string)> done) {
    done("");
  };
  auto masked = [&](bool cache, bool layers) {
    return std::make_unique<MaskedExecutor>(make_model_executor(*models_->reference.model, 16), cache, layers);
  };
  EXPECT_THROW(Engine(masked(false, true), models_->tokenizer, decode), Error);
  EngineConfig prefill = decode;
  prefill.disaggregation.mode = DisaggregationMode::kPrefill;
  try {
    Engine refused_engine(masked(true, false), models_->tokenizer, prefill);
    ADD_FAILURE() << "layer-wise sends taken without layer reports";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("layerwise_threshold"), std::string::npos) << error.what();
  }
  prefill.disaggregation.layerwise_threshold = 0;
  Engine whole(masked(true, false), models_->tokenizer, prefill);
  EXPECT_FALSE(whole.kv_endpoint().agent_address.empty());
}

TEST(DisaggregationEncoding, DestinationsAndNotesRoundTrip) {
  KvDestination destination;
  destination.room = "room \"7\"";
  destination.agent_address = std::string("\0\x01\xff address", 11);
  destination.cache_description = "description";
  destination.pages = {3, 4, 9};
  destination.first_token = 128;
  destination.drafts = true;
  EXPECT_EQ(KvDestination::from_string(destination.to_string()), destination);
  EXPECT_THROW(KvDestination::from_string("{\"room\": \"r\"}"), Error);
  EXPECT_THROW(KvDestination::from_string("[1]"), Error);
  std::string odd = destination.to_string();
  odd.replace(odd.find("00"), 2, "zz");
  EXPECT_THROW(KvDestination::from_string(odd), Error);

  HandoffNote note{"room", 42, TokenLogprob{42, -0.25f, {{42, -0.25f}, {7, -std::numeric_limits<float>::infinity()}}}};
  const HandoffNote back = HandoffNote::decode(note.encode());
  EXPECT_EQ(back.room, note.room);
  EXPECT_EQ(back.token, 42);
  ASSERT_TRUE(back.logprob);
  EXPECT_EQ(back.logprob->logprob, -0.25f);
  EXPECT_EQ(back.logprob->top, note.logprob->top);
  EXPECT_FALSE(HandoffNote::decode(HandoffNote{"r", 1, std::nullopt}.encode()).logprob);
}

}  // namespace
}  // namespace dsinfer::runtime
