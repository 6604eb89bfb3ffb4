#include "transfer/kv_transfer.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"

namespace dsinfer::transfer {
namespace {

TEST(MergeContiguous, JoinsWritesThatContinueEachOtherInBothMemories) {
  const std::vector<Write> writes = {
      {0, 4096, 1024}, {1024, 5120, 1024}, {2048, 6144, 1024},  // a run of three pages
      {3072, 9000, 1024},                                        // continues locally, not remotely
      {8192, 10024, 1024},                                       // continues remotely, not locally
      {9216, 11048, 0},                                          // empty: dropped
      {9216, 11048, 512}};                                       // continues the one before the empty one
  const std::vector<Write> expected = {{0, 4096, 3072}, {3072, 9000, 1024}, {8192, 10024, 1536}};
  EXPECT_EQ(merge_contiguous(writes), expected);
  EXPECT_TRUE(merge_contiguous({}).empty());
  // Pages listed downwards (9, 8, 7 -> 19, 18, 17) are one run too; a page that breaks it starts another.
  const std::vector<Write> downwards = {{9 * 64, 19 * 64, 64}, {8 * 64, 18 * 64, 64}, {7 * 64, 17 * 64, 64},
                                        {6 * 64, 15 * 64, 64}, {5 * 64, 14 * 64, 64}};
  const std::vector<Write> runs = {{7 * 64, 17 * 64, 192}, {5 * 64, 14 * 64, 128}};
  EXPECT_EQ(merge_contiguous(downwards), runs);
}

TEST(BlobHex, RoundTripsEveryByteAndRefusesWhatIsNotHex) {
  Blob every(256, '\0');
  for (int i = 0; i < 256; ++i) every[i] = static_cast<char>(i);
  EXPECT_EQ(blob_from_hex(blob_to_hex(every), "all bytes"), every);
  EXPECT_EQ(blob_to_hex(Blob("\x01\xab", 2)), "01ab");
  EXPECT_EQ(blob_from_hex("01AB", "upper case"), Blob("\x01\xab", 2));
  EXPECT_THROW(blob_from_hex("abc", "odd"), Error);
  EXPECT_THROW(blob_from_hex("zz", "not hex"), Error);
}

}  // namespace
}  // namespace dsinfer::transfer
