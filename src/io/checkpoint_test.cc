// Checkpoint directories: single file, sharded with an index, unindexed shards, and their errors.
#include "io/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/file.h"
#include "io/safetensors_writer.h"
#include "io/test_util.h"

namespace dsinfer::io {
namespace {

using test_util::make_tensor;
using test_util::ScratchDir;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

Tensor vector_of(float value) { return make_tensor(DType::kF32, {2}, {value, value + 1}); }

std::string index_json(const std::string& weight_map) {
  return R"({"metadata": {"total_size": 32}, "weight_map": )" + weight_map + "}";
}

// Two shards and an index placing a.* in the first and b.* in the second.
void write_sharded(const ScratchDir& dir) {
  write_safetensors(dir.file("model-00001-of-00002.safetensors"),
                    {{"a.weight", vector_of(1)}, {"a.bias", vector_of(3)}});
  write_safetensors(dir.file("model-00002-of-00002.safetensors"), {{"b.weight", vector_of(5)}});
  write_file(
      dir.file("model.safetensors.index.json"),
      index_json(
          R"({"a.weight": "model-00001-of-00002.safetensors", "a.bias": "model-00001-of-00002.safetensors",)"
          R"( "b.weight": "model-00002-of-00002.safetensors"})"));
}

std::string open_error(const std::string& dir) {
  try {
    Checkpoint::open(dir);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(Checkpoint, OpensSingleFile) {
  ScratchDir dir;
  write_safetensors(dir.file("model.safetensors"), {{"z", vector_of(1)}, {"a", vector_of(2)}});
  write_safetensors(dir.file("other.safetensors"), {{"ignored", vector_of(3)}});  // model.safetensors wins
  Checkpoint checkpoint = Checkpoint::open(dir.path());
  EXPECT_EQ(checkpoint.dir(), dir.path());
  EXPECT_THAT(checkpoint.names(), ElementsAre("a", "z"));
  EXPECT_TRUE(checkpoint.contains("z"));
  EXPECT_FALSE(checkpoint.contains("ignored"));
  EXPECT_EQ(checkpoint.info("a").shape, Shape({2}));
  EXPECT_EQ(checkpoint.tensor("a").data<float>()[1], 3.0f);
}

TEST(Checkpoint, OpensShardsThroughTheIndex) {
  ScratchDir dir;
  write_sharded(dir);
  write_safetensors(dir.file("stray.safetensors"), {{"a.weight", vector_of(9)}});  // not in the index
  Checkpoint checkpoint = Checkpoint::open(dir.path());
  EXPECT_THAT(checkpoint.names(), ElementsAre("a.bias", "a.weight", "b.weight"));
  EXPECT_EQ(checkpoint.tensor("a.weight").data<float>()[0], 1.0f);
  EXPECT_EQ(checkpoint.tensor("a.bias").data<float>()[0], 3.0f);
  EXPECT_EQ(checkpoint.tensor("b.weight").data<float>()[1], 6.0f);
  EXPECT_EQ(checkpoint.find("c.weight"), nullptr);
}

TEST(Checkpoint, OpensEveryShardWithoutAnIndex) {
  ScratchDir dir;
  write_safetensors(dir.file("part-b.safetensors"), {{"b", vector_of(2)}});
  write_safetensors(dir.file("part-a.safetensors"), {{"a", vector_of(1)}});
  write_file(dir.file("config.json"), "{}");
  Checkpoint checkpoint = Checkpoint::open(dir.path());
  EXPECT_THAT(checkpoint.names(), ElementsAre("a", "b"));
  EXPECT_EQ(checkpoint.tensor("b").data<float>()[0], 2.0f);
}

TEST(Checkpoint, MissingTensorNamesTheCheckpoint) {
  ScratchDir dir;
  write_safetensors(dir.file("model.safetensors"), {{"a", vector_of(1)}});
  Checkpoint checkpoint = Checkpoint::open(dir.path());
  std::string expected = dir.path() + ": tensor lm_head.weight is missing from the checkpoint";
  EXPECT_THAT([&] { checkpoint.info("lm_head.weight"); }, ThrowsMessage<Error>(HasSubstr(expected)));
  EXPECT_THAT([&] { checkpoint.tensor("lm_head.weight"); }, ThrowsMessage<Error>(HasSubstr(expected)));
}

TEST(Checkpoint, MissingShardNamesIndexAndShard) {
  ScratchDir dir;
  write_sharded(dir);
  std::filesystem::remove(dir.file("model-00002-of-00002.safetensors"));
  EXPECT_THAT(open_error(dir.path()),
              AllOf(HasSubstr("model.safetensors.index.json: shard 'model-00002-of-00002.safetensors'"),
                    HasSubstr("tensor 'b.weight'"), HasSubstr("is missing")));
}

TEST(Checkpoint, IndexEntryAbsentFromItsShard) {
  ScratchDir dir;
  write_sharded(dir);
  write_file(
      dir.file("model.safetensors.index.json"),
      index_json(
          R"({"a.weight": "model-00001-of-00002.safetensors", "b.weight": "model-00001-of-00002.safetensors"})"));
  EXPECT_THAT(open_error(dir.path()),
              AllOf(HasSubstr("model-00001-of-00002.safetensors: tensor 'b.weight' is missing"),
                    HasSubstr("model.safetensors.index.json places it in this shard")));
}

TEST(Checkpoint, TensorInTwoShards) {
  ScratchDir dir;
  write_sharded(dir);
  write_safetensors(dir.file("model-00002-of-00002.safetensors"),
                    {{"b.weight", vector_of(5)}, {"a.bias", vector_of(7)}});
  EXPECT_THAT(open_error(dir.path()), AllOf(HasSubstr("tensor 'a.bias' is in both"),
                                            HasSubstr("model-00001-of-00002.safetensors and"),
                                            HasSubstr("model-00002-of-00002.safetensors")));
}

TEST(Checkpoint, TensorInTwoFilesWithoutAnIndex) {
  ScratchDir dir;
  write_safetensors(dir.file("a.safetensors"), {{"x", vector_of(1)}});
  write_safetensors(dir.file("b.safetensors"), {{"x", vector_of(2)}});
  EXPECT_THAT(open_error(dir.path()),
              HasSubstr(dir.path() + ": tensor 'x' is in both " + dir.file("a.safetensors") + " and " +
                        dir.file("b.safetensors")));
}

TEST(Checkpoint, TensorListedTwiceInTheIndex) {
  ScratchDir dir;
  write_sharded(dir);
  write_file(
      dir.file("model.safetensors.index.json"),
      index_json(
          R"({"a.weight": "model-00001-of-00002.safetensors", "a.weight": "model-00002-of-00002.safetensors"})"));
  EXPECT_THAT(open_error(dir.path()), HasSubstr("tensor 'a.weight' is listed twice in weight_map"));
}

TEST(Checkpoint, MalformedIndexNamesTheIndex) {
  ScratchDir dir;
  write_sharded(dir);
  std::string index = dir.file("model.safetensors.index.json");
  write_file(index, "{\"weight_map\": {\n  \"a\": }");
  EXPECT_THAT(open_error(dir.path()), HasSubstr(index + ": JSON parse error at line 2"));
  write_file(index, R"({"metadata": {}})");
  EXPECT_THAT(open_error(dir.path()), HasSubstr(index + ": weight_map is missing"));
  write_file(index, R"({"weight_map": {}})");
  EXPECT_THAT(open_error(dir.path()), HasSubstr(index + ": weight_map lists no tensors"));
  write_file(index, R"({"weight_map": {"a.weight": 1}})");
  EXPECT_THAT(open_error(dir.path()),
              HasSubstr(index + ": weight_map entry for tensor 'a.weight' must be a file name"));
}

TEST(Checkpoint, MalformedShardNamesTheShard) {
  ScratchDir dir;
  write_sharded(dir);
  write_file(dir.file("model-00002-of-00002.safetensors"), "junk");
  EXPECT_THAT(open_error(dir.path()),
              HasSubstr(dir.file("model-00002-of-00002.safetensors") + ": 4 bytes is too short"));
}

TEST(Checkpoint, NoSafetensorsNamesTheDirectory) {
  ScratchDir dir;
  write_file(dir.file("config.json"), "{}");
  EXPECT_THAT(open_error(dir.path()), HasSubstr(dir.path() + ": no safetensors files"));
  EXPECT_THAT(open_error(dir.file("nope")), HasSubstr(dir.file("nope") + ": not a checkpoint directory"));
}

}  // namespace
}  // namespace dsinfer::io
