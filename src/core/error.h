// Errors: one exception type whose message a user can act on.
//
// Every layer throws dsinfer::Error with a message that names the file, tensor or field at fault
// ("config.json: kv_lora_rank is missing"). The CLI prints what() on one line and exits with 1.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace dsinfer {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Concatenates anything that streams into one string: str_cat("layer ", 3, ": ", name).
template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

}  // namespace dsinfer

// Throws dsinfer::Error(str_cat(...)) when cond is false.
#define DSINFER_CHECK(cond, ...)                            \
  do {                                                      \
    if (!(cond)) throw ::dsinfer::Error(::dsinfer::str_cat(__VA_ARGS__)); \
  } while (0)
