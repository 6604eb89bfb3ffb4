// The page pool, the prefix cache and the two scheduling steps, each on its own.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>

#include "core/error.h"
#include "runtime/capacity.h"
#include "runtime/micro_batch.h"
#include "runtime/page_pool.h"
#include "runtime/prefix_cache.h"

namespace dsinfer::runtime {
namespace {

constexpr int kPage = 4;  // small pages keep the cases readable

std::vector<int32_t> iota_tokens(int count, int start = 100) {
  std::vector<int32_t> tokens(count);
  std::iota(tokens.begin(), tokens.end(), start);
  return tokens;
}

TEST(PagePool, CountsHoldsAndRefusesMisuse) {
  PagePool pool(4);
  std::vector<int32_t> pages = pool.allocate(3);
  EXPECT_EQ(pool.free_count(), 1);
  EXPECT_THROW(pool.allocate(2), Error);
  pool.retain(pages[0]);
  pool.release(pages[0]);
  EXPECT_EQ(pool.ref_count(pages[0]), 1);
  for (int32_t page : pages) pool.release(page);
  EXPECT_EQ(pool.free_count(), 4);
  EXPECT_THROW(pool.release(pages[0]), Error);  // double free
  EXPECT_THROW(pool.retain(pages[1]), Error);   // not in use
}

// DP attention's pool: a group of consecutive ids per DP group, each with its own free list and
// its own count of cached-only pages.
TEST(PagePool, GroupsHandOutTheirOwnPagesOnly) {
  PagePool pool(8, 2);
  EXPECT_EQ(pool.group_size(), 4);
  std::vector<int32_t> one = pool.allocate(3, 1);
  for (int32_t page : one) EXPECT_EQ(pool.group_of(page), 1) << page;
  EXPECT_EQ(pool.free_count(1), 1);
  EXPECT_EQ(pool.free_count(0), 4);
  EXPECT_EQ(pool.free_count(), 5);
  EXPECT_THROW(pool.allocate(2, 1), Error);  // group 0's free pages are not group 1's
  EXPECT_THROW(pool.allocate(1, 2), Error);
  pool.set_cached(one[0], true);
  EXPECT_EQ(pool.cached_only_count(1), 1);
  EXPECT_EQ(pool.cached_only_count(0), 0);
  pool.set_cached(one[0], false);
  for (int32_t page : one) pool.release(page);
  EXPECT_EQ(pool.free_count(1), 4);
  EXPECT_THROW(PagePool(9, 2), Error);  // groups of equal size only
}

// A prompt matches the group whose tree holds the longest part of it; eviction frees a given group.
TEST(PrefixCache, EachPageGroupHasItsOwnTree) {
  PagePool pool(8, 2);
  PrefixCache cache(pool, kPage);
  std::vector<int32_t> a = iota_tokens(8), b = iota_tokens(12);  // b extends a
  std::vector<int32_t> in0 = pool.allocate(1, 0), in1 = pool.allocate(3, 1);
  cache.insert(a, in0);  // a's first page in group 0
  cache.insert(b, in1);  // all of b in group 1, its first page too (its own tree)
  EXPECT_EQ(cache.cached(), 4);
  for (int32_t page : in0) pool.release(page);
  for (int32_t page : in1) pool.release(page);
  std::vector<int32_t> hit = cache.match(b, 12);
  EXPECT_EQ(hit, in1);  // group 1 holds 3 pages of it, group 0 one
  for (int32_t page : hit) pool.release(page);
  EXPECT_EQ(cache.evictable(0), 1);
  EXPECT_EQ(cache.evictable(1), 3);
  EXPECT_EQ(cache.evict(10, 0), 1);  // group 0's page only
  EXPECT_EQ(cache.evictable(1), 3);
  EXPECT_EQ(pool.free_count(0), 4);
  std::vector<int32_t> mixed = {in0[0], in1[0]};
  EXPECT_THROW(cache.insert(a, {pool.allocate(1, 0)[0], in1[1]}), Error);  // pages of two groups
}

TEST(PrefixCache, MatchesWholePagesOfTheLongestPrefix) {
  PagePool pool(16);
  {
    PrefixCache cache(pool, kPage);
    std::vector<int32_t> tokens = iota_tokens(10);  // two full pages and a partial one
    std::vector<int32_t> pages = pool.allocate(3);
    cache.insert(tokens, pages);
    EXPECT_EQ(cache.cached(), 2);
    for (int32_t page : pages) pool.release(page);  // the sequence ends; the tree keeps two pages
    EXPECT_EQ(pool.used_count(), 2);
    EXPECT_EQ(cache.evictable(), 2);

    std::vector<int32_t> longer = iota_tokens(12);
    std::vector<int32_t> hit = cache.match(longer, 11);
    EXPECT_EQ(hit, std::vector<int32_t>(pages.begin(), pages.begin() + 2));
    EXPECT_EQ(cache.evictable(), 0);  // held by the new sequence now
    EXPECT_EQ(cache.match(longer, 7).size(), 1u);  // max_tokens cuts to whole pages
    std::vector<int32_t> other = longer;
    other[5] = 7;  // differs in the second page
    EXPECT_EQ(cache.match(other, 12).size(), 1u);
    for (int32_t page : hit) pool.release(page);
    pool.release(hit[0]);
    pool.release(hit[0]);
    EXPECT_EQ(cache.hit_tokens(), 8 + 4 + 4);
  }
  EXPECT_EQ(pool.free_count(), 16);  // the destructor released the tree's holds
}

TEST(PrefixCache, EvictsLeastRecentlyUsedLeavesOnly) {
  PagePool pool(8);
  PrefixCache cache(pool, kPage);
  std::vector<int32_t> a = iota_tokens(8, 0), b = iota_tokens(8, 0);
  b[4] = 99;  // shares the first page with a
  std::vector<int32_t> pages_a = pool.allocate(2);
  cache.insert(a, pages_a);
  std::vector<int32_t> pages_b = {pages_a[0], pool.allocate(1)[0]};
  pool.retain(pages_a[0]);
  cache.insert(b, pages_b);
  for (int32_t page : pages_a) pool.release(page);
  for (int32_t page : pages_b) pool.release(page);
  EXPECT_EQ(cache.cached(), 3);
  std::vector<int32_t> touch = cache.match(a, 8);  // a becomes most recently used
  for (int32_t page : touch) pool.release(page);
  EXPECT_EQ(cache.evict(1), 1);                    // b's leaf goes first
  EXPECT_EQ(cache.match(b, 8).size(), 1u);
  pool.release(pages_a[0]);
  EXPECT_EQ(cache.evict(10), 2);  // then a's leaf, then the shared root page
  EXPECT_EQ(pool.free_count(), 8);
}

// A leaf's parent that goes unused competes with the other leaves as soon as its last child is
// evicted (the tree's rescan used to evict every leaf it had found first, the newer ones included).
TEST(PrefixCache, AnExposedParentIsEvictedBeforeNewerLeaves) {
  PagePool pool(8);
  PrefixCache cache(pool, kPage);
  std::vector<int32_t> old_prompt = iota_tokens(8, 0), new_prompt = iota_tokens(4, 50);
  std::vector<int32_t> old_pages = pool.allocate(2), new_pages = pool.allocate(1);
  cache.insert(old_prompt, old_pages);
  cache.insert(new_prompt, new_pages);
  for (int32_t page : old_pages) pool.release(page);
  pool.release(new_pages[0]);
  EXPECT_EQ(cache.evict(2), 2);  // the old prompt's two pages, not the newer prompt's
  EXPECT_EQ(pool.ref_count(old_pages[0]), 0);
  EXPECT_EQ(pool.ref_count(old_pages[1]), 0);
  std::vector<int32_t> hit = cache.match(new_prompt, 4);
  ASSERT_EQ(hit, new_pages);
  pool.release(hit[0]);
}

// A model of the tree to check the cache against: each node's page, parent and last use, and the
// rule that eviction takes, one page at a time, the least recently used leaf only the tree holds.
class PrefixTreeModel {
 public:
  explicit PrefixTreeModel(const PagePool& pool) : pool_(pool) {}

  void use(const std::vector<std::vector<int32_t>>& path, const std::vector<int32_t>& pages, bool adds) {
    ++clock_;
    std::vector<std::vector<int32_t>> prefix;
    for (size_t i = 0; i < path.size(); ++i) {
      prefix.push_back(path[i]);
      auto it = nodes_.find(prefix);
      if (it == nodes_.end()) {
        if (!adds) return;
        it = nodes_.emplace(prefix, Node{pages[i], 0, 0}).first;
        if (i > 0) ++nodes_.at(std::vector(prefix.begin(), prefix.end() - 1)).children;
      }
      it->second.last_used = clock_;
    }
  }

  std::vector<int32_t> evict(int32_t count) {
    std::vector<int32_t> evicted;
    while (static_cast<int32_t>(evicted.size()) < count) {
      auto oldest = nodes_.end();
      for (auto it = nodes_.begin(); it != nodes_.end(); ++it) {
        if (it->second.children > 0 || pool_.ref_count(it->second.page) != 1) continue;
        if (oldest == nodes_.end() || it->second.last_used < oldest->second.last_used) oldest = it;
      }
      if (oldest == nodes_.end()) break;
      evicted.push_back(oldest->second.page);
      if (oldest->first.size() > 1) --nodes_.at(std::vector(oldest->first.begin(), oldest->first.end() - 1)).children;
      nodes_.erase(oldest);
    }
    return evicted;
  }

  size_t size() const { return nodes_.size(); }

 private:
  struct Node {
    int32_t page;
    uint64_t last_used;
    int children;
  };
  const PagePool& pool_;
  std::map<std::vector<std::vector<int32_t>>, Node> nodes_;  // by the page keys from the root
  uint64_t clock_ = 0;
};

// Thousands of cached pages in a bushy tree, sequences that keep some of them in use, and
// evictions of a few pages at a time: every eviction frees exactly the pages the model picks.
TEST(PrefixCache, EvictsInLeastRecentlyUsedOrderAmongThousandsOfPages) {
  constexpr int kPages = 6000;
  PagePool pool(kPages);
  PrefixCache cache(pool, kPage);
  PrefixTreeModel model(pool);
  std::mt19937 random(7);
  std::vector<std::vector<int32_t>> running;  // pages held by sequences still running
  int evictions = 0;
  for (int step = 0; step < 4000; ++step) {
    // A prompt of 1 to 8 pages whose first pages come from few choices, so prefixes are shared.
    std::vector<std::vector<int32_t>> path(1 + random() % 8);
    std::vector<int32_t> tokens;
    for (size_t i = 0; i < path.size(); ++i) {
      path[i] = std::vector<int32_t>(kPage, static_cast<int32_t>(random() % (i < 2 ? 3 : 40)));
      path[i][0] = static_cast<int32_t>(i);
      tokens.insert(tokens.end(), path[i].begin(), path[i].end());
    }
    std::vector<int32_t> pages = cache.match(tokens, static_cast<int64_t>(tokens.size()));
    model.use(path, {}, false);
    const int32_t missing = static_cast<int32_t>(path.size() - pages.size());
    if (pool.free_count() < missing) {
      const int32_t count = missing - pool.free_count() + static_cast<int32_t>(random() % 3);
      const std::vector<int32_t> expected = model.evict(count);
      ASSERT_EQ(cache.evict(count), static_cast<int32_t>(expected.size())) << "step " << step;
      for (int32_t page : expected) ASSERT_EQ(pool.ref_count(page), 0) << "page " << page << ", step " << step;
      ++evictions;
    }
    if (pool.free_count() < missing) {  // running sequences hold the rest: let them finish
      for (const auto& held : running)
        for (int32_t page : held) pool.release(page);
      running.clear();
      for (int32_t page : pages) pool.release(page);
      continue;
    }
    std::vector<int32_t> added = pool.allocate(missing);
    pages.insert(pages.end(), added.begin(), added.end());
    cache.insert(tokens, pages);
    model.use(path, pages, true);
    ASSERT_EQ(cache.cached(), static_cast<int32_t>(model.size()));
    if (random() % 4 == 0) {
      running.push_back(pages);
    } else {
      for (int32_t page : pages) pool.release(page);
    }
    if (running.size() > 8) {
      for (int32_t page : running.front()) pool.release(page);
      running.erase(running.begin());
    }
  }
  EXPECT_GT(evictions, 100);
  EXPECT_GT(model.size(), 1000u);
  for (const auto& held : running)
    for (int32_t page : held) pool.release(page);
  EXPECT_EQ(cache.evict(kPages), static_cast<int32_t>(model.evict(kPages).size()));
  EXPECT_EQ(cache.cached(), 0);
  EXPECT_EQ(pool.free_count(), kPages);
}

Candidate candidate(int64_t index, bool running, int64_t pending, int64_t prompt, double arrival_ms) {
  return {index, running, pending, prompt, Clock::time_point{} + std::chrono::microseconds(int64_t(arrival_ms * 1000))};
}

TEST(MicroBatch, DecodesFirstThenContinuingThenShortestNewWithinAWindow) {
  std::vector<Candidate> candidates = {
      candidate(0, false, 900, 900, 0.0),  // long prompt, first to arrive
      candidate(1, true, 1, 20, 1.0),      // decoding
      candidate(2, false, 30, 30, 5.0),    // short, same window as 0
      candidate(3, true, 200, 300, 2.0),   // part-way through its prompt
      candidate(4, false, 10, 10, 80.0),   // short, but a later window than 0
      candidate(5, true, 1, 40, 3.0),
  };
  std::vector<PlannedWork> plan = plan_micro_batch(candidates, {1000, 16, 50.0});
  std::vector<int64_t> order;
  for (const PlannedWork& w : plan) order.push_back(w.index);
  EXPECT_EQ(order, (std::vector<int64_t>{1, 5, 3, 2, 0}));
  EXPECT_EQ(plan[2].num_tokens, 200);
  EXPECT_EQ(plan[4].num_tokens, 1000 - 1 - 1 - 200 - 30);  // chunked to the budget
}

TEST(MicroBatch, RespectsSequenceLimitAndBudget) {
  std::vector<Candidate> candidates;
  for (int i = 0; i < 10; ++i) candidates.push_back(candidate(i, true, 1, 5, i));
  EXPECT_EQ(plan_micro_batch(candidates, {1000, 4, 50.0}).size(), 4u);
  EXPECT_EQ(plan_micro_batch(candidates, {3, 100, 50.0}).size(), 3u);
}

TEST(MicroBatch, AShortPromptIsNotStarvedBehindLongOnes) {
  // Many long prompts arrived just before a short one: the short one runs in the first step.
  std::vector<Candidate> candidates;
  for (int i = 0; i < 8; ++i) candidates.push_back(candidate(i, false, 4000, 4000, i * 0.1));
  candidates.push_back(candidate(8, false, 12, 12, 1.0));
  std::vector<PlannedWork> plan = plan_micro_batch(candidates, {2048, 256, 50.0});
  ASSERT_FALSE(plan.empty());
  EXPECT_EQ(plan.front().index, 8);
}

// Checks that every page's count equals the holds of the sequences plus the cache.
void expect_consistent(const PagePool& pool, const std::vector<Sequence*>& sequences) {
  std::map<int32_t, int> holds;
  for (const Sequence* s : sequences)
    for (int32_t page : s->pages) ++holds[page];
  int32_t used = 0;
  for (int32_t page = 0; page < pool.total(); ++page) {
    EXPECT_EQ(pool.ref_count(page), holds[page]) << "page " << page;
    used += pool.ref_count(page) > 0;
  }
  EXPECT_EQ(used, pool.used_count());
}

struct SchedulerCase {
  std::vector<std::unique_ptr<Sequence>> owned;
  std::vector<Sequence*> sequences;
  Sequence& add(int prompt, double arrival_ms) {
    auto s = std::make_unique<Sequence>();
    s->tokens = iota_tokens(prompt);
    s->prompt_length = prompt;
    s->arrival = Clock::time_point{} + std::chrono::microseconds(int64_t(arrival_ms * 1000));
    sequences.push_back(s.get());
    owned.push_back(std::move(s));
    return *owned.back();
  }
  std::vector<PlannedWork> plan_all() const {
    std::vector<PlannedWork> plan;
    for (size_t i = 0; i < sequences.size(); ++i) plan.push_back({int64_t(i), sequences[i]->pending_tokens()});
    return plan;
  }
};

TEST(Capacity, AdmitsOnlyAboveTheWatermark) {
  PagePool pool(10);
  CapacityScheduler capacity(pool, nullptr, kPage, /*watermark_pages=*/2);
  SchedulerCase c;
  c.add(12, 0);  // 3 pages
  c.add(24, 1);  // 6 pages: 3 + 6 + 2 > 10, not admitted
  c.add(4, 2);   // would fit, but admission stops at the first that does not
  CapacityResult result = capacity.reserve(c.plan_all(), c.sequences);
  ASSERT_EQ(result.work.size(), 1u);
  EXPECT_EQ(result.work[0].sequence, c.sequences[0]);
  EXPECT_EQ(pool.used_count(), 3);
  expect_consistent(pool, c.sequences);
}

TEST(Capacity, PreemptsTheLatestArrivalWhenPagesRunOut) {
  PagePool pool(6);
  CapacityScheduler capacity(pool, nullptr, kPage, 0);
  SchedulerCase c;
  Sequence& first = c.add(8, 0);
  Sequence& second = c.add(12, 1);
  CapacityResult admitted = capacity.reserve(c.plan_all(), c.sequences);
  ASSERT_EQ(admitted.work.size(), 2u);  // 2 + 3 pages of 6
  for (Sequence* s : c.sequences) s->num_computed = static_cast<int64_t>(s->tokens.size());
  // Both decode; `first` crosses into a new page, then grows further, until `second` must go.
  first.tokens.resize(first.tokens.size() + 1, 7);
  second.tokens.resize(second.tokens.size() + 1, 7);
  CapacityResult step = capacity.reserve(c.plan_all(), c.sequences);  // needs 2 more pages, 1 free
  ASSERT_EQ(step.preempted.size(), 1u);
  EXPECT_EQ(step.preempted[0], &second);
  EXPECT_TRUE(second.pages.empty());
  EXPECT_EQ(second.num_computed, 0);
  ASSERT_EQ(step.work.size(), 1u);
  EXPECT_EQ(step.work[0].sequence, &first);
  expect_consistent(pool, c.sequences);
  capacity.release(first);
  EXPECT_EQ(pool.free_count(), 6);
}

TEST(Capacity, ReusesPrefixPagesAndEvictsThemUnderPressure) {
  PagePool pool(6);
  PrefixCache cache(pool, kPage);
  CapacityScheduler capacity(pool, &cache, kPage, 0);
  SchedulerCase c;
  Sequence& first = c.add(9, 0);
  capacity.reserve(c.plan_all(), c.sequences);
  first.num_computed = 9;
  cache.insert(first.tokens, first.pages);
  capacity.release(first);
  EXPECT_EQ(pool.used_count(), 2);  // two full pages stay cached

  SchedulerCase again;
  Sequence& second = again.add(9, 1);
  CapacityResult result = capacity.reserve(again.plan_all(), again.sequences);
  ASSERT_EQ(result.work.size(), 1u);
  EXPECT_EQ(second.cached_tokens, 8);
  EXPECT_EQ(result.work[0].num_tokens, 1);  // only the last token is computed
  capacity.release(second);

  SchedulerCase big;  // needs every page: the cached ones are evicted
  big.add(24, 2).tokens[0] = 5;
  result = capacity.reserve(big.plan_all(), big.sequences);
  ASSERT_EQ(result.work.size(), 1u);
  EXPECT_EQ(cache.cached(), 0);
  capacity.release(*big.sequences[0]);
  EXPECT_EQ(pool.free_count(), 6);
}

// DP attention's groups: new sequences go where there is most room, a prompt whose prefix one
// group caches goes to that group, and a group that runs out preempts its own latest sequence, not
// another group's.
TEST(Capacity, KeepsEachSequenceInOneGroupAndPreemptsWithinIt) {
  PagePool pool(12, 2);  // 6 pages a group
  PrefixCache cache(pool, kPage);
  CapacityScheduler capacity(pool, &cache, kPage, 0);
  SchedulerCase c;
  Sequence& first = c.add(16, 0);   // 4 pages: group 0 (both empty; the lowest)
  Sequence& second = c.add(8, 1);   // 2 pages: group 1 (6 free against 2)
  Sequence& third = c.add(12, 2);   // 3 pages: group 1 (4 free against 2)
  second.tokens = iota_tokens(8, 300);  // prompts of their own: no prefix in common with `first`
  third.tokens = iota_tokens(12, 400);
  ASSERT_EQ(capacity.reserve(c.plan_all(), c.sequences).work.size(), 3u);
  auto group = [&](const Sequence& s) { return pool.group_of(s.pages.at(0)); };
  for (Sequence* s : c.sequences)
    for (int32_t page : s->pages) EXPECT_EQ(pool.group_of(page), group(*s));
  EXPECT_EQ(group(first), 0);
  EXPECT_EQ(group(second), 1);
  EXPECT_EQ(group(third), 1);
  expect_consistent(pool, c.sequences);

  // `first` grows by 3 pages: group 0 has 2 free; it preempts itself (group 1's later arrivals
  // cannot give it pages), and group 1 is left alone.
  for (Sequence* s : c.sequences) s->num_computed = static_cast<int64_t>(s->tokens.size());
  first.tokens.resize(first.tokens.size() + 12, 7);
  CapacityResult step = capacity.reserve({{0, 12}}, c.sequences);
  ASSERT_EQ(step.preempted.size(), 1u);
  EXPECT_EQ(step.preempted[0], &first);
  EXPECT_EQ(second.pages.size(), 2u);
  EXPECT_EQ(third.pages.size(), 3u);

  // `first` comes back: its 4 full computed pages were offered to group 0's tree, so it goes to
  // group 0 again although group 1 has more room (its pages free or evictable, against group 0's
  // 1 free and 4 evictable, and 1 held).
  capacity.release(third);
  capacity.release(second);
  const int32_t held = pool.allocate(1, 0)[0];
  ASSERT_GT(pool.free_count(1) + cache.evictable(1), pool.free_count(0) + cache.evictable(0));
  SchedulerCase again;
  Sequence& back = again.add(16, 3);
  back.tokens = std::vector<int32_t>(first.tokens.begin(), first.tokens.begin() + 16);
  ASSERT_EQ(capacity.reserve(again.plan_all(), again.sequences).work.size(), 1u);
  EXPECT_EQ(group(back), 0);
  EXPECT_EQ(back.cached_tokens, 12);  // all but the last token's page
  capacity.release(back);
  pool.release(held);
  cache.evict(12);
  EXPECT_EQ(pool.free_count(), 12);
}

}  // namespace
}  // namespace dsinfer::runtime
