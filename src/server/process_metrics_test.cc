// The process_* metrics: /proc/self/stat parsed field by field, and the live figures of this process.
#include "server/process_metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <string>

#include <gtest/gtest.h>

namespace dsinfer::server {
namespace {

TEST(ProcessMetrics, ParsesProcStatAfterACommandNameWithSpacesAndParentheses) {
  // Fields from state (3) on; utime 14 = 250, stime 15 = 150, starttime 22 = 1000, vsize 23, rss 24.
  const std::string stat =
      "4242 (odd) name (x)) S 1 2 3 4 5 6 7 8 9 10 250 150 11 12 13 14 15 16 1000 4096000 300 99 98 97\n";
  std::optional<ProcessStats> stats = parse_proc_stat(stat, 100.0, 4096.0, 1700000000.0);
  ASSERT_TRUE(stats);
  EXPECT_DOUBLE_EQ(stats->cpu_seconds, 4.0);
  EXPECT_DOUBLE_EQ(stats->start_time_seconds, 1700000010.0);
  EXPECT_DOUBLE_EQ(stats->virtual_memory_bytes, 4096000.0);
  EXPECT_DOUBLE_EQ(stats->resident_memory_bytes, 300.0 * 4096.0);
  EXPECT_FALSE(parse_proc_stat("4242 (short) S 1 2 3", 100.0, 4096.0, 0.0));
  EXPECT_FALSE(parse_proc_stat("no parenthesis", 100.0, 4096.0, 0.0));
}

TEST(ProcessMetrics, ParsesTheBootTime) {
  EXPECT_EQ(parse_boot_time("cpu  1 2 3\nintr 5\nbtime 1732450000\nprocesses 9\n"), 1732450000.0);
  EXPECT_FALSE(parse_boot_time("cpu  1 2 3\n"));
}

TEST(ProcessMetrics, ReadsThisProcess) {
  std::optional<ProcessStats> before = read_process_stats();
  ASSERT_TRUE(before) << "/proc/self is not readable";
  EXPECT_GT(before->resident_memory_bytes, 1 << 20);
  EXPECT_GE(before->virtual_memory_bytes, before->resident_memory_bytes);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LE(before->start_time_seconds, now + 1);
  EXPECT_GT(before->start_time_seconds, now - 3600);  // this test binary started within the hour
  EXPECT_GE(before->max_fds, before->open_fds);

  const int fd = open("/dev/null", O_RDONLY);
  ASSERT_GE(fd, 0);
  // Some CPU time: the clock counts in ticks of 10 ms.
  volatile double sink = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(60);
  while (std::chrono::steady_clock::now() < until) sink = sink + std::sqrt(sink + 1.0);
  std::optional<ProcessStats> after = read_process_stats();
  close(fd);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->open_fds, before->open_fds + 1);
  EXPECT_GT(after->cpu_seconds, before->cpu_seconds);
}

}  // namespace
}  // namespace dsinfer::server
