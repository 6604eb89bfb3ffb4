// What the flag tests share: serve's flags parsed and checked as serve does, and the message of a
// refusal.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "cli/flags.h"
#include "cli/serve_flags.h"
#include "core/error.h"

namespace dsinfer::cli::flag_testing {

// serve's flags parsed from `args` (the model directory first) and checked as serve checks them.
inline Flags parsed_serve_flags(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  Flags flags = serve_flags();
  EXPECT_TRUE(flags.parse(static_cast<int>(argv.size()), argv.data()));
  check_serve_flags(flags);
  return flags;
}

// The message of the dsinfer::Error that `work` throws ("" when none).
template <typename Work>
std::string error_of(Work&& work) {
  try {
    std::forward<Work>(work)();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

}  // namespace dsinfer::cli::flag_testing
