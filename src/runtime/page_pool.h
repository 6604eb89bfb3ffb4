// PagePool: the KV cache's pages as ids with reference counts; no pointers, no memory.
//
// A page is free (count 0) or held by its owners: sequences that use it and the prefix cache
// that keeps it for reuse. allocate() hands out free pages with count 1; release() drops one
// hold and returns the page to the free list at 0. The pool also counts the pages that only the
// prefix cache holds (reclaimable on demand), so usage reads in O(1).
#pragma once

#include <cstdint>
#include <vector>

namespace dsinfer::runtime {

class PagePool {
 public:
  explicit PagePool(int32_t num_pages);

  int32_t total() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t free_count() const { return static_cast<int32_t>(free_.size()); }
  int32_t used_count() const { return total() - free_count(); }
  bool can_allocate(int32_t count) const { return count <= free_count(); }

  // `count` free pages, each with one hold. Throws dsinfer::Error if fewer are free.
  std::vector<int32_t> allocate(int32_t count);
  void retain(int32_t page);   // one more hold on a page in use
  void release(int32_t page);  // one hold less; back to the free list at zero
  int32_t ref_count(int32_t page) const;

  // The prefix cache marks the pages it holds; pages it alone holds are `cached_only`.
  void set_cached(int32_t page, bool cached);
  int32_t cached_only_count() const { return cached_only_; }

 private:
  void check_in_use(int32_t page, const char* what) const;

  std::vector<int32_t> ref_counts_;
  std::vector<uint8_t> cached_;  // per page: held by the prefix cache
  int32_t cached_only_ = 0;
  std::vector<int32_t> free_;  // a stack: recently freed pages are reused first (warm in cache)
};

}  // namespace dsinfer::runtime
