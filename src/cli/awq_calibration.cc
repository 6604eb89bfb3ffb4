// Calibration rows for AWQ (awq_calibration.h).
#include "cli/awq_calibration.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "backend/make_backend.h"
#include "cli/model_files.h"
#include "core/error.h"
#include "core/file.h"
#include "core/json.h"
#include "core/log.h"
#include "core/strings.h"
#include "model/batch_builder.h"
#include "model/deepseek_model.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::cli {
namespace {

// Keeps a uniform sample of up to max_rows of the rows routed to each (layer, expert): reservoir
// sampling (Vitter's algorithm R) with one fixed-seed generator, so a file gives the same rows every run.
class RowRecorder : public model::ExpertObserver {
 public:
  explicit RowRecorder(int64_t max_rows) : max_rows_(max_rows) {}

  void observe(int64_t layer, const Tensor& x, const backend::Routing& routing) override {
    DSINFER_CHECK(x.dtype() == DType::kF32 && x.device() == Device::kCpu, "AWQ calibration runs on the CPU backend");
    const int64_t T = x.dim(0), H = x.dim(1), k = routing.expert_ids.dim(1);
    const int32_t* ids = routing.expert_ids.data<int32_t>();
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t j = 0; j < k; ++j) {
        Sample& sample = samples_[{layer, ids[t * k + j]}];
        const float* row = x.data<float>() + t * H;
        ++sample.seen;
        if (static_cast<int64_t>(sample.values.size()) < max_rows_ * H) {
          sample.values.insert(sample.values.end(), row, row + H);
          continue;
        }
        const auto slot = static_cast<int64_t>(random_() % static_cast<uint64_t>(sample.seen));
        if (slot < max_rows_) std::copy_n(row, H, sample.values.begin() + slot * H);
      }
    }
    hidden_ = H;
  }

  void move_into(CalibrationRows& out) {
    for (auto& [key, sample] : samples_) {
      const auto rows = static_cast<int64_t>(sample.values.size()) / hidden_;
      Tensor tensor = Tensor::empty(DType::kF32, {rows, hidden_});
      std::memcpy(tensor.raw(), sample.values.data(), tensor.nbytes());
      out.rows.emplace(key, tensor);
      out.routed.emplace(key, sample.seen);
    }
    samples_.clear();
  }

 private:
  struct Sample {
    std::vector<float> values;  // [rows, hidden]
    int64_t seen = 0;
  };
  int64_t max_rows_;
  int64_t hidden_ = 0;
  std::mt19937_64 random_{0x61777121};
  std::map<std::pair<int64_t, int64_t>, Sample> samples_;
};

}  // namespace

std::vector<std::vector<int32_t>> read_calibration_texts(const std::string& path, const std::string& model_dir) {
  DSINFER_CHECK(file_exists(path), "--calib ", path, ": no such file");
  std::string content;
  try {
    content = read_file(path);
  } catch (const Error& error) {
    throw Error(str_cat("--calib ", path, ": ", error.what()));
  }
  const tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(model_dir);
  std::optional<chat::ChatTemplate> chat_template;  // loaded for the first "messages" line
  std::vector<std::vector<int32_t>> texts;
  int64_t line_number = 0;
  for (const std::string& line : split(content, '\n')) {
    ++line_number;
    if (trim(line).empty()) continue;
    const std::string where = str_cat("--calib ", path, ":", line_number, ": ");
    Json row;
    try {
      row = Json::parse(line);
    } catch (const Error& error) {
      throw Error(where + error.what());
    }
    DSINFER_CHECK(row.is_object(), where, "expected a JSON object with \"text\", \"prompt\" or \"messages\"");
    std::string text;
    if (const Json* field = row.find("text"); field != nullptr && field->is_string()) {
      text = field->as_string();
    } else if (const Json* prompt = row.find("prompt"); prompt != nullptr && prompt->is_string()) {
      text = prompt->as_string();
    } else if (const Json* messages = row.find("messages"); messages != nullptr && messages->is_array()) {
      if (!chat_template) chat_template = load_chat_template(model_dir);
      try {
        text = chat_template->render(*messages, false);
      } catch (const Error& error) {
        throw Error(where + "its messages do not render with the chat template: " + error.what());
      }
    } else {
      throw Error(where + "expected a string \"text\" or \"prompt\", or an array \"messages\"");
    }
    std::vector<int32_t> tokens = tokenizer.encode(text, false);
    if (!tokens.empty()) texts.push_back(std::move(tokens));
  }
  DSINFER_CHECK(!texts.empty(), "--calib ", path, " holds no text to calibrate on (JSON lines with \"text\", "
                "\"prompt\" or \"messages\")");
  return texts;
}

const Tensor* CalibrationRows::find(int64_t layer, int64_t expert) const {
  auto it = rows.find({layer, expert});
  return it == rows.end() ? nullptr : &it->second;
}

CalibrationRows collect_calibration_rows(const std::string& model_dir,
                                         const std::vector<std::vector<int32_t>>& texts, int64_t max_rows) {
  DSINFER_CHECK(max_rows > 0, "--calib-rows must be positive, got ", max_rows);
  std::unique_ptr<backend::Backend> cpu = backend::make_backend("cpu");
  RowRecorder recorder(max_rows);
  model::ModelOptions options;
  options.expert_observer = &recorder;
  std::unique_ptr<model::DeepseekModel> model = model::DeepseekModel::load(model_dir, *cpu, options);
  CalibrationRows out;
  int64_t cut = 0;
  for (const std::vector<int32_t>& text : texts) {
    const auto n = std::min<int64_t>(static_cast<int64_t>(text.size()), model->max_positions());
    cut += n < static_cast<int64_t>(text.size());
    const std::span<const int32_t> tokens(text.data(), static_cast<size_t>(n));
    const int64_t pages = (n + model::kPageSize - 1) / model::kPageSize;
    std::vector<int32_t> page_ids(static_cast<size_t>(pages));
    std::iota(page_ids.begin(), page_ids.end(), 0);
    model::LatentCache cache = model->make_cache(pages);
    model::BatchBuilder batch;
    batch.add(tokens, 0, page_ids, model::LogitRows::kNone);
    Tensor previous = model->forward(batch.build(), cache).hidden;  // [n, hidden]
    out.tokens += n;
    // MTP module m: the previous stage's state at position i with token i + m + 1 (evaluate_mtp's
    // teacher forcing), so its experts see what drafting shows them.
    for (int m = 0; m < model->num_mtp_modules() && n - m - 1 > 0; ++m) {
      const int64_t rows = n - m - 1;
      model::BatchBuilder mtp_batch;
      mtp_batch.add(tokens.subspan(static_cast<size_t>(m + 1), static_cast<size_t>(rows)), 0, page_ids,
                    model::LogitRows::kNone);
      previous = model->forward_mtp(m, previous.slice(0, rows), mtp_batch.build(), cache).residual;
    }
  }
  if (cut > 0) log_info("AWQ calibration: ", cut, " texts cut to the model's ", model->max_positions(), " positions");
  recorder.move_into(out);
  return out;
}

}  // namespace dsinfer::cli
