// Command-line flags of one verb: declared with help text, parsed by CLI11, printed by --help.
//
//   Flags flags("dsinfer generate", "Generate text from a prompt.");
//   flags.add_string("model", "DIR", "checkpoint directory", /*required=*/true);
//   flags.add_int("port", "port to listen on", 8000);
//   flags.set_range("port", 0, 65535);
//   flags.parse(argc, argv);            // throws dsinfer::Error on unknown or malformed flags
//   std::string dir = flags.get_string("model");
//
// CLI11 (Debian's libcli11-dev) does the parsing, the type and range checks and the help text; it
// stays behind this class, so only flags.cc includes it. Other servers' spellings of a flag are
// aliases (add_alias), so their launch scripts run as they are.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace dsinfer::cli {

class Flags {
 public:
  Flags(std::string usage, std::string summary);

  void add_string(const std::string& name, const std::string& value_name, const std::string& help,
                  bool required = false, std::optional<std::string> fallback = std::nullopt);
  void add_int(const std::string& name, const std::string& help, std::optional<int64_t> fallback = std::nullopt);
  void add_double(const std::string& name, const std::string& help, std::optional<double> fallback = std::nullopt);
  void add_bool(const std::string& name, const std::string& help);
  // An integer that may carry vLLM's size suffixes (parse_count): --max-model-len 32k.
  void add_count(const std::string& name, const std::string& help, std::optional<int64_t> fallback = std::nullopt);
  // --alias means --name (another server's spelling); --help lists it beside --name.
  void add_alias(const std::string& alias, const std::string& name);
  // The one argument without "--" sets --name (`dsinfer serve DIR`); giving both is an error.
  void set_positional(const std::string& name);
  // A number flag's values must lie in [min, max] (both included; max may be infinity); others are
  // refused when parsed, and --help shows the range.
  void set_range(const std::string& name, double min, double max);

  // Accepts --name value, --name=value and bare --name for booleans (also --name=false). A flag
  // given twice takes the last value, as argparse does, except the positional one. Returns false
  // when --help (-h) was asked for (the help text is printed to stdout). Throws dsinfer::Error with
  // CLI11's message otherwise (unknown flag, missing or malformed value, value out of range).
  bool parse(int argc, char** argv);
  std::string help() const;

  bool has(const std::string& name) const;  // given on the command line (or has a fallback)
  bool given(const std::string& name) const;  // given on the command line
  std::string get_string(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  bool get_bool(const std::string& name) const;

 private:
  enum class Kind { kString, kInt, kCount, kDouble, kBool };
  struct Flag {
    Kind kind = Kind::kString;
    std::string value_name;
    std::string help;
    bool required = false;
    bool has_fallback = false;
    std::vector<std::string> aliases;
    std::optional<std::pair<double, double>> range;  // [min, max]
    // The value: the fallback until parse() stores what was given. One field per kind.
    bool given = false;
    std::string text;
    int64_t integer = 0;
    double number = 0;
    bool boolean = false;
  };
  Flag& declare(const std::string& name, Kind kind, std::string value_name, std::string help);
  const Flag& flag(const std::string& name) const;
  // Declares every flag on `app`, bound to this object's values.
  void bind(CLI::App& app);

  std::string usage_, summary_;
  std::vector<std::string> order_;
  std::map<std::string, Flag> flags_;
  std::map<std::string, std::string> aliases_;  // alias -> name
  std::string positional_;                      // the flag a bare argument sets; empty: none
};

// An integer as vLLM reads sizes: digits, optionally with a suffix. Lower case is decimal and takes a
// fraction (k = 1000, m = 10^6, g = 10^9: "25.6k" is 25600); upper case is binary and whole (K = 1024,
// M = 2^20, G = 2^30). False when `text` is none of these or does not fit in int64.
bool parse_count(const std::string& text, int64_t* value);

}  // namespace dsinfer::cli
