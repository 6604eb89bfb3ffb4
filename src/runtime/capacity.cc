#include "runtime/capacity.h"

#include <algorithm>

#include "runtime/host_kv_tier.h"

namespace dsinfer::runtime {

CapacityScheduler::CapacityScheduler(PagePool& pool, PrefixCache* prefix_cache, int page_size,
                                     int32_t watermark_pages)
    : pool_(pool), prefix_cache_(prefix_cache), page_size_(page_size), watermark_pages_(watermark_pages) {}

int32_t CapacityScheduler::pages_needed(const Sequence& sequence, int64_t tokens) const {
  int64_t slots = sequence.num_computed + tokens + sequence.reserve_ahead;
  int64_t pages = (slots + page_size_ - 1) / page_size_;
  return static_cast<int32_t>(std::max<int64_t>(0, pages - static_cast<int64_t>(sequence.pages.size())));
}

bool CapacityScheduler::make_free(int32_t pages, int32_t group) {
  if (pool_.free_count(group) < pages && prefix_cache_) prefix_cache_->evict(pages - pool_.free_count(group), group);
  return pool_.free_count(group) >= pages;
}

int32_t CapacityScheduler::group_of(const Sequence& sequence) const {
  if (!sequence.pages.empty()) return pool_.group_of(sequence.pages[0]);
  int32_t best = 0, most = -1;
  for (int32_t g = 0; g < pool_.groups(); ++g) {
    const int32_t room = pool_.free_count(g) + (prefix_cache_ ? prefix_cache_->evictable(g) : 0);
    if (room > most) {
      most = room;
      best = g;
    }
  }
  return best;
}

void CapacityScheduler::release(Sequence& sequence) {
  // Full pages of computed tokens stay useful to later prompts (and to this one if it was
  // preempted and comes back). A placeholder (a token a failed or abandoned step was to sample)
  // keys nothing: the pages are offered up to the first one.
  const int64_t known = static_cast<int64_t>(sequence.tokens.size()) - sequence.unresolved;
  const int64_t computed = std::min(sequence.num_computed, known);
  if (prefix_cache_ && computed >= page_size_)
    prefix_cache_->insert(std::span(sequence.tokens).first(computed), sequence.pages);
  for (int32_t page : sequence.pages) pool_.release(page);
  sequence.pages.clear();
  sequence.num_computed = 0;
}

bool CapacityScheduler::admit(Sequence& sequence, int64_t& tokens) {
  if (prefix_cache_ && sequence.pages.empty() && sequence.num_computed == 0) {
    // Reuse cached full pages of the prompt, but always leave the last token to compute: its
    // logits are what the first sampled token comes from.
    auto limit = static_cast<int64_t>(sequence.tokens.size()) - 1;
    // prompt_logprobs: a row taken from the cache is never computed, so never scored; only rows
    // scored before a preemption may be (vLLM's requests with prompt_logprobs skip the cache).
    if (sequence.scoring_prompt()) limit = std::min(limit, sequence.prompt_scored);
    sequence.pages = prefix_cache_->match(sequence.tokens, limit);
    if (host_tier_) host_tier_->restore(sequence.tokens, limit, sequence.pages);  // issue 14: what host memory holds
    sequence.num_computed = static_cast<int64_t>(sequence.pages.size()) * page_size_;
    if (!sequence.scheduled_once) sequence.cached_tokens = sequence.num_computed;
    tokens = std::min(tokens, sequence.pending_tokens());
  }
  int32_t needed = pages_needed(sequence, tokens);
  const int32_t group = group_of(sequence);  // its prefix's, or the roomiest
  if (!make_free(needed + watermark_pages_, group)) {
    release(sequence);  // hand back the prefix pages it just took
    return false;
  }
  std::vector<int32_t> fresh = pool_.allocate(needed, group);
  sequence.pages.insert(sequence.pages.end(), fresh.begin(), fresh.end());
  return true;
}

CapacityResult CapacityScheduler::reserve(const std::vector<PlannedWork>& plan,
                                          const std::vector<Sequence*>& sequences) {
  CapacityResult result;
  std::vector<bool> planned_running(sequences.size(), false);
  for (const PlannedWork& item : plan) {
    const Sequence& s = *sequences[item.index];
    planned_running[item.index] = !s.pages.empty() || s.num_computed > 0;
  }
  // Victims for preemption: running sequences, latest arrival first; listed only when needed.
  std::vector<int64_t> victims;
  auto list_victims = [&] {
    if (!victims.empty()) return;
    for (size_t i = 0; i < sequences.size(); ++i)
      if (!sequences[i]->pages.empty() || sequences[i]->num_computed > 0) victims.push_back(static_cast<int64_t>(i));
    std::sort(victims.begin(), victims.end(),
              [&](int64_t a, int64_t b) { return sequences[a]->arrival > sequences[b]->arrival; });
  };
  std::vector<bool> preempted(sequences.size(), false);
  auto preempt = [&](int64_t index) {
    preempted[index] = true;
    release(*sequences[index]);
    result.preempted.push_back(sequences[index]);
  };

  bool admitting = true;
  for (const PlannedWork& item : plan) {
    if (preempted[item.index]) continue;
    Sequence& sequence = *sequences[item.index];
    int64_t tokens = item.num_tokens;
    if (!planned_running[item.index]) {
      if (!admitting) continue;
      if (!admit(sequence, tokens)) {
        admitting = false;
        continue;
      }
      result.work.push_back({&sequence, tokens});
      continue;
    }
    int32_t needed = pages_needed(sequence, tokens);
    const int32_t group = group_of(sequence);
    // Out of pages: preempt running sequences of its group, latest arrival first; when that is
    // this one, it yields.
    while (!make_free(needed, group)) {
      list_victims();
      auto victim = std::find_if(victims.begin(), victims.end(), [&](int64_t v) {
        return !preempted[v] && (v == item.index || sequences[v]->pages.empty() ||
                                 pool_.group_of(sequences[v]->pages[0]) == group);
      });
      if (victim == victims.end()) break;
      preempt(*victim);
      if (*victim == item.index) break;
    }
    if (preempted[item.index]) continue;
    if (pool_.free_count(group) < needed) {
      preempt(item.index);
      continue;
    }
    if (needed > 0) {
      std::vector<int32_t> fresh = pool_.allocate(needed, group);
      sequence.pages.insert(sequence.pages.end(), fresh.begin(), fresh.end());
    }
    result.work.push_back({&sequence, tokens});
  }
  // Work of sequences preempted after they were granted pages is void.
  if (!result.preempted.empty()) {
    std::erase_if(result.work, [&](const ScheduledWork& w) {
      return std::find(result.preempted.begin(), result.preempted.end(), w.sequence) != result.preempted.end();
    });
  }
  return result;
}

}  // namespace dsinfer::runtime
