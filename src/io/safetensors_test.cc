// safetensors: round trips through write_safetensors, and one test per malformed-header case.
#include "io/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/source_path.h"
#include "io/safetensors_writer.h"
#include "io/test_util.h"

namespace dsinfer::io {
namespace {

using test_util::make_tensor;
using test_util::safetensors_bytes;
using test_util::ScratchDir;
using ::testing::HasSubstr;
using ::testing::Not;

SafetensorsHeader parse(const std::string& bytes) {
  return parse_safetensors_header(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                                  "model.safetensors");
}

std::string parse_error(const std::string& bytes) {
  try {
    parse(bytes);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(Safetensors, RoundTripsEveryDtype) {
  ScratchDir dir;
  std::vector<float> values = {1.0f, -2.5f, 0.375f, 448.0f, -0.0f, 3.0f};
  std::vector<NamedTensor> tensors = {
      {"f8", make_tensor(DType::kF8E4M3, {2, 3}, values)},
      {"bf16", make_tensor(DType::kBF16, {3, 2}, values)},
      {"f32", make_tensor(DType::kF32, {6}, values)},
      {"f16", make_tensor(DType::kF16, {1, 2, 3}, values)},
  };
  write_safetensors(dir.file("model.safetensors"), tensors, {{"format", "pt"}});

  SafetensorsFile file(dir.file("model.safetensors"));
  EXPECT_EQ(file.metadata().at("format"), "pt");
  ASSERT_EQ(file.tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, expected] = tensors[i];
    EXPECT_EQ(file.tensors()[i].name, name) << "header keeps the order given";
    const TensorInfo* info = file.find(name);
    ASSERT_NE(info, nullptr) << name;
    Tensor stored = file.tensor(*info);
    EXPECT_EQ(stored.dtype(), expected.dtype()) << name;
    EXPECT_EQ(stored.shape(), expected.shape()) << name;
    ASSERT_EQ(stored.nbytes(), expected.nbytes()) << name;
    EXPECT_EQ(std::memcmp(stored.raw(), expected.raw(), expected.nbytes()), 0) << name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(stored.raw()) % dtype_size(stored.dtype()), 0u) << name;
  }
  EXPECT_EQ(file.find("missing"), nullptr);
}

TEST(Safetensors, TensorOutlivesTheFileObject) {
  ScratchDir dir;
  write_safetensors(dir.file("a.safetensors"), {{"x", make_tensor(DType::kF32, {2}, {7.0f, 8.0f})}});
  Tensor x;
  {
    SafetensorsFile file(dir.file("a.safetensors"));
    x = file.tensor(*file.find("x"));
  }
  EXPECT_EQ(x.data<float>()[1], 8.0f);
}

TEST(Safetensors, AcceptsPaddingGapsAndEmptyTensors) {
  std::string header = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]},)"
                       R"( "empty": {"dtype": "BF16", "shape": [0, 4], "data_offsets": [10, 10]},)"
                       R"( "b": {"dtype": "U8", "shape": [3], "data_offsets": [20, 23]}}      )";
  SafetensorsHeader parsed = parse(safetensors_bytes(header, 32));
  ASSERT_EQ(parsed.tensors.size(), 3u);
  EXPECT_EQ(parsed.data_start, 8 + header.size());
  EXPECT_EQ(parsed.tensors[0].offset, 8u);
  EXPECT_EQ(parsed.tensors[0].nbytes, 8u);
  EXPECT_EQ(parsed.tensors[1].shape, Shape({0, 4}));
  EXPECT_EQ(parsed.tensors[2].dtype, DType::kU8);
  EXPECT_TRUE(parsed.metadata.empty());
}

TEST(Safetensors, MisalignedTensorComesBackAsAlignedCopy) {
  ScratchDir dir;
  std::string header = R"({"byte": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},)"
                       R"( "x": {"dtype": "F32", "shape": [2], "data_offsets": [1, 9]}})";
  header.append((8 - header.size() % 8) % 8, ' ');  // data region 8-aligned, x at offset 1
  std::string bytes = safetensors_bytes(header, 9);
  float values[2] = {1.5f, -4.0f};
  std::memcpy(bytes.data() + 8 + header.size() + 1, values, sizeof(values));
  write_file(dir.file("odd.safetensors"), bytes);

  SafetensorsFile file(dir.file("odd.safetensors"));
  Tensor x = file.tensor(*file.find("x"));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(x.raw()) % alignof(float), 0u);
  EXPECT_EQ(x.data<float>()[0], 1.5f);
  EXPECT_EQ(x.data<float>()[1], -4.0f);
}

TEST(Safetensors, FileErrorsNameThePath) {
  ScratchDir dir;
  std::string missing = dir.file("missing.safetensors");
  EXPECT_THAT([&] { SafetensorsFile file(missing); }, ::testing::ThrowsMessage<Error>(HasSubstr(missing)));
  std::string corrupt = dir.file("corrupt.safetensors");
  write_file(corrupt, safetensors_bytes("{\"x\": 1}", 0));
  EXPECT_THAT([&] { SafetensorsFile file(corrupt); },
              ::testing::ThrowsMessage<Error>(HasSubstr(corrupt + ": tensor 'x': entry must be an object")));
}

TEST(Safetensors, WriterRejectsRepeatedNames) {
  ScratchDir dir;
  Tensor x = make_tensor(DType::kF32, {1}, {1.0f});
  EXPECT_THROW(write_safetensors(dir.file("a.safetensors"), {{"x", x}, {"x", x}}), Error);
}

// One malformed header, and what the error must say.
struct BadHeader {
  const char* name;
  std::string bytes;
  std::string expected;
};

std::string file_with(const std::string& header, size_t data_size = 64) {
  return safetensors_bytes(header, data_size);
}

std::string one_tensor(const std::string& entry) { return file_with(R"({"x.weight": )" + entry + "}"); }

std::string length_prefix(uint64_t length) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(length >> (8 * i));
  return bytes;
}

const BadHeader kBadHeaders[] = {
    {"TooShort", "\x01\x02\x03", "model.safetensors: 3 bytes is too short"},
    {"HeaderPastEnd", length_prefix(1000) + "{}",
     "model.safetensors: header length 1000 runs past the end of the file (10 bytes)"},
    {"HeaderTooLarge", length_prefix(uint64_t{1} << 40) + "{}",
     "header length 1099511627776 exceeds the limit"},
    {"NotJson", file_with("{\"x\": [1,"), "model.safetensors: header: JSON parse error at line 1"},
    {"NotAnObject", file_with("[1, 2]"), "model.safetensors: header must be a JSON object, got [1,2]"},
    {"EntryNotAnObject", file_with(R"({"x.weight": 3})"),
     "tensor 'x.weight': entry must be an object, got 3"},
    {"DtypeMissing", one_tensor(R"({"shape": [2], "data_offsets": [0, 8]})"),
     "tensor 'x.weight': dtype is missing"},
    {"ShapeMissing", one_tensor(R"({"dtype": "F32", "data_offsets": [0, 8]})"),
     "tensor 'x.weight': shape is missing"},
    {"OffsetsMissing", one_tensor(R"({"dtype": "F32", "shape": [2]})"),
     "tensor 'x.weight': data_offsets is missing"},
    {"DtypeNotString", one_tensor(R"({"dtype": 4, "shape": [2], "data_offsets": [0, 8]})"),
     "tensor 'x.weight': dtype must be a string, got 4"},
    {"UnknownDtype", one_tensor(R"({"dtype": "F64", "shape": [1], "data_offsets": [0, 8]})"),
     "tensor 'x.weight': unsupported dtype 'F64'"},
    {"ShapeNotArray", one_tensor(R"({"dtype": "F32", "shape": 2, "data_offsets": [0, 8]})"),
     "tensor 'x.weight': shape must be an array, got 2"},
    {"NegativeDim", one_tensor(R"({"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]})"),
     "tensor 'x.weight': shape [-2] must hold non-negative integers"},
    {"FractionalDim", one_tensor(R"({"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]})"),
     "tensor 'x.weight': shape [2.5] must hold non-negative integers"},
    {"RankTooHigh", one_tensor(R"({"dtype": "U8", "shape": [1,1,1,1,1,1,1], "data_offsets": [0, 1]})"),
     "tensor 'x.weight': shape has rank 7, more than 6"},
    {"ElementCountOverflows",
     one_tensor(R"({"dtype": "U8", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]})"),
     "tensor 'x.weight': shape [4294967296, 4294967296] is too large"},
    {"OverflowHiddenByZero",
     one_tensor(R"({"dtype": "U8", "shape": [4294967296, 4294967296, 0], "data_offsets": [0, 0]})"),
     "is too large"},
    {"ByteCountOverflows",
     one_tensor(R"({"dtype": "I64", "shape": [2305843009213693952], "data_offsets": [0, 0]})"),
     "tensor 'x.weight': shape [2305843009213693952] is too large"},
    {"OffsetsNotAPair", one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [8]})"),
     "tensor 'x.weight': data_offsets must be [begin, end] with non-negative integers, got [8]"},
    {"NegativeOffset", one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]})"),
     "tensor 'x.weight': data_offsets must be [begin, end]"},
    {"BeginAfterEnd", one_tensor(R"({"dtype": "F32", "shape": [0], "data_offsets": [8, 0]})"),
     "tensor 'x.weight': data_offsets [8, 0] begin after end"},
    {"EndPastData", one_tensor(R"({"dtype": "F32", "shape": [25], "data_offsets": [0, 100]})"),
     "model.safetensors: tensor 'x.weight': data_offsets [0, 100] end past the data region (64 bytes)"},
    {"ByteCountMismatch", one_tensor(R"({"dtype": "F32", "shape": [4], "data_offsets": [0, 8]})"),
     "tensor 'x.weight': data_offsets [0, 8] hold 8 bytes but F32 [4] needs 16"},
    {"Overlap",
     file_with(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
               R"( "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})"),
     "model.safetensors: tensor 'b': data_offsets [8, 24] overlap tensor 'a' [0, 16]"},
    {"DuplicateName",
     file_with(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},)"
               R"( "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})"),
     "model.safetensors: tensor 'a' appears twice in the header"},
    {"MetadataNotObject", file_with(R"({"__metadata__": ["pt"]})"),
     "model.safetensors: __metadata__ must be an object of strings, got [\"pt\"]"},
    {"MetadataValueNotString", file_with(R"({"__metadata__": {"format": 1}})"),
     "model.safetensors: __metadata__ 'format' must be a string, got 1"},
    {"ControlCharactersEscaped", file_with("{\"a\\nb\": 1}"), "tensor 'a\\x0ab': entry must be an object"},
};

class SafetensorsBadHeader : public ::testing::TestWithParam<BadHeader> {};

TEST_P(SafetensorsBadHeader, ErrorNamesFileTensorAndProblem) {
  std::string message = parse_error(GetParam().bytes);
  EXPECT_THAT(message, HasSubstr(GetParam().expected));
  EXPECT_THAT(message, HasSubstr("model.safetensors: "));
  EXPECT_THAT(message, Not(HasSubstr("\n"))) << "one line";
}

INSTANTIATE_TEST_SUITE_P(Cases, SafetensorsBadHeader, ::testing::ValuesIn(kBadHeaders),
                         [](const auto& info) { return std::string(info.param.name); });

// The fuzzer's seeds say by name what the parser must do with them (fuzz/make_seed_corpus.py).
TEST(Safetensors, SeedCorpusValidAcceptedBadRejected) {
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source_path("fuzz/corpus/safetensors_header"))) {
    std::string name = entry.path().filename().string();
    bool valid = name.starts_with("valid_");
    if (!valid && !name.starts_with("bad_")) continue;  // regression inputs: only "no crash" is asked of them
    ++seeds;
    std::string message = parse_error(read_file(entry.path().string()));
    if (valid)
      EXPECT_EQ(message, "(no error)") << name;
    else
      EXPECT_THAT(message, HasSubstr("model.safetensors: ")) << name;
  }
  EXPECT_GT(seeds, 20);
}

}  // namespace
}  // namespace dsinfer::io
