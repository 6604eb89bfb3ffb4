// PagePool: the KV cache's pages as ids with reference counts; no pointers, no memory.
//
// A page is free (count 0) or held by its owners: sequences that use it and the prefix cache
// that keeps it for reuse. allocate() hands out free pages with count 1; release() drops one
// hold and returns the page to the free list at 0. The pool also counts the pages that only the
// prefix cache holds (reclaimable on demand), so usage reads in O(1).
//
// Under DP attention the pages fall into groups, one per DP group: group g is the ids
// [g * group_size(), (g + 1) * group_size()), the pages of that group's ranks' caches. Each group
// has its own free list, and a sequence takes all its pages from one group. One group: the whole
// pool.
#pragma once

#include <cstdint>
#include <vector>

namespace dsinfer::runtime {

class PagePool {
 public:
  // num_pages % groups == 0.
  explicit PagePool(int32_t num_pages, int32_t groups = 1);

  int32_t total() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t groups() const { return static_cast<int32_t>(free_.size()); }
  int32_t group_size() const { return total() / groups(); }
  int32_t group_of(int32_t page) const { return page / group_size(); }
  int32_t free_count() const { return free_total_; }
  int32_t free_count(int32_t group) const { return static_cast<int32_t>(free_.at(group).size()); }
  int32_t used_count() const { return total() - free_count(); }
  bool can_allocate(int32_t count, int32_t group = 0) const { return count <= free_count(group); }

  // `count` free pages of `group`, each with one hold. Throws dsinfer::Error if fewer are free.
  std::vector<int32_t> allocate(int32_t count, int32_t group = 0);
  void retain(int32_t page);   // one more hold on a page in use
  void release(int32_t page);  // one hold less; back to the free list at zero
  int32_t ref_count(int32_t page) const;

  // The prefix cache marks the pages it holds; pages it alone holds are `cached_only`.
  void set_cached(int32_t page, bool cached);
  int32_t cached_only_count() const { return cached_only_total_; }
  int32_t cached_only_count(int32_t group) const { return cached_only_.at(group); }

 private:
  void check_in_use(int32_t page, const char* what) const;
  void count_cached_only(int32_t page, int32_t change);

  std::vector<int32_t> ref_counts_;
  std::vector<uint8_t> cached_;       // per page: held by the prefix cache
  std::vector<int32_t> cached_only_;  // per group
  int32_t cached_only_total_ = 0;
  // Per group, a stack: recently freed pages are reused first (warm in cache).
  std::vector<std::vector<int32_t>> free_;
  int32_t free_total_ = 0;
};

}  // namespace dsinfer::runtime
