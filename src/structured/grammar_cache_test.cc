#include "structured/grammar_cache.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace dsinfer::structured {
namespace {

// Fulfils a miss with a null grammar of `bytes` (the cache never looks inside).
void finish(GrammarCache& cache, const std::string& key, size_t bytes) {
  GrammarCache::Lookup lookup = cache.find_or_reserve(key);
  ASSERT_TRUE(lookup.promise) << key << " was expected to be a miss";
  lookup.promise->set_value(nullptr);
  cache.finished(key, bytes);
}

bool cached(GrammarCache& cache, const std::string& key) {
  int64_t misses = cache.stats().misses;
  GrammarCache::Lookup lookup = cache.find_or_reserve(key);
  if (lookup.promise) {  // undo the reservation this probe made
    lookup.promise->set_exception(std::make_exception_ptr(std::runtime_error("probe")));
    cache.forget(key);
  }
  return cache.stats().misses == misses;
}

TEST(GrammarCacheTest, ASecondLookupWhileCompilingSharesTheFuture) {
  GrammarCache cache(1000);
  GrammarCache::Lookup first = cache.find_or_reserve("a");
  GrammarCache::Lookup second = cache.find_or_reserve("a");
  ASSERT_TRUE(first.promise);
  EXPECT_FALSE(second.promise);
  first.promise->set_value(nullptr);
  cache.finished("a", 10);
  EXPECT_TRUE(second.future.valid());
  EXPECT_EQ(second.future.get(), nullptr);
  GrammarCacheStats stats = cache.stats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.bytes, 10u);
}

TEST(GrammarCacheTest, EvictsTheLeastRecentlyUsedBeyondTheBudget) {
  GrammarCache cache(100);
  finish(cache, "a", 40);
  finish(cache, "b", 40);
  ASSERT_TRUE(cached(cache, "a"));  // a is now more recent than b
  finish(cache, "c", 40);           // 120 > 100: b goes
  EXPECT_FALSE(cached(cache, "b"));
  EXPECT_TRUE(cached(cache, "a"));
  EXPECT_TRUE(cached(cache, "c"));
  EXPECT_EQ(cache.stats().evictions, 1);
  EXPECT_EQ(cache.stats().bytes, 80u);
}

TEST(GrammarCacheTest, KeepsTheNewestEntryEvenWhenItAloneExceedsTheBudget) {
  GrammarCache cache(100);
  finish(cache, "a", 50);
  finish(cache, "huge", 500);
  EXPECT_FALSE(cached(cache, "a"));
  EXPECT_TRUE(cached(cache, "huge"));
}

TEST(GrammarCacheTest, NeverEvictsAnEntryStillCompiling) {
  GrammarCache cache(100);
  GrammarCache::Lookup pending = cache.find_or_reserve("pending");
  finish(cache, "a", 90);
  finish(cache, "b", 90);  // over budget: a goes, pending stays
  EXPECT_FALSE(cached(cache, "a"));
  GrammarCache::Lookup again = cache.find_or_reserve("pending");
  EXPECT_FALSE(again.promise);
  pending.promise->set_value(nullptr);
  cache.finished("pending", 1);
}

TEST(GrammarCacheTest, AFailedCompileIsForgotten) {
  GrammarCache cache(100);
  GrammarCache::Lookup lookup = cache.find_or_reserve("bad");
  lookup.promise->set_exception(std::make_exception_ptr(std::runtime_error("bad schema")));
  cache.forget("bad");
  EXPECT_THROW(lookup.future.get(), std::runtime_error);
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_TRUE(cache.find_or_reserve("bad").promise);  // compiled again next time
}

}  // namespace
}  // namespace dsinfer::structured
