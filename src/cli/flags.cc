#include "cli/flags.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <memory>

#include "core/error.h"
#include "core/strings.h"

namespace dsinfer::cli {
namespace {

// "usage: ..." and the summary first, then CLI11's option table (the verb's usage line says more
// than CLI11's generated "[OPTIONS] model").
class VerbFormatter : public CLI::Formatter {
 public:
  VerbFormatter(std::string usage, std::string summary) : usage_(std::move(usage)), summary_(std::move(summary)) {}
  std::string make_description(const CLI::App*) const override { return ""; }
  std::string make_usage(const CLI::App*, std::string) const override {
    return "usage: " + usage_ + "\n\n" + summary_ + "\n";
  }

 private:
  std::string usage_, summary_;
};

// A bound as people write it: 65535, not 65535.000000.
std::string number_text(double value) {
  if (std::nearbyint(value) == value && std::fabs(value) < 1e15) return std::to_string(static_cast<int64_t>(value));
  return str_cat(value);
}

// Validators run on the text before CLI11 converts it. Integers are read as decimals by our parser
// (CLI11's strtoll would read "010" as octal and saturate on overflow) and written back plainly;
// counts expand their suffix the same way.
CLI::Validator integer_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        int64_t value;
        if (!parse_int64(text, &value)) return "must be an integer, got '" + text + "'";
        text = std::to_string(value);
        return "";
      },
      "");
}

CLI::Validator count_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        int64_t value;
        if (!parse_count(text, &value))
          return "must be an integer, optionally with a suffix (32k = 32000, 32K = 32768), got '" + text + "'";
        text = std::to_string(value);
        return "";
      },
      "");
}

CLI::Validator number_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value;
        if (!parse_double(text, &value)) return "must be a number, got '" + text + "'";
        return "";
      },
      "");
}

// "[0, 65535]", or "at least 1" when there is no upper bound.
std::string range_text(double min, double max) {
  if (std::isinf(max)) return "at least " + number_text(min);
  return "[" + number_text(min) + ", " + number_text(max) + "]";
}

// After the type's validator, so `text` is a plain number here. NaN is outside every range.
CLI::Validator range_validator(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        double value = 0;
        parse_double(text, &value);
        if (value >= min && value <= max) return "";
        return std::string(std::isinf(max) ? "must be " : "must be in ") + range_text(min, max) + ", got " + text;
      },
      "");
}

}  // namespace

Flags::Flags(std::string usage, std::string summary) : usage_(std::move(usage)), summary_(std::move(summary)) {}

Flags::Flag& Flags::declare(const std::string& name, Kind kind, std::string value_name, std::string help) {
  DSINFER_CHECK(!flags_.count(name) && !aliases_.count(name), "internal: flag --", name, " is declared twice");
  order_.push_back(name);
  Flag& f = flags_[name];
  f.kind = kind;
  f.value_name = std::move(value_name);
  f.help = std::move(help);
  return f;
}

void Flags::add_string(const std::string& name, const std::string& value_name, const std::string& help,
                       bool required, std::optional<std::string> fallback) {
  Flag& f = declare(name, Kind::kString, value_name, help);
  f.required = required;
  f.has_fallback = fallback.has_value();
  f.text = fallback.value_or("");
}

void Flags::add_int(const std::string& name, const std::string& help, std::optional<int64_t> fallback) {
  Flag& f = declare(name, Kind::kInt, "N", help);
  f.has_fallback = fallback.has_value();
  f.integer = fallback.value_or(0);
}

void Flags::add_double(const std::string& name, const std::string& help, std::optional<double> fallback) {
  Flag& f = declare(name, Kind::kDouble, "X", help);
  f.has_fallback = fallback.has_value();
  f.number = fallback.value_or(0.0);
}

void Flags::add_bool(const std::string& name, const std::string& help) {
  declare(name, Kind::kBool, "", help);
}

void Flags::add_count(const std::string& name, const std::string& help, std::optional<int64_t> fallback) {
  add_int(name, help, fallback);
  flags_[name].kind = Kind::kCount;
}

void Flags::add_alias(const std::string& alias, const std::string& name) {
  DSINFER_CHECK(flags_.count(name) && !flags_.count(alias) && !aliases_.count(alias), "internal: alias --", alias,
                " of --", name, " clashes or names no flag");
  aliases_[alias] = name;
  flags_[name].aliases.push_back(alias);
}

void Flags::set_positional(const std::string& name) {
  flag(name);  // declared
  positional_ = name;
}

void Flags::set_range(const std::string& name, double min, double max) {
  flag(name);  // declared
  Flag& f = flags_.at(name);
  DSINFER_CHECK(f.kind == Kind::kInt || f.kind == Kind::kCount || f.kind == Kind::kDouble, "internal: --", name,
                " is not a number, so it takes no range");
  DSINFER_CHECK(min <= max && !std::isinf(min), "internal: --", name, "'s range is empty or has no lower bound");
  f.range = {min, max};
}

void Flags::bind(CLI::App& app) {
  app.formatter(std::make_shared<VerbFormatter>(usage_, summary_));
  for (const std::string& name : order_) {
    Flag& f = flags_.at(name);
    std::string names = (name == positional_ ? name + "," : "") + "--" + name;
    for (const std::string& alias : f.aliases) names += ",--" + alias;
    std::string help = f.help;
    if (f.range) {
      const auto [min, max] = *f.range;
      help += std::string(std::isinf(max) ? " (" : " (in ") + range_text(min, max) + ")";
    }
    CLI::Option* option = nullptr;
    std::string fallback;
    switch (f.kind) {
      case Kind::kBool:
        option = app.add_flag(names, f.boolean, help);
        break;
      case Kind::kString:
        option = app.add_option(names, f.text, help);
        fallback = f.text;
        break;
      case Kind::kInt:
      case Kind::kCount:
        option = app.add_option(names, f.integer, help);
        option->transform(f.kind == Kind::kInt ? integer_validator() : count_validator());
        fallback = std::to_string(f.integer);
        break;
      case Kind::kDouble:
        option = app.add_option(names, f.number, help)->check(number_validator());
        fallback = number_text(f.number);
        break;
    }
    if (f.kind != Kind::kBool) option->type_name(f.value_name);
    if (f.range) option->check(range_validator(f.range->first, f.range->second));
    if (f.has_fallback) option->default_str(fallback);
    if (f.required) option->required();
    // argparse takes the last of a repeated flag (launch scripts append overrides); the model given
    // both as the positional argument and as --model is a mistake, so that one is refused.
    option->multi_option_policy(name == positional_ ? CLI::MultiOptionPolicy::Throw
                                                    : CLI::MultiOptionPolicy::TakeLast);
  }
}

bool Flags::parse(int argc, char** argv) {
  CLI::App app;
  bind(app);
  std::vector<std::string> args(argv, argv + argc);
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector last argument first
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return false;
  } catch (const CLI::ParseError& error) {
    throw Error(str_cat(error.what(), " (see --help)"));
  }
  for (auto& [name, f] : flags_) f.given = app.get_option("--" + name)->count() > 0;
  return true;
}

std::string Flags::help() const {
  Flags copy = *this;  // CLI11 binds to the values it would parse into
  CLI::App app;
  copy.bind(app);
  return app.help();
}

const Flags::Flag& Flags::flag(const std::string& name) const {
  auto it = flags_.find(name);
  DSINFER_CHECK(it != flags_.end(), "internal: flag --", name, " was never declared");
  return it->second;
}

bool Flags::has(const std::string& name) const {
  const Flag& f = flag(name);
  return f.given || f.has_fallback;
}

bool Flags::given(const std::string& name) const { return flag(name).given; }

std::string Flags::get_string(const std::string& name) const {
  const Flag& f = flag(name);
  switch (f.kind) {
    case Kind::kString: return f.text;
    case Kind::kInt:
    case Kind::kCount: return has(name) ? std::to_string(f.integer) : "";
    case Kind::kDouble: return has(name) ? number_text(f.number) : "";
    case Kind::kBool: return f.boolean ? "true" : "";
  }
  return "";
}

int64_t Flags::get_int(const std::string& name) const { return flag(name).integer; }

double Flags::get_double(const std::string& name) const { return flag(name).number; }

bool Flags::get_bool(const std::string& name) const { return flag(name).boolean; }

bool parse_count(const std::string& text, int64_t* value) {
  if (parse_int64(text, value)) return true;
  if (text.size() < 2) return false;
  const char suffix = text.back();
  const std::string number = text.substr(0, text.size() - 1);
  auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  for (char c : number)
    if (!digit(c) && c != '.') return false;
  if (!digit(number.front()) || !digit(number.back())) return false;
  double multiplier = 0;
  switch (suffix) {
    case 'k': multiplier = 1e3; break;
    case 'm': multiplier = 1e6; break;
    case 'g': multiplier = 1e9; break;
    case 'K': multiplier = 1024.0; break;
    case 'M': multiplier = 1024.0 * 1024; break;
    case 'G': multiplier = 1024.0 * 1024 * 1024; break;
    default: return false;
  }
  double amount;
  if (!parse_double(number, &amount)) return false;
  // Binary sizes are whole numbers of units, as in vLLM ("1.5K" is refused; "1.5k" is 1500).
  if (std::isupper(static_cast<unsigned char>(suffix)) && number.find('.') != std::string::npos) return false;
  const double product = std::trunc(amount * multiplier);
  if (!(product < 9.2e18)) return false;
  *value = static_cast<int64_t>(product);
  return true;
}

}  // namespace dsinfer::cli
