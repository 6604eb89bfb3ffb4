// ProgressBar: '\r' and a rewritten line; a terminal shows it in place, a log file gets the lines.
#include "loadgen/progress_bar.h"

#include <cstdio>
#include <string>

namespace dsinfer::loadgen {
namespace {

constexpr int kWidth = 30;  // characters inside the brackets
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);

}  // namespace

ProgressBar::ProgressBar(int64_t total, bool enabled)
    : total_(total), enabled_(enabled), start_(std::chrono::steady_clock::now()), last_draw_(start_) {
  if (enabled_) draw(start_);
}

void ProgressBar::update(int64_t finished, int64_t failed) {
  finished_ = finished;
  failed_ = failed;
  const auto now = std::chrono::steady_clock::now();
  if (enabled_ && now - last_draw_ >= kRedrawInterval) draw(now);
}

void ProgressBar::finish() {
  if (!enabled_) return;
  draw(std::chrono::steady_clock::now());
  std::fputc('\n', stderr);
  enabled_ = false;
}

void ProgressBar::draw(std::chrono::steady_clock::time_point now) {
  last_draw_ = now;
  const double fraction = total_ > 0 ? static_cast<double>(finished_) / static_cast<double>(total_) : 1.0;
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kWidth) bar += '>';
  bar.resize(kWidth, ' ');
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "\r[%s] %4lld/%lld requests %3d%% %7.1f s", bar.c_str(), static_cast<long long>(finished_),
               static_cast<long long>(total_), static_cast<int>(fraction * 100), elapsed);
  if (failed_ > 0) std::fprintf(stderr, "  %lld failed", static_cast<long long>(failed_));
  std::fflush(stderr);
}

}  // namespace dsinfer::loadgen
