#include "core/npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace dsinfer {
namespace {

TEST(Npy, RoundTripsFloatAndInt) {
  std::string path = ::testing::TempDir() + "/npy_test.npy";
  Tensor logits = Tensor::empty(DType::kF32, {3, 5});
  for (int i = 0; i < 15; ++i) logits.data<float>()[i] = i * 0.5f - 3;
  write_npy(path, logits);
  Tensor back = read_npy(path);
  ASSERT_EQ(back.shape(), logits.shape());
  for (int i = 0; i < 15; ++i) EXPECT_EQ(back.data<float>()[i], logits.data<float>()[i]);

  Tensor ids = Tensor::empty(DType::kI64, {4});
  for (int i = 0; i < 4; ++i) ids.data<int64_t>()[i] = 1000000000000LL * i;
  write_npy(path, ids);
  back = read_npy(path);
  ASSERT_EQ(back.shape(), Shape({4}));
  EXPECT_EQ(back.data<int64_t>()[3], 3000000000000LL);
  std::remove(path.c_str());
}

TEST(Npy, RejectsGarbage) {
  std::string path = ::testing::TempDir() + "/npy_bad.npy";
  FILE* file = std::fopen(path.c_str(), "wb");
  std::fputs("not numpy at all", file);
  std::fclose(file);
  EXPECT_THROW(read_npy(path), Error);
  EXPECT_THROW(read_npy(path + ".missing"), Error);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace dsinfer
