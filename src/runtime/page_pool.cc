#include "runtime/page_pool.h"

#include "core/error.h"

namespace dsinfer::runtime {

PagePool::PagePool(int32_t num_pages) : ref_counts_(num_pages, 0), cached_(num_pages, 0) {
  DSINFER_CHECK(num_pages > 0, "the KV cache needs at least one page");
  free_.reserve(num_pages);
  for (int32_t page = num_pages - 1; page >= 0; --page) free_.push_back(page);  // page 0 handed out first
}

std::vector<int32_t> PagePool::allocate(int32_t count) {
  DSINFER_CHECK(count >= 0 && can_allocate(count), "page pool: ", count, " pages asked, ", free_count(), " free");
  std::vector<int32_t> pages(free_.end() - count, free_.end());
  free_.resize(free_.size() - count);
  for (int32_t page : pages) ref_counts_[page] = 1;
  return pages;
}

void PagePool::check_in_use(int32_t page, const char* what) const {
  DSINFER_CHECK(page >= 0 && page < total() && ref_counts_[page] > 0, "page pool: ", what, " of page ", page,
                " which is not in use");
}

void PagePool::retain(int32_t page) {
  check_in_use(page, "retain");
  if (cached_[page] && ref_counts_[page] == 1) --cached_only_;
  ++ref_counts_[page];
}

void PagePool::release(int32_t page) {
  check_in_use(page, "release");
  --ref_counts_[page];
  if (cached_[page] && ref_counts_[page] == 1) ++cached_only_;
  if (ref_counts_[page] == 0) {
    DSINFER_CHECK(!cached_[page], "page pool: page ", page, " freed while the prefix cache holds it");
    free_.push_back(page);
  }
}

void PagePool::set_cached(int32_t page, bool cached) {
  check_in_use(page, "set_cached");
  if (cached_[page] == cached) return;
  cached_[page] = cached;
  if (ref_counts_[page] == 1) cached_only_ += cached ? 1 : -1;
}

int32_t PagePool::ref_count(int32_t page) const {
  DSINFER_CHECK(page >= 0 && page < total(), "page pool: page ", page, " out of range");
  return ref_counts_[page];
}

}  // namespace dsinfer::runtime
