#include "cli/flags.h"

#include <cstdio>

#include "core/error.h"
#include "core/strings.h"

namespace dsinfer::cli {

Flags::Flags(std::string usage, std::string summary) : usage_(std::move(usage)), summary_(std::move(summary)) {}

void Flags::add_string(const std::string& name, const std::string& value_name, const std::string& help,
                       bool required, std::optional<std::string> fallback) {
  order_.push_back(name);
  flags_[name] = Flag{Kind::kString, value_name, help, required, std::move(fallback)};
}

void Flags::add_int(const std::string& name, const std::string& help, std::optional<int64_t> fallback) {
  order_.push_back(name);
  flags_[name] = Flag{Kind::kInt, "N", help, false,
                      fallback ? std::optional<std::string>(std::to_string(*fallback)) : std::nullopt};
}

void Flags::add_double(const std::string& name, const std::string& help, std::optional<double> fallback) {
  order_.push_back(name);
  std::optional<std::string> text;
  if (fallback) text = str_cat(*fallback);
  flags_[name] = Flag{Kind::kDouble, "X", help, false, text};
}

void Flags::add_bool(const std::string& name, const std::string& help) {
  order_.push_back(name);
  flags_[name] = Flag{Kind::kBool, "", help, false, std::nullopt};
}

bool Flags::parse(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
    DSINFER_CHECK(arg.rfind("--", 0) == 0 && arg.size() > 2, usage_, ": unexpected argument '", arg,
                  "' (see --help)");
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (size_t equals = name.find('='); equals != std::string::npos) {
      inline_value = name.substr(equals + 1);
      name = name.substr(0, equals);
    }
    auto it = flags_.find(name);
    DSINFER_CHECK(it != flags_.end(), usage_, ": unknown flag --", name, " (see --help)");
    Flag& f = it->second;
    if (f.kind == Kind::kBool) {
      DSINFER_CHECK(!inline_value, usage_, ": --", name, " takes no value");
      f.value = "true";
      continue;
    }
    if (inline_value) {
      f.value = *inline_value;
    } else {
      DSINFER_CHECK(i + 1 < argc, usage_, ": --", name, " needs a value");
      f.value = argv[++i];
    }
    int64_t integer;
    double number;
    DSINFER_CHECK(f.kind != Kind::kInt || parse_int64(*f.value, &integer), usage_, ": --", name,
                  " must be an integer, got '", *f.value, "'");
    DSINFER_CHECK(f.kind != Kind::kDouble || parse_double(*f.value, &number), usage_, ": --", name,
                  " must be a number, got '", *f.value, "'");
  }
  for (const auto& [name, f] : flags_)
    DSINFER_CHECK(!f.required || f.value, usage_, ": --", name, " is required (see --help)");
  return true;
}

std::string Flags::help() const {
  std::string out = "usage: " + usage_ + "\n\n" + summary_ + "\n\nflags:\n";
  for (const std::string& name : order_) {
    const Flag& f = flags_.at(name);
    std::string left = "  --" + name + (f.value_name.empty() ? "" : " " + f.value_name);
    if (left.size() < 28) left.resize(28, ' ');
    else left += "  ";
    out += left + f.help;
    if (f.required) out += " (required)";
    else if (f.value && f.kind != Kind::kBool) out += " (default " + *f.value + ")";
    out += "\n";
  }
  return out;
}

const Flags::Flag& Flags::flag(const std::string& name) const {
  auto it = flags_.find(name);
  DSINFER_CHECK(it != flags_.end(), "internal: flag --", name, " was never declared");
  return it->second;
}

bool Flags::has(const std::string& name) const { return flag(name).value.has_value(); }

std::string Flags::get_string(const std::string& name) const { return flag(name).value.value_or(""); }

int64_t Flags::get_int(const std::string& name) const {
  int64_t value = 0;
  if (const auto& text = flag(name).value) parse_int64(*text, &value);
  return value;
}

double Flags::get_double(const std::string& name) const {
  double value = 0;
  if (const auto& text = flag(name).value) parse_double(*text, &value);
  return value;
}

bool Flags::get_bool(const std::string& name) const { return flag(name).value.has_value(); }

}  // namespace dsinfer::cli
