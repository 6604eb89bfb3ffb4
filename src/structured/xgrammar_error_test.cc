#include "structured/xgrammar_error.h"

#include <gtest/gtest.h>

namespace dsinfer::structured {
namespace {

TEST(XgrammarErrorTest, UserMessageDropsTimeLocationAndCheckPrefixes) {
  EXPECT_EQ(user_message("[20:56:42] /x/y-1.2/cpp/regex_converter.cc:88: Unclosed '['\n"), "Unclosed '['");
  EXPECT_EQ(user_message("[20:56:42] /x/a.cc:7: Check failed: (ok) is false: bad: thing\n"), "bad: thing");
  EXPECT_EQ(user_message("line one\nline two\n"), "line one line two");
  EXPECT_EQ(user_message("[not a time] a.cc:1: kept"), "[not a time] a.cc:1: kept");
  EXPECT_EQ(user_message("plain: 12: message"), "plain: 12: message");
}

}  // namespace
}  // namespace dsinfer::structured
