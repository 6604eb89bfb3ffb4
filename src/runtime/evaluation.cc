#include "runtime/evaluation.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <numeric>

#include "core/file.h"
#include "core/json.h"
#include "core/strings.h"
#include "model/batch_builder.h"
#include "model/logit_divergence.h"

namespace dsinfer::runtime {
namespace {

std::vector<Json> read_jsonl(const std::string& path, int64_t count) {
  std::vector<Json> rows;
  int64_t line_number = 0;
  for (const std::string& line : split(read_file(path), '\n')) {
    ++line_number;
    if (trim(line).empty()) continue;
    if (static_cast<int64_t>(rows.size()) == count) break;
    try {
      rows.push_back(Json::parse(line));
    } catch (const Error& error) {
      throw Error(str_cat(path, ":", line_number, ": ", error.what()));
    }
  }
  DSINFER_CHECK(!rows.empty(), path, ": no problems");
  return rows;
}

const std::string& string_field(const Json& row, const char* name, const std::string& path) {
  const Json* field = row.find(name);
  DSINFER_CHECK(field && field->is_string(), path, ": every line needs a string \"", name, "\"");
  return field->as_string();
}

}  // namespace

std::string final_answer(const std::string& completion) {
  size_t think_end = completion.rfind("</think>");
  std::string_view answer = think_end == std::string::npos ? std::string_view(completion)
                                                           : std::string_view(completion).substr(think_end + 8);
  return std::string(trim(answer));
}

bool answer_matches(const Json& row, const std::string& completion) {
  const Json* answer = row.find("answer");
  return answer != nullptr && answer->is_string() && final_answer(completion) == answer->as_string();
}

TaskResult evaluate_task(Engine& engine, const tokenizer::Tokenizer& tokenizer, const std::string& path,
                         int64_t count, int64_t max_new_tokens, const AnswerCheck& check) {
  std::vector<Json> rows = read_jsonl(path, count);
  struct Pending {
    std::string answer, text;
    int64_t tokens = 0;
  };
  std::vector<Pending> pending(rows.size());
  std::mutex mutex;
  std::condition_variable finished_cv;
  size_t finished = 0;
  auto start = Clock::now();
  for (size_t i = 0; i < rows.size(); ++i) {
    pending[i].answer = string_field(rows[i], "answer", path);
    // The prompt is rendered already, BOS included: encode it as it stands.
    std::vector<int32_t> prompt = tokenizer.encode(string_field(rows[i], "prompt", path), false);
    RequestOptions options;
    options.sampling.temperature = 0.0f;
    options.max_tokens = std::min(max_new_tokens, engine.max_model_len() - static_cast<int64_t>(prompt.size()));
    engine.submit(std::move(prompt), options, [&, i](const StreamOutput& output) {
      std::lock_guard<std::mutex> lock(mutex);
      pending[i].text += output.text;
      pending[i].tokens += static_cast<int64_t>(output.token_ids.size());
      if (output.finished) {
        ++finished;
        finished_cv.notify_all();
      }
    });
  }
  std::unique_lock<std::mutex> lock(mutex);
  finished_cv.wait(lock, [&] { return finished == rows.size(); });
  TaskResult result;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (size_t i = 0; i < pending.size(); ++i) {
    const Pending& p = pending[i];
    ++result.problems;
    result.generated_tokens += p.tokens;
    if (check(rows[i], p.text)) {
      ++result.correct;
    } else if (result.failures.size() < 5) {
      result.failures.push_back(str_cat("expected ", p.answer, ", got: ", p.text));
    }
  }
  return result;
}

MtpResult evaluate_mtp(const model::DeepseekModel& model, const tokenizer::Tokenizer& tokenizer,
                       const std::string& path, int64_t count) {
  DSINFER_CHECK(model.num_mtp_modules() > 0, "the model has no MTP module");
  MtpResult result;
  for (const Json& row : read_jsonl(path, count)) {
    std::vector<int32_t> tokens = tokenizer.encode(string_field(row, "text", path), false);
    auto prompt_length = static_cast<int64_t>(tokenizer.encode(string_field(row, "prompt", path), false).size());
    auto n = static_cast<int64_t>(tokens.size());
    if (n < 3) continue;
    DSINFER_CHECK(n <= model.max_positions(), path, ": a text of ", n, " tokens exceeds the context");
    int64_t pages = (n + model::kPageSize - 1) / model::kPageSize;
    model::LatentCache cache = model.make_cache(pages);
    std::vector<int32_t> page_ids(pages);
    std::iota(page_ids.begin(), page_ids.end(), 0);
    model::BatchBuilder main_batch;
    main_batch.add(tokens, 0, page_ids, model::LogitRows::kNone);
    Tensor hidden = model.forward(main_batch.build(), cache).hidden;  // [n, hidden]
    // Position i (0..n-3): hidden i with token i + 1 predicts token i + 2.
    model::BatchBuilder mtp_batch;
    mtp_batch.add(std::span(tokens).subspan(1, n - 2), 0, page_ids, model::LogitRows::kAll);
    Tensor logits = model.forward_mtp(0, hidden.slice(0, n - 2), mtp_batch.build(), cache).logits;
    int64_t vocab = logits.dim(1);
    for (int64_t i = 0; i + 2 < n; ++i) {
      const float* row_logits = logits.data<float>() + i * vocab;
      auto predicted = static_cast<int32_t>(std::max_element(row_logits, row_logits + vocab) - row_logits);
      bool right = predicted == tokens[i + 2];
      ++result.positions;
      result.correct += right;
      if (i + 2 >= prompt_length) {
        ++result.completion_positions;
        result.completion_correct += right;
      }
    }
  }
  return result;
}

CacheKlResult evaluate_cache_kl(const model::DeepseekModel& reference, const model::DeepseekModel& model,
                                const tokenizer::Tokenizer& tokenizer, const std::string& path, int64_t count) {
  CacheKlResult result;
  int64_t agreeing = 0;
  double total = 0;
  for (const Json& row : read_jsonl(path, count)) {
    const std::vector<int32_t> tokens = tokenizer.encode(string_field(row, "text", path), false);
    const auto prompt = static_cast<int64_t>(tokenizer.encode(string_field(row, "prompt", path), false).size());
    const auto n = static_cast<int64_t>(tokens.size());
    if (prompt < 1 || n <= prompt) continue;
    DSINFER_CHECK(n <= model.max_positions(), path, ": a text of ", n, " tokens exceeds the context");
    const int64_t pages = (n + model::kPageSize - 1) / model::kPageSize;
    std::vector<int32_t> page_ids(pages);
    std::iota(page_ids.begin(), page_ids.end(), 0);
    model::LatentCache reference_cache = reference.make_cache(pages), cache = model.make_cache(pages);
    auto step = [&](std::span<const int32_t> step_tokens, int64_t start) {
      model::BatchBuilder batch;
      batch.add(step_tokens, static_cast<int32_t>(start), page_ids, model::LogitRows::kLast);
      const model::ForwardBatch built = batch.build();
      const Tensor want = reference.forward(built, reference_cache).logits;
      const Tensor got = model.forward(built, cache).logits;
      const int64_t vocab = want.dim(1);
      const double kl = model::kl_divergence(want.data<float>(), got.data<float>(), vocab);
      total += kl;
      result.max_kl = std::max(result.max_kl, kl);
      const float* w = want.data<float>();
      const float* g = got.data<float>();
      agreeing += std::max_element(w, w + vocab) - w == std::max_element(g, g + vocab) - g;
      ++result.positions;
    };
    // The prompt, then the answer a token a step: position i's logits predict token i + 1.
    step(std::span(tokens).first(prompt), 0);
    for (int64_t i = prompt; i + 1 < n; ++i) step(std::span(tokens).subspan(i, 1), i);
  }
  if (result.positions > 0) {
    result.mean_kl = total / static_cast<double>(result.positions);
    result.top1_agreement = static_cast<double>(agreeing) / static_cast<double>(result.positions);
  }
  return result;
}

}  // namespace dsinfer::runtime
