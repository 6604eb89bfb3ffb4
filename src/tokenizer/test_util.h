// Helpers shared by the tokenizer tests: fixture paths, fixture JSON, and the DeepSeek-V3
// tokenizer loaded once per test binary (its tokenizer.json is 7.8 MB).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/file.h"
#include "core/json.h"
#include "core/source_path.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::tokenizer::test_util {

inline std::string fixture_path(std::string_view relative) {
  return source_path("tests/fixtures/" + std::string(relative));
}

inline Json load_fixture(std::string_view relative) {
  return Json::parse(read_file(fixture_path(relative)));
}

// The DeepSeek-V3 tokenizer's directory (tokenizer.json, tokenizer_config.json). The repository
// keeps tokenizer.json xz-compressed; the build decompresses it there (dsinfer_tokenizer_fixture in
// src/tokenizer/CMakeLists.txt).
inline std::string deepseek_v3_dir() { return DSINFER_DEEPSEEK_V3_TOKENIZER_DIR; }

inline const Tokenizer& deepseek_v3() {
  static const Tokenizer tokenizer = Tokenizer::from_dir(deepseek_v3_dir());
  return tokenizer;
}

inline std::vector<int32_t> ids_of(const Json& array) {
  std::vector<int32_t> ids;
  for (const Json& id : array.as_array()) ids.push_back(static_cast<int32_t>(id.as_int()));
  return ids;
}

// A fresh directory for files a test writes, removed with its contents at the end.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = ::testing::TempDir() + "dsinfer_tokenizer_" + test->test_suite_name() + "." +
            test->name() + "_" + std::to_string(::getpid());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // Writes contents to NAME in the directory and returns its path.
  std::string write(std::string_view name, std::string_view contents) const {
    std::string path = path_ + "/" + std::string(name);
    write_file(path, contents);
    return path;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace dsinfer::tokenizer::test_util
