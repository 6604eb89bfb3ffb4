#include "core/tensor.h"

#include <gtest/gtest.h>

namespace dsinfer {
namespace {

TEST(Tensor, EmptyIsZeroedAndShaped) {
  Tensor t = Tensor::empty(DType::kF32, {2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(t.dim(-1), 4);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(t.data<float>()[i], 0.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
}

TEST(Tensor, ViewAndSliceShareStorage) {
  Tensor t = Tensor::empty(DType::kF32, {4, 3});
  for (int i = 0; i < 12; ++i) t.data<float>()[i] = static_cast<float>(i);
  Tensor rows = t.slice(1, 3);
  EXPECT_EQ(rows.shape(), Shape({2, 3}));
  EXPECT_EQ(rows.data<float>()[0], 3.0f);
  rows.data<float>()[0] = 100.0f;
  EXPECT_EQ(t.data<float>()[3], 100.0f);
  EXPECT_EQ(t.view({12}).data<float>()[3], 100.0f);
  EXPECT_THROW(t.view({5}), Error);
  EXPECT_THROW(t.slice(2, 5), Error);
  Tensor copy = t.clone();
  copy.data<float>()[0] = -1;
  EXPECT_EQ(t.data<float>()[0], 0.0f);
}

}  // namespace
}  // namespace dsinfer
