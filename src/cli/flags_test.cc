// Flags over CLI11: aliases, the positional argument, vLLM's size suffixes, types, ranges and help.
#include "cli/flags.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "core/error.h"

namespace dsinfer::cli {
namespace {

// Parses `args` (without the verb) as a command line.
bool parse(Flags& flags, std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return flags.parse(static_cast<int>(argv.size()), argv.data());
}

Flags sample_flags() {
  Flags flags("test", "a test");
  flags.add_string("model", "DIR", "the model", true);
  flags.add_alias("model-path", "model");
  flags.set_positional("model");
  flags.add_count("max-model-len", "context");
  flags.add_int("port", "port", 8000);
  return flags;
}

TEST(ParseCount, ReadsSizesAsVllmDoes) {
  int64_t value = 0;
  EXPECT_TRUE(parse_count("32768", &value));
  EXPECT_EQ(value, 32768);
  EXPECT_TRUE(parse_count("32k", &value));
  EXPECT_EQ(value, 32000);
  EXPECT_TRUE(parse_count("32K", &value));
  EXPECT_EQ(value, 32768);
  EXPECT_TRUE(parse_count("25.6k", &value));
  EXPECT_EQ(value, 25600);
  EXPECT_TRUE(parse_count("1m", &value));
  EXPECT_EQ(value, 1000000);
  EXPECT_TRUE(parse_count("2M", &value));
  EXPECT_EQ(value, 2 * 1024 * 1024);
  EXPECT_TRUE(parse_count("1G", &value));
  EXPECT_EQ(value, int64_t{1} << 30);
  for (const char* bad : {"", "k", "1.5K", "32x", "-1k", "1.k", ".5k", "32 k", "1e3k", "99999999999G"})
    EXPECT_FALSE(parse_count(bad, &value)) << bad;
}

TEST(Flags, ThePositionalArgumentAndTheAliasSetTheFlag) {
  Flags positional = sample_flags();
  ASSERT_TRUE(parse(positional, {"/models/a", "--port", "9"}));
  EXPECT_EQ(positional.get_string("model"), "/models/a");
  EXPECT_EQ(positional.get_int("port"), 9);

  Flags alias = sample_flags();
  ASSERT_TRUE(parse(alias, {"--model-path=/models/b"}));
  EXPECT_EQ(alias.get_string("model"), "/models/b");

  Flags plain = sample_flags();
  ASSERT_TRUE(parse(plain, {"--model", "/models/c"}));
  EXPECT_EQ(plain.get_string("model"), "/models/c");
}

TEST(Flags, TheModelGivenTwiceOrAStrayArgumentIsRefused) {
  Flags twice = sample_flags();
  EXPECT_THROW(parse(twice, {"/models/a", "--model", "/models/b"}), Error);
  Flags twice_by_alias = sample_flags();
  EXPECT_THROW(parse(twice_by_alias, {"--model-path", "/models/b", "/models/a"}), Error);
  Flags stray = sample_flags();
  EXPECT_THROW(parse(stray, {"/models/a", "/models/b"}), Error);
  Flags missing = sample_flags();
  EXPECT_THROW(parse(missing, {"--port", "1"}), Error);
}

TEST(Flags, CountsTakeSuffixesAndPlainIntegersDoNot) {
  Flags flags = sample_flags();
  ASSERT_TRUE(parse(flags, {"m", "--max-model-len", "32k"}));
  EXPECT_EQ(flags.get_int("max-model-len"), 32000);
  Flags port = sample_flags();
  EXPECT_THROW(parse(port, {"m", "--port", "8k"}), Error);
  Flags bad = sample_flags();
  EXPECT_THROW(parse(bad, {"m", "--max-model-len", "1.5K"}), Error);
}

// CLI11 lists an alias beside the flag's own name ("--model,--model-path DIR"), as argparse does
// ("--tensor-parallel-size, -tp"); the old parser wrote "(also --model-path)" after the help text.
TEST(Flags, HelpIsGeneratedWithTheAliasesDefaultsAndRanges) {
  Flags flags = sample_flags();
  flags.set_range("port", 0, 65535);
  flags.set_range("max-model-len", 1, std::numeric_limits<double>::infinity());
  const std::string help = flags.help();
  for (const char* expected : {"usage: test", "a test", "--model,--model-path DIR", "REQUIRED", "--port N=8000",
                               "(in [0, 65535])", "--max-model-len N", "(at least 1)", "-h,--help"})
    EXPECT_NE(help.find(expected), std::string::npos) << expected << " in\n" << help;
}

TEST(Flags, HelpReturnsFalseAndIsNotAnError) {
  Flags flags = sample_flags();
  EXPECT_FALSE(parse(flags, {"--help"}));
  Flags short_form = sample_flags();
  EXPECT_FALSE(parse(short_form, {"-h"}));
}

// The message of the Error that parsing `args` throws ("" when none).
std::string refusal(Flags flags, std::vector<std::string> args) {
  try {
    parse(flags, std::move(args));
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(Flags, UnknownFlagsAndStrayArgumentsGetCli11sMessage) {
  EXPECT_NE(refusal(sample_flags(), {"m", "--no-such-flag"}).find("not expected: --no-such-flag"), std::string::npos);
  EXPECT_NE(refusal(sample_flags(), {"m", "--no-such-flag"}).find("see --help"), std::string::npos);
  EXPECT_NE(refusal(sample_flags(), {"m", "n"}).find("not expected: n"), std::string::npos);
  EXPECT_NE(refusal(sample_flags(), {"--port", "1"}).find("--model is required"), std::string::npos);
  EXPECT_NE(refusal(sample_flags(), {"m", "--port"}).find("--port"), std::string::npos);
}

TEST(Flags, ValuesAreTypedAndRangeChecked) {
  Flags flags = sample_flags();
  flags.add_double("fraction", "a fraction", 0.5);
  flags.set_range("fraction", 0, 1);
  flags.set_range("port", 0, 65535);
  ASSERT_TRUE(parse(flags, {"m", "--fraction", "0.25", "--port", "65535"}));
  EXPECT_DOUBLE_EQ(flags.get_double("fraction"), 0.25);
  EXPECT_EQ(flags.get_int("port"), 65535);

  Flags bounds = sample_flags();
  bounds.add_double("fraction", "a fraction", 0.5);
  bounds.set_range("fraction", 0, 1);
  bounds.set_range("port", 0, 65535);
  EXPECT_NE(refusal(bounds, {"m", "--port", "65536"}).find("--port: must be in [0, 65535], got 65536"),
            std::string::npos);
  EXPECT_NE(refusal(bounds, {"m", "--port=-1"}).find("must be in [0, 65535]"), std::string::npos);
  EXPECT_NE(refusal(bounds, {"m", "--fraction", "1.5"}).find("--fraction: must be in [0, 1], got 1.5"),
            std::string::npos);
  EXPECT_NE(refusal(bounds, {"m", "--fraction", "nan"}).find("must be in [0, 1]"), std::string::npos);
  EXPECT_NE(refusal(bounds, {"m", "--fraction", "half"}).find("--fraction: must be a number, got 'half'"),
            std::string::npos);
  EXPECT_NE(refusal(bounds, {"m", "--port", "80.5"}).find("--port: must be an integer, got '80.5'"),
            std::string::npos);
}

// CLI11 alone would read "010" as octal 8 and saturate an integer that overflows.
TEST(Flags, IntegersAreDecimalAndMustFit) {
  Flags leading_zero = sample_flags();
  ASSERT_TRUE(parse(leading_zero, {"m", "--port", "010"}));
  EXPECT_EQ(leading_zero.get_int("port"), 10);
  EXPECT_NE(refusal(sample_flags(), {"m", "--port", "0x10"}).find("must be an integer"), std::string::npos);
  EXPECT_NE(refusal(sample_flags(), {"m", "--port", "99999999999999999999"}).find("must be an integer"),
            std::string::npos);
  Flags negative = sample_flags();
  ASSERT_TRUE(parse(negative, {"m", "--port", "-3"}));
  EXPECT_EQ(negative.get_int("port"), -3);
}

TEST(Flags, ARepeatedFlagTakesTheLastValueAsArgparseDoes) {
  Flags flags = sample_flags();
  ASSERT_TRUE(parse(flags, {"m", "--port", "1", "--port=2"}));
  EXPECT_EQ(flags.get_int("port"), 2);
}

TEST(Flags, BooleansAreBareOrTakeTrueOrFalse) {
  auto with_bool = [] {
    Flags flags = sample_flags();
    flags.add_bool("json", "print JSON");
    return flags;
  };
  Flags bare = with_bool();
  ASSERT_TRUE(parse(bare, {"m", "--json"}));
  EXPECT_TRUE(bare.get_bool("json"));
  Flags off = with_bool();
  ASSERT_TRUE(parse(off, {"m", "--json=false"}));
  EXPECT_FALSE(off.get_bool("json"));
  Flags absent = with_bool();
  ASSERT_TRUE(parse(absent, {"m"}));
  EXPECT_FALSE(absent.get_bool("json"));
  EXPECT_FALSE(absent.has("json"));
  EXPECT_NE(refusal(with_bool(), {"m", "--json=maybe"}), "");
}

TEST(Flags, HasMeansGivenOrDefaulted) {
  Flags flags = sample_flags();
  ASSERT_TRUE(parse(flags, {"m"}));
  EXPECT_TRUE(flags.has("model"));
  EXPECT_TRUE(flags.has("port"));             // a fallback
  EXPECT_FALSE(flags.has("max-model-len"));   // none
  EXPECT_EQ(flags.get_int("max-model-len"), 0);
  EXPECT_EQ(flags.get_string("port"), "8000");
}

}  // namespace
}  // namespace dsinfer::cli
