// NcclCommunicator against LocalCommunicator: every collective of every group (world, attention,
// across DP) of several parallel configurations, on GPUs, one thread per rank, on the same random
// inputs. Needs 2 GPUs or more and fails with fewer (scripts/gpu-test.sh, step nccl, runs it only
// where there are 2).
#include "parallel/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <string_view>
#include <thread>

#include "backend/cuda/cuda_backend.h"
#include "backend/make_backend.h"
#include "core/error.h"
#include "parallel/local_communicator.h"
#include "parallel/nccl_rank_groups.h"

namespace dsinfer::parallel {
namespace {

// NVLink multicast (NVLS) stays off: on the shared machines these tests run on, a program using it
// can put the host's GPUs out of service. Set at start-up, before any NCCL call.
[[maybe_unused]] const bool kNvlinkMulticastOff = [] {
  const char* value = std::getenv("NCCL_NVLS_ENABLE");
  if (value == nullptr || std::string_view(value) != "0") setenv("NCCL_NVLS_ENABLE", "0", 1);
  return true;
}();

constexpr auto kRankTimeout = std::chrono::seconds(180);

int gpus() { return backend::cuda::device_count(); }

std::string too_few_gpus(int found) {
  return str_cat("nccl_communicator_test needs 2 or more GPUs and found ", found,
                 ": NCCL between ranks cannot be tested on one (run it on a multi-GPU machine)");
}

// Runs body(rank) on one thread per rank, with the rank's GPU current, and returns each rank's
// error ("" if none). A rank that fails may leave the others inside an NCCL call for ever, so a run
// still going after kRankTimeout ends the process with what is known rather than hang.
std::vector<std::string> on_every_rank(int world, const std::function<void(int)>& body) {
  std::mutex mutex;
  std::condition_variable finished;
  int done = 0;
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank)
    threads.emplace_back([&, rank] {
      std::string error;
      try {
        if (cudaSetDevice(rank) != cudaSuccess) throw Error(str_cat("cudaSetDevice(", rank, ") failed"));
        body(rank);
      } catch (const std::exception& e) {
        error = e.what();
      }
      std::lock_guard<std::mutex> lock(mutex);
      errors[rank] = error;
      ++done;
      finished.notify_all();
    });
  std::unique_lock<std::mutex> lock(mutex);
  if (!finished.wait_for(lock, kRankTimeout, [&] { return done == world; })) {
    std::fprintf(stderr, "nccl_communicator_test: %d of %d ranks still running after %lld s; errors so far:\n",
                 world - done, world, static_cast<long long>(kRankTimeout.count()));
    for (int rank = 0; rank < world; ++rank)
      if (!errors[rank].empty()) std::fprintf(stderr, "  rank %d: %s\n", rank, errors[rank].c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }
  lock.unlock();
  for (auto& thread : threads) thread.join();
  return errors;
}

// Host tensors of random values in [-1, 1), from (seed); bf16 and int32 ones hold the same draws
// rounded (int32: scaled by 1000).
Tensor random_host(DType dtype, Shape shape, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Tensor t = Tensor::empty(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    float value = uniform(random);
    if (dtype == DType::kF32) t.data<float>()[i] = value;
    else if (dtype == DType::kBF16) t.data<uint16_t>()[i] = f32_to_bf16(value);
    else t.data<int32_t>()[i] = static_cast<int32_t>(value * 1000);
  }
  return t;
}

float value_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kBF16 ? bf16_to_f32(t.data<uint16_t>()[i]) : t.data<float>()[i];
}

// f32 copies of a host f32/bf16 tensor: exact and elementwise absolute value.
Tensor widened(const Tensor& t, bool absolute) {
  Tensor out = Tensor::empty(DType::kF32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) out.data<float>()[i] = absolute ? std::fabs(value_at(t, i)) : value_at(t, i);
  return out;
}

std::string listed(const std::vector<int64_t>& counts) {
  std::string text = "{";
  for (size_t i = 0; i < counts.size(); ++i) text += str_cat(i ? ", " : "", counts[i]);
  return text + "}";
}

Tensor counts_tensor(const std::vector<int64_t>& counts) {
  Tensor t = Tensor::empty(DType::kI64, {static_cast<int64_t>(counts.size())});
  if (!counts.empty()) std::memcpy(t.raw(), counts.data(), t.nbytes());
  return t;
}

// One collective on one rank: NCCL's result (copied to the host) beside LocalCommunicator's. Sums
// also carry sum_r |x_r| and the relative error a reordered, rounded sum may have against it.
struct Answer {
  std::string what;
  Tensor nccl;
  Tensor expected;
  Tensor magnitude;  // sums only, f32
  double relative = 0;
};

// A collective that copies: NCCL must give LocalCommunicator's bytes.
Answer exact(std::string what, Tensor nccl, Tensor expected) {
  Answer answer;
  answer.what = std::move(what);
  answer.nccl = std::move(nccl);
  answer.expected = std::move(expected);
  return answer;
}

struct Kind {
  const char* name;
  std::unique_ptr<Communicator> RankGroups::*slot;
  std::vector<std::vector<int>> (*groups)(const ParallelConfig&);
};

std::vector<std::vector<int>> the_world(const ParallelConfig& config) {
  std::vector<int> everyone;
  for (int rank = 0; rank < config.world_size(); ++rank) everyone.push_back(rank);
  return {everyone};
}

const Kind kKinds[] = {{"world", &RankGroups::world, &the_world},
                       {"attention", &RankGroups::attention, &attention_groups},
                       {"across_dp", &RankGroups::across_dp, &across_dp_groups}};

// Every collective on one rank's group of one kind, in the same order on every rank.
std::vector<Answer> exercise(const std::string& kind, int world_rank, backend::Backend& gpu, Communicator& nccl,
                             Communicator& local) {
  std::vector<Answer> answers;
  EXPECT_EQ(nccl.rank(), local.rank()) << kind << " rank of world rank " << world_rank;
  EXPECT_EQ(nccl.size(), local.size()) << kind << " size of world rank " << world_rank;
  const int rank = nccl.rank(), size = nccl.size();
  uint64_t seed = static_cast<uint64_t>(world_rank) * 1000;

  // all_reduce_sum: f32 and bf16 (the GPU's activations), small and DeepSeek-V3-wide.
  const Shape sum_shapes[] = {{3, 5}, {64, 7168}, {1, 7}};
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (const Shape& shape : sum_shapes) {
      Tensor host = random_host(dtype, shape, ++seed);
      Tensor x = gpu.to_device(host);
      nccl.all_reduce_sum(x);
      Tensor sum = widened(host, false), magnitude = widened(host, true);
      local.all_reduce_sum(sum);
      local.all_reduce_sum(magnitude);
      const double unit = dtype == DType::kF32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -8);
      answers.push_back({str_cat(kind, " all_reduce_sum ", dtype_name(dtype), " ", shape.to_string()), gpu.to_host(x),
                         sum, magnitude, 2.0 * (size + 1) * unit});
    }

  // all_gather_rows with unequal counts: group rank 1 has none; then every rank none.
  auto rows_of = [](int r) -> int64_t { return r == 1 ? 0 : 2 + 3 * r; };
  struct Gather {
    DType dtype;
    Shape row;  // one row's shape, after the rows
    bool empty;
  };
  const Gather gathers[] = {{DType::kF32, {7}, false}, {DType::kBF16, {576}, false},
                            {DType::kI32, {3, 2}, false}, {DType::kBF16, {16}, true}};
  for (const Gather& gather : gathers) {
    std::vector<int64_t> rows;
    for (int r = 0; r < size; ++r) rows.push_back(gather.empty ? 0 : rows_of(r));
    std::vector<int64_t> dims = {rows[rank]};
    for (int axis = 0; axis < gather.row.rank(); ++axis) dims.push_back(gather.row[axis]);
    Tensor host = random_host(gather.dtype, Shape::from(dims), ++seed);
    Tensor out = nccl.all_gather_rows(gpu.to_device(host), rows);
    answers.push_back(exact(str_cat(kind, " all_gather_rows ", dtype_name(gather.dtype), " rows ", listed(rows)),
                            gpu.to_host(out), local.all_gather_rows(host, rows)));
  }

  // all_to_all_rows with random counts, the same draw on every rank: send[i][j] rows from i to j,
  // with a zero from each rank to the next.
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    std::mt19937 draw(static_cast<uint32_t>(size * 31 + (dtype == DType::kF32)));
    std::uniform_int_distribution<int> count(0, 4);
    std::vector<std::vector<int64_t>> send(size, std::vector<int64_t>(size));
    for (int i = 0; i < size; ++i)
      for (int j = 0; j < size; ++j) send[i][j] = (size > 1 && j == (i + 1) % size) ? 0 : count(draw);
    std::vector<int64_t> recv;
    for (int i = 0; i < size; ++i) recv.push_back(send[i][rank]);
    int64_t total = 0;
    for (int64_t n : send[rank]) total += n;
    const int64_t width = dtype == DType::kF32 ? 9 : 576;
    Tensor host = random_host(dtype, {total, width}, ++seed);
    Tensor out = nccl.all_to_all_rows(gpu.to_device(host), send[rank], recv);
    answers.push_back(exact(str_cat(kind, " all_to_all_rows ", dtype_name(dtype), " send ", listed(send[rank])),
                            gpu.to_host(out), local.all_to_all_rows(host, send[rank], recv)));
  }

  // all_gather_counts: several values a rank, past 32 bits and negative too; then one (gather_row_counts).
  const std::vector<int64_t> values = {rank + 1, -7 * static_cast<int64_t>(rank), (int64_t{1} << 40) + world_rank};
  answers.push_back(exact(str_cat(kind, " all_gather_counts"), counts_tensor(nccl.all_gather_counts(values)),
                          counts_tensor(local.all_gather_counts(values))));
  answers.push_back(exact(str_cat(kind, " gather_row_counts"), counts_tensor(gather_row_counts(nccl, 5 * rank)),
                          counts_tensor(gather_row_counts(local, 5 * rank))));
  return answers;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

void expect_answer(const Answer& answer, int world_rank) {
  if (!answer.magnitude.defined()) {
    EXPECT_TRUE(same_bytes(answer.nccl, answer.expected))
        << answer.what << " on world rank " << world_rank << ": NCCL gave " << answer.nccl.shape().to_string()
        << " " << dtype_name(answer.nccl.dtype()) << ", expected " << answer.expected.shape().to_string() << " "
        << dtype_name(answer.expected.dtype()) << " with the same bytes";
    return;
  }
  ASSERT_EQ(answer.nccl.shape(), answer.expected.shape()) << answer.what;
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < answer.nccl.numel(); ++i) {
    double error = std::fabs(static_cast<double>(value_at(answer.nccl, i)) - answer.expected.data<float>()[i]);
    if (error > answer.relative * answer.magnitude.data<float>()[i] + 1e-30) {
      if (first < 0) first = i;
      ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0) << answer.what << " on world rank " << world_rank << ": " << wrong << " elements off, first at "
                      << first << ": NCCL " << (first >= 0 ? value_at(answer.nccl, first) : 0.0f) << ", expected "
                      << (first >= 0 ? answer.expected.data<float>()[first] : 0.0f);
}

// Every collective of every group kind of `config` on its ranks' GPUs, against LocalCommunicator.
void expect_matches_local(const ParallelConfig& config) {
  const int world = config.world_size();
  ASSERT_GE(gpus(), world) << config.describe() << " needs " << world << " GPUs";
  ASSERT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0") << "NVLink multicast must stay off";
  std::vector<std::unique_ptr<backend::Backend>> backends;
  std::vector<backend::Backend*> pointers;
  for (int rank = 0; rank < world; ++rank) {
    backends.push_back(backend::make_backend(str_cat("cuda:", rank)));
    pointers.push_back(backends.back().get());
  }
  std::vector<RankGroups> nccl = make_nccl_rank_groups(config, pointers);
  std::vector<RankGroups> local = make_local_rank_groups(config);

  // answers[rank][kind]
  std::vector<std::vector<std::vector<Answer>>> answers(world, std::vector<std::vector<Answer>>(std::size(kKinds)));
  std::vector<std::string> errors = on_every_rank(world, [&](int rank) {
    for (size_t k = 0; k < std::size(kKinds); ++k)
      answers[rank][k] = exercise(kKinds[k].name, rank, *pointers[rank], *(nccl[rank].*kKinds[k].slot),
                                  *(local[rank].*kKinds[k].slot));
  });
  for (int rank = 0; rank < world; ++rank) ASSERT_EQ(errors[rank], "") << config.describe() << ", rank " << rank;

  SCOPED_TRACE(config.describe());
  for (int rank = 0; rank < world; ++rank)
    for (const auto& kind_answers : answers[rank])
      for (const Answer& answer : kind_answers) expect_answer(answer, rank);
  // Sums must be the same bits on every rank of a group (communicator.h), not only close.
  for (size_t k = 0; k < std::size(kKinds); ++k)
    for (const std::vector<int>& members : kKinds[k].groups(config))
      for (int member : members)
        for (size_t i = 0; i < answers[member][k].size(); ++i) {
          const Answer& answer = answers[member][k][i];
          if (answer.magnitude.defined()) {
            EXPECT_TRUE(same_bytes(answer.nccl, answers[members[0]][k][i].nccl))
                << answer.what << ": world rank " << member << " differs from world rank " << members[0];
          }
        }
}

TEST(NcclCommunicator, MatchesTheLocalCommunicatorUnderTensorParallelism) {
  ASSERT_GE(gpus(), 2) << too_few_gpus(gpus());
  expect_matches_local({.attention_tp = 2});
  if (gpus() > 2) expect_matches_local({.attention_tp = gpus()});
}

TEST(NcclCommunicator, MatchesTheLocalCommunicatorUnderDataParallelAttention) {
  ASSERT_GE(gpus(), 2) << too_few_gpus(gpus());
  expect_matches_local({.attention_tp = 1, .attention_dp = 2});
}

TEST(NcclCommunicator, MatchesTheLocalCommunicatorUnderTensorAndDataParallelism) {
  ASSERT_GE(gpus(), 2) << too_few_gpus(gpus());
  if (gpus() < 4) GTEST_SKIP() << "tp 2 x dp 2 needs 4 GPUs, found " << gpus();
  expect_matches_local({.attention_tp = 2, .attention_dp = 2});
  if (gpus() >= 8) expect_matches_local({.attention_tp = 4, .attention_dp = 2, .expert_parallel = true});
}

// After one sum together (NCCL connects the ranks on first use), rank 0 sums again and waits for
// it while rank 1 never comes and aborts instead: rank 0's wait ends, and every later collective of
// the group throws, on both ranks. Another group of the same ranks is untouched.
TEST(NcclCommunicator, AbortFreesARankWaitingForAnotherAndStaysAborted) {
  ASSERT_GE(gpus(), 2) << too_few_gpus(gpus());
  std::vector<std::unique_ptr<backend::Backend>> backends;
  backends.push_back(backend::make_backend("cuda:0"));
  backends.push_back(backend::make_backend("cuda:1"));
  std::vector<RankGroups> groups =
      make_nccl_rank_groups({.attention_tp = 2}, {backends[0].get(), backends[1].get()});
  std::vector<std::string> errors = on_every_rank(2, [&](int rank) {
    backend::Backend& gpu = *backends[rank];
    Communicator& world = *groups[rank].world;
    Tensor x = gpu.to_device(random_host(DType::kF32, {4, 1024}, rank));
    world.all_reduce_sum(x);
    gpu.synchronize();
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      world.abort();
    } else {
      world.all_reduce_sum(x);  // rank 1 never joins this one
      gpu.synchronize();        // returns once rank 1 aborts
    }
    EXPECT_THROW(world.all_reduce_sum(x), Error) << "rank " << rank;
    EXPECT_THROW(gather_row_counts(world, 1), Error) << "rank " << rank;
  });
  for (int rank = 0; rank < 2; ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
  errors = on_every_rank(2, [&](int rank) {
    EXPECT_EQ(gather_row_counts(*groups[rank].attention, rank + 1), (std::vector<int64_t>{1, 2})) << "rank " << rank;
  });
  for (int rank = 0; rank < 2; ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
}

TEST(NcclCommunicator, RefusesBackendsThatDoNotFitTheConfig) {
  ASSERT_GE(gpus(), 2) << too_few_gpus(gpus());
  EXPECT_TRUE(nccl_available());
  auto gpu = backend::make_backend("cuda:0");
  auto cpu = backend::make_backend("cpu");
  const ParallelConfig tp2{.attention_tp = 2};
  EXPECT_THROW(make_nccl_rank_groups(tp2, {gpu.get()}), Error);                 // one backend for two ranks
  EXPECT_THROW(make_nccl_rank_groups(tp2, {gpu.get(), gpu.get()}), Error);      // two ranks on one GPU
  EXPECT_THROW(make_nccl_rank_groups(tp2, {gpu.get(), cpu.get()}), Error);      // not a CUDA backend
}

}  // namespace
}  // namespace dsinfer::parallel
