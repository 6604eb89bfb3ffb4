// Command-line flags of one verb: declared with help text, parsed strictly, printed by --help.
//
//   Flags flags("dsinfer generate", "Generate text from a prompt.");
//   flags.add_string("model", "DIR", "checkpoint directory", /*required=*/true);
//   flags.parse(argc, argv);            // throws dsinfer::Error on unknown or malformed flags
//   std::string dir = flags.get_string("model");
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dsinfer::cli {

class Flags {
 public:
  Flags(std::string usage, std::string summary);

  void add_string(const std::string& name, const std::string& value_name, const std::string& help,
                  bool required = false, std::optional<std::string> fallback = std::nullopt);
  void add_int(const std::string& name, const std::string& help, std::optional<int64_t> fallback = std::nullopt);
  void add_double(const std::string& name, const std::string& help, std::optional<double> fallback = std::nullopt);
  void add_bool(const std::string& name, const std::string& help);

  // Accepts --name value, --name=value and bare --name for booleans. Returns false when --help
  // was asked for (the help text is printed to stdout). Throws dsinfer::Error otherwise.
  bool parse(int argc, char** argv);
  std::string help() const;

  bool has(const std::string& name) const;  // given on the command line (or has a fallback)
  std::string get_string(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  bool get_bool(const std::string& name) const;

 private:
  enum class Kind { kString, kInt, kDouble, kBool };
  struct Flag {
    Kind kind;
    std::string value_name;
    std::string help;
    bool required = false;
    std::optional<std::string> value;  // as typed, or the fallback
  };
  const Flag& flag(const std::string& name) const;

  std::string usage_, summary_;
  std::vector<std::string> order_;
  std::map<std::string, Flag> flags_;
};

}  // namespace dsinfer::cli
