#include "runtime/page_pool.h"

#include <algorithm>

#include "core/error.h"

namespace dsinfer::runtime {

PagePool::PagePool(int32_t num_pages, int32_t groups)
    : ref_counts_(num_pages, 0), cached_(num_pages, 0), cached_only_(std::max(groups, 1), 0),
      free_(std::max(groups, 1)), free_total_(num_pages) {
  DSINFER_CHECK(num_pages > 0, "the KV cache needs at least one page");
  DSINFER_CHECK(groups >= 1 && num_pages % groups == 0, "the KV cache's ", num_pages, " pages do not split into ",
                groups, " groups");
  const int32_t size = num_pages / groups;
  for (int32_t g = 0; g < groups; ++g) {
    free_[g].reserve(size);
    for (int32_t page = (g + 1) * size - 1; page >= g * size; --page) free_[g].push_back(page);  // lowest first
  }
}

std::vector<int32_t> PagePool::allocate(int32_t count, int32_t group) {
  DSINFER_CHECK(group >= 0 && group < groups(), "page pool: group ", group, " of ", groups());
  DSINFER_CHECK(count >= 0 && can_allocate(count, group), "page pool: ", count, " pages asked, ", free_count(group),
                " free", groups() > 1 ? str_cat(" in group ", group) : "");
  std::vector<int32_t>& free = free_[group];
  std::vector<int32_t> pages(free.end() - count, free.end());
  free.resize(free.size() - count);
  free_total_ -= count;
  for (int32_t page : pages) ref_counts_[page] = 1;
  return pages;
}

void PagePool::check_in_use(int32_t page, const char* what) const {
  DSINFER_CHECK(page >= 0 && page < total() && ref_counts_[page] > 0, "page pool: ", what, " of page ", page,
                " which is not in use");
}

void PagePool::retain(int32_t page) {
  check_in_use(page, "retain");
  if (cached_[page] && ref_counts_[page] == 1) count_cached_only(page, -1);
  ++ref_counts_[page];
}

void PagePool::release(int32_t page) {
  check_in_use(page, "release");
  --ref_counts_[page];
  if (cached_[page] && ref_counts_[page] == 1) count_cached_only(page, 1);
  if (ref_counts_[page] == 0) {
    DSINFER_CHECK(!cached_[page], "page pool: page ", page, " freed while the prefix cache holds it");
    free_[group_of(page)].push_back(page);
    ++free_total_;
  }
}

void PagePool::set_cached(int32_t page, bool cached) {
  check_in_use(page, "set_cached");
  if (cached_[page] == cached) return;
  cached_[page] = cached;
  if (ref_counts_[page] == 1) count_cached_only(page, cached ? 1 : -1);
}

void PagePool::count_cached_only(int32_t page, int32_t change) {
  cached_only_[group_of(page)] += change;
  cached_only_total_ += change;
}

int32_t PagePool::ref_count(int32_t page) const {
  DSINFER_CHECK(page >= 0 && page < total(), "page pool: page ", page, " out of range");
  return ref_counts_[page];
}

}  // namespace dsinfer::runtime
