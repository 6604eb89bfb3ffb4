// The host KV tier (issue 14): the store's LRU bound and its keys; pages spilled from and restored
// into a latent cache byte for byte, through a store that lends its memory and one that does not;
// and the engine on the bundled model with a pool of a few pages, whose evicted prefixes come back
// from host memory as prefix hits with the outputs of a pool that never evicts.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "backend/make_backend.h"
#include "backend/test_device.h"
#include "core/source_path.h"
#include "runtime/engine.h"
#include "runtime/host_kv_store.h"
#include "runtime/host_kv_tier.h"
#include "runtime/stream_collector.h"
#include "runtime/testing_executor.h"

namespace dsinfer::runtime {
namespace {

std::vector<std::byte> bytes_of(int value, size_t size) { return std::vector<std::byte>(size, std::byte(value)); }

PageKey key(uint64_t n) { return {n, n * 7}; }

TEST(HostKvStore, KeepsTheMostRecentlyUsedPagesWithinItsBudget) {
  HostKvStore store(16, 3 * 16 + 15);  // room for three pages, not four
  EXPECT_EQ(store.capacity_pages(), 3);
  for (int n = 1; n <= 3; ++n) EXPECT_TRUE(store.put(key(n), bytes_of(n, 16)));
  EXPECT_FALSE(store.get(key(1)).empty());  // 1 is used: 2 is now the oldest
  EXPECT_TRUE(store.put(key(4), bytes_of(4, 16)));
  EXPECT_FALSE(store.contains(key(2)));
  for (int n : {1, 3, 4}) {
    std::span<const std::byte> page = store.get(key(n));
    ASSERT_EQ(page.size(), 16u) << n;
    EXPECT_EQ(std::vector<std::byte>(page.begin(), page.end()), bytes_of(n, 16)) << n;
  }
  KvStoreUsage usage = store.usage();
  EXPECT_EQ(usage.pages, 3);
  EXPECT_EQ(usage.bytes, 48);
  EXPECT_LE(usage.bytes, usage.capacity_bytes);
  // A held key keeps its slot and its bytes; lending a new one takes the oldest slot.
  EXPECT_EQ(store.lend(key(3)).data(), store.get(key(3)).data());
  EXPECT_EQ(store.get(key(3))[0], std::byte(3));
  EXPECT_EQ(store.lend(key(5)).size(), 16u);
  EXPECT_FALSE(store.contains(key(1)));
  store.clear();
  EXPECT_EQ(store.usage().pages, 0);
  EXPECT_TRUE(store.get(key(4)).empty());

  HostKvStore none(16, 15);
  EXPECT_FALSE(none.put(key(1), bytes_of(1, 16)));
  EXPECT_TRUE(none.lend(key(1)).empty());
}

TEST(PageKeys, APageKeyDependsOnEveryTokenBeforeItsEnd) {
  std::vector<int32_t> a(128), b(128);
  for (int i = 0; i < 128; ++i) a[i] = b[i] = i;
  b[3] = 1000;  // page 0 differs, page 1 has the same tokens
  std::vector<PageKey> keys_a = page_keys(a, 64, 2), keys_b = page_keys(b, 64, 2);
  EXPECT_NE(keys_a[0], keys_b[0]);
  EXPECT_NE(keys_a[1], keys_b[1]);
  EXPECT_EQ(keys_a, page_keys(a, 64, 2));
  EXPECT_EQ(keys_a[1], next_page_key(keys_a[0], std::span(a).subspan(64, 64)));
  std::swap(a[70], a[71]);  // order matters
  EXPECT_NE(page_keys(a, 64, 2)[1], keys_a[1]);
}

// A store that lends nothing, as one outside the process would: the tier stages its copies.
class CopyingStore final : public KvStore {
 public:
  CopyingStore(int64_t page_bytes, int64_t capacity) : inner_(page_bytes, capacity) {}
  int64_t page_bytes() const override { return inner_.page_bytes(); }
  bool put(const PageKey& key, std::span<const std::byte> page) override { return inner_.put(key, page); }
  std::span<const std::byte> get(const PageKey& key) override { return inner_.get(key); }
  bool contains(const PageKey& key) const override { return inner_.contains(key); }
  KvStoreUsage usage() const override { return inner_.usage(); }
  void clear() override { inner_.clear(); }

 private:
  HostKvStore inner_;
};

// A latent cache of 2 layers and 6 pages on the CPU, with its pool, prefix cache and tier.
class TierOnACache : public ::testing::TestWithParam<bool> {
 protected:
  static constexpr int64_t kWidth = 8;
  void SetUp() override {
    backend_ = backend::make_backend("cpu");
    cache_ = std::make_unique<model::LatentCache>(*backend_, 2, 6, kWidth, DType::kF32);
    const int64_t page_bytes = cache_page_bytes(*cache_);
    EXPECT_EQ(page_bytes, 2 * 64 * kWidth * 4);
    std::unique_ptr<KvStore> store;
    if (GetParam()) {
      store = std::make_unique<HostKvStore>(page_bytes, 8 * page_bytes);
    } else {
      store = std::make_unique<CopyingStore>(page_bytes, 8 * page_bytes);
    }
    tier_ = std::make_unique<HostKvTier>(std::move(store), CacheAccess{backend_.get(), cache_.get()}, pool_, prefix_);
    prefix_.set_eviction_sink([this](std::span<const PrefixCache::EvictedPage> evicted) { tier_->spill(evicted); });
  }
  // Every value of page `page` in every layer: a function of (layer, page, seed).
  void fill(int32_t page, float seed) {
    for (int64_t layer = 0; layer < 2; ++layer) {
      float* rows = cache_->layer(layer).data<float>() + page * 64 * kWidth;
      for (int64_t i = 0; i < 64 * kWidth; ++i) rows[i] = seed + static_cast<float>(layer * 1000 + i);
    }
  }
  bool holds(int32_t page, float seed) {
    for (int64_t layer = 0; layer < 2; ++layer) {
      const float* rows = cache_->layer(layer).data<float>() + page * 64 * kWidth;
      for (int64_t i = 0; i < 64 * kWidth; ++i)
        if (rows[i] != seed + static_cast<float>(layer * 1000 + i)) return false;
    }
    return true;
  }

  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<model::LatentCache> cache_;
  PagePool pool_{6};
  PrefixCache prefix_{pool_, 64};
  std::unique_ptr<HostKvTier> tier_;
};

TEST_P(TierOnACache, EvictedPagesComeBackByteForByteUnderTheirPath) {
  std::vector<int32_t> tokens(3 * 64 + 5);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i * 3 + 1);
  std::vector<int32_t> pages = pool_.allocate(3);
  for (int i = 0; i < 3; ++i) fill(pages[i], 10.0f * static_cast<float>(i + 1));
  prefix_.insert(tokens, pages);
  for (int32_t page : pages) pool_.release(page);
  EXPECT_EQ(prefix_.evict(3), 3);
  EXPECT_EQ(tier_->stats().spilled_pages, 3);
  EXPECT_EQ(tier_->stats().pages, 3);
  // The pages go to others, who write over them.
  std::vector<int32_t> others = pool_.allocate(6);
  for (int32_t page : others) fill(page, -1.0f);
  for (int32_t page : others) pool_.release(page);

  // A prompt along the same path: the first two pages come back (the limit keeps the third out).
  std::vector<int32_t> restored = prefix_.match(tokens, 2 * 64 + 10);
  EXPECT_TRUE(restored.empty());
  EXPECT_EQ(tier_->restore(tokens, 2 * 64 + 10, restored), 2);
  ASSERT_EQ(restored.size(), 2u);
  EXPECT_TRUE(holds(restored[0], 10.0f));
  EXPECT_TRUE(holds(restored[1], 20.0f));
  EXPECT_EQ(tier_->stats().restored_pages, 2);
  EXPECT_EQ(tier_->stats().hit_tokens, 128);
  // They belong to the prefix cache now, as computed pages do.
  std::vector<int32_t> matched = prefix_.match(tokens, 3 * 64);
  EXPECT_EQ(matched, restored);
  for (int32_t page : matched) pool_.release(page);
  for (int32_t page : restored) pool_.release(page);
  EXPECT_EQ(prefix_.cached(), 2);

  // The same tokens after another first page are another path: nothing to restore.
  std::vector<int32_t> other_path = tokens;
  other_path[0] = 999;
  std::vector<int32_t> none;
  EXPECT_EQ(tier_->restore(other_path, 3 * 64, none), 0);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(prefix_.clear(), 2);
  EXPECT_EQ(pool_.free_count(), pool_.total());
}

TEST_P(TierOnACache, ARestoreWithoutFreePagesRestoresNothingAndLeaksNothing) {
  std::vector<int32_t> tokens(2 * 64 + 1, 5);
  std::vector<int32_t> pages = pool_.allocate(2);
  prefix_.insert(tokens, pages);
  for (int32_t page : pages) pool_.release(page);
  prefix_.evict(2);
  std::vector<int32_t> held = pool_.allocate(6);  // every page held by running sequences
  std::vector<int32_t> restored = prefix_.match(tokens, 2 * 64);
  EXPECT_EQ(tier_->restore(tokens, 2 * 64, restored), 0);
  EXPECT_TRUE(restored.empty());
  for (int32_t page : held) pool_.release(page);
  EXPECT_EQ(pool_.free_count(), pool_.total());
  EXPECT_EQ(prefix_.cached(), 0);
}

INSTANTIATE_TEST_SUITE_P(LendingOrCopying, TierOnACache, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Lending" : "Copying"; });

// The bundled model served by engines that run one request at a time, so that the only difference
// between them is the cache.
class TierOnTheModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = source_path("tests/fixtures/models/v3-tiny");
    backend_ = backend::make_backend(backend::test_device()).release();
    model_ = model::DeepseekModel::load(dir, *backend_).release();
    tokenizer_ = new tokenizer::Tokenizer(tokenizer::Tokenizer::from_dir(dir));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete model_;
    delete backend_;
  }

  // Pages of `pages` pages, a host tier of `host_pages` pages (0: none).
  static std::unique_ptr<Engine> make(int64_t pages, int64_t host_pages) {
    EngineConfig config;
    config.num_pages = pages;
    config.max_num_seqs = 1;
    config.host_kv_cache.bytes = host_pages * page_bytes();
    return std::make_unique<Engine>(*model_, *tokenizer_, config);
  }
  static int64_t page_bytes() { return model_->page_bytes(); }

  struct Answer {
    std::vector<int32_t> tokens;
    int64_t cached_tokens = 0;
  };
  // Prompts A, B, C of 200 tokens (three full pages each), then A and B again, one at a time.
  static std::vector<Answer> serve(Engine& engine) {
    std::vector<std::vector<int32_t>> prompts;
    for (int p = 0; p < 3; ++p) {
      prompts.emplace_back();
      for (int i = 0; i < 200; ++i) prompts.back().push_back(16 + (i * 37 + p * 101) % 1000);
    }
    std::vector<Answer> answers;
    for (int p : {0, 1, 2, 0, 1}) {
      RequestOptions options;
      options.sampling.temperature = 0.0f;
      options.max_tokens = 8;
      options.ignore_eos = true;
      Collector collector;
      engine.submit(prompts[p], options, collector.sink());
      collector.wait();
      answers.push_back({collector.tokens, collector.last.cached_tokens});
    }
    // The engine publishes its stats just after it hands the last output over.
    for (int i = 0; i < 10000 && (engine.stats().running || engine.stats().waiting); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return answers;
  }

  static backend::Backend* backend_;
  static model::DeepseekModel* model_;
  static tokenizer::Tokenizer* tokenizer_;
};

backend::Backend* TierOnTheModel::backend_ = nullptr;
model::DeepseekModel* TierOnTheModel::model_ = nullptr;
tokenizer::Tokenizer* TierOnTheModel::tokenizer_ = nullptr;

TEST_F(TierOnTheModel, ATinyPoolGetsEvictedPrefixesBackFromHostMemoryWithTheSameOutputs) {
  auto unbounded = make(64, 0);
  const std::vector<Answer> expected = serve(*unbounded);
  EXPECT_EQ(expected[3].cached_tokens, 192);
  EXPECT_EQ(expected[4].cached_tokens, 192);

  auto tiny = make(5, 16);  // a request needs 4 of the 5 pages: each one evicts the last
  const std::vector<Answer> answers = serve(*tiny);
  for (size_t i = 0; i < answers.size(); ++i) {
    EXPECT_EQ(answers[i].tokens, expected[i].tokens) << "request " << i;
    EXPECT_EQ(answers[i].cached_tokens, expected[i].cached_tokens) << "request " << i;
  }
  const EngineStats stats = tiny->stats();
  EXPECT_GE(stats.host_kv.spilled_pages, 6);
  EXPECT_EQ(stats.host_kv.restored_pages, 6);  // A's three and B's three
  EXPECT_EQ(stats.host_kv.hit_tokens, 2 * 192);
  EXPECT_EQ(stats.prefix_hits, unbounded->stats().prefix_hits);
  EXPECT_EQ(stats.host_kv.capacity_bytes, 16 * page_bytes());
  EXPECT_EQ(stats.host_kv.bytes, stats.host_kv.pages * page_bytes());

  // /flush_cache empties both tiers and gives every page back.
  EXPECT_TRUE(tiny->flush_prefix_cache());
  const EngineStats flushed = tiny->stats();
  EXPECT_EQ(flushed.cached_pages, 0);
  EXPECT_EQ(flushed.free_pages, flushed.total_pages);
  EXPECT_EQ(flushed.host_kv.pages, 0);
}

TEST_F(TierOnTheModel, TheHostBudgetBoundsWhatItKeeps) {
  auto unbounded = make(64, 0);
  const std::vector<Answer> expected = serve(*unbounded);
  auto tiny = make(5, 2);
  const std::vector<Answer> answers = serve(*tiny);
  for (size_t i = 0; i < answers.size(); ++i) EXPECT_EQ(answers[i].tokens, expected[i].tokens) << "request " << i;
  const EngineStats stats = tiny->stats();
  EXPECT_EQ(stats.host_kv.pages, 2);
  EXPECT_LE(stats.host_kv.bytes, stats.host_kv.capacity_bytes);
  EXPECT_LT(stats.prefix_hits, unbounded->stats().prefix_hits);  // some pages were computed again
  EXPECT_TRUE(tiny->flush_prefix_cache());
  EXPECT_EQ(tiny->stats().free_pages, tiny->stats().total_pages);
}

TEST_F(TierOnTheModel, WithTheTierOffATinyPoolComputesEvictedPrefixesAgain) {
  auto unbounded = make(64, 0);
  const std::vector<Answer> expected = serve(*unbounded);
  auto tiny = make(5, 0);
  const std::vector<Answer> answers = serve(*tiny);
  for (size_t i = 0; i < answers.size(); ++i) EXPECT_EQ(answers[i].tokens, expected[i].tokens) << "request " << i;
  EXPECT_EQ(answers[3].cached_tokens, 0);
  const EngineStats stats = tiny->stats();
  EXPECT_EQ(stats.host_kv.capacity_bytes, 0);
  EXPECT_EQ(stats.host_kv.spilled_pages, 0);
  EXPECT_EQ(stats.host_kv.restored_pages, 0);
  EXPECT_EQ(stats.prefix_hits, 0);
  EXPECT_TRUE(tiny->flush_prefix_cache());
  EXPECT_EQ(tiny->stats().free_pages, tiny->stats().total_pages);
}

TEST_F(TierOnTheModel, LayoutsItCannotServeAreRefused) {
  EngineConfig config;
  config.num_pages = 8;
  config.host_kv_cache.bytes = int64_t{1} << 30;
  config.enable_prefix_caching = false;
  EXPECT_THROW(Engine(*model_, *tokenizer_, config), Error);  // nothing evicts
  config.enable_prefix_caching = true;
  config.host_kv_cache.bytes = page_bytes() - 1;
  EXPECT_THROW(Engine(*model_, *tokenizer_, config), Error);  // not one page
  config.host_kv_cache.bytes = int64_t{1} << 30;
  auto stand_in = std::make_unique<HashingExecutor>(1024, 8, 4096, std::vector<int32_t>{1});
  EXPECT_THROW(Engine(std::move(stand_in), *tokenizer_, config), Error);  // no latent cache to copy
  config.host_kv_cache = {};
  config.host_kv_cache.ratio = 2.0;  // SGLang's --hicache-ratio: twice the device cache
  EXPECT_EQ(Engine(*model_, *tokenizer_, config).stats().host_kv.capacity_bytes, 16 * page_bytes());
}

}  // namespace
}  // namespace dsinfer::runtime
