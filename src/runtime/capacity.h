// The capacity step of scheduling: give each planned piece of work the KV pages it needs.
//
// Running sequences come first: when pages run out, unreferenced prefix-cache pages are evicted,
// then the most recently arrived running sequences are preempted (their pages freed, to be
// recomputed later). New sequences are admitted only while free pages stay above a watermark;
// a new sequence first reuses what the prefix cache holds of its prompt. Admission stops at the
// first new sequence that does not fit, so later arrivals cannot overtake it forever.
//
// With page groups (DP attention, page_pool.h) a sequence lives in one group, the one of its first
// page: a new one joins the group whose prefix cache holds the most of its prompt, else the group
// with the most pages free (free and evictable), and takes every page from it. Eviction, the
// watermark (given per group) and preemption all act within the group that needs the pages.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/micro_batch.h"
#include "runtime/page_pool.h"
#include "runtime/prefix_cache.h"
#include "runtime/sequence.h"

namespace dsinfer::runtime {

class HostKvTier;

struct ScheduledWork {
  Sequence* sequence = nullptr;
  int64_t num_tokens = 0;  // tokens computed this step, starting at sequence->num_computed
};

struct CapacityResult {
  std::vector<ScheduledWork> work;   // in plan order, every one with its pages
  std::vector<Sequence*> preempted;  // pages released; to go back to the waiting queue
};

class CapacityScheduler {
 public:
  // watermark_pages: of each group.
  CapacityScheduler(PagePool& pool, PrefixCache* prefix_cache, int page_size, int32_t watermark_pages);

  // plan[i].index indexes `sequences`. Running sequences are those with pages or computed tokens.
  CapacityResult reserve(const std::vector<PlannedWork>& plan, const std::vector<Sequence*>& sequences);

  // Offers the sequence's full computed pages to the prefix cache, then drops its holds on its
  // pages (finish, abort, preemption) and forgets its progress.
  void release(Sequence& sequence);

  // The host KV tier (host_kv_tier.h): a new sequence's prefix match goes on with the pages it
  // restores. Null: none.
  void set_host_tier(HostKvTier* tier) { host_tier_ = tier; }

 private:
  int32_t pages_needed(const Sequence& sequence, int64_t tokens) const;
  // Evicts cached pages of `group` until `pages` are free there; false if impossible.
  bool make_free(int32_t pages, int32_t group);
  bool admit(Sequence& sequence, int64_t& tokens);
  // The group of a sequence with pages; for one without, the group with the most room.
  int32_t group_of(const Sequence& sequence) const;

  PagePool& pool_;
  PrefixCache* prefix_cache_;
  int page_size_;
  int32_t watermark_pages_;
  HostKvTier* host_tier_ = nullptr;
};

}  // namespace dsinfer::runtime
