// Calibration for `dsinfer quantize --awq`: the model runs (CPU backend, float32) over a file of
// texts, and for every routed expert of every MoE layer (the MTP modules' included) a sample of the
// input rows the router sent it is kept, which AWQ's search (awq_search.h) then measures on.
//
// The file (--calib): JSON lines, one text each, as an object with one of
//   "text":     a rendered conversation, tokenized as it is (special tokens as the vocabulary spells
//               them, BOS included): the whole of it, prompt and answer, is what the experts see
//               when serving;
//   "prompt":   the same, for rows of an eval set ({"prompt", "answer"}; the prompt alone);
//   "messages": a conversation, rendered with the model's chat template (tokenizer_config.json).
// bench/data/awq_calib_dsv3-tiny.jsonl is such a file for the bundled model, drawn from its training
// tasks (tools/make_training_data.py --calib), none of them in its eval sets.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace dsinfer::cli {

// The calibration texts as token ids. Throws dsinfer::Error naming the file (and line) when it cannot
// be read, a line is not such an object, or it holds no text.
std::vector<std::vector<int32_t>> read_calibration_texts(const std::string& path, const std::string& model_dir);

struct CalibrationRows {
  // (checkpoint layer, expert) -> up to max_rows of its input rows [n, hidden] f32, a uniform sample
  // (reservoir sampling, a fixed seed) of every row it was routed; experts never routed are absent.
  std::map<std::pair<int64_t, int64_t>, Tensor> rows;
  std::map<std::pair<int64_t, int64_t>, int64_t> routed;  // rows each expert was routed, all of them
  int64_t tokens = 0;                                     // through the main model
  const Tensor* find(int64_t layer, int64_t expert) const;
};

// Runs the checkpoint in model_dir over the texts (each cut to the model's context) and its MTP modules
// teacher-forced after it, as dsinfer eval's MTP task does, collecting the rows.
CalibrationRows collect_calibration_rows(const std::string& model_dir,
                                         const std::vector<std::vector<int32_t>>& texts, int64_t max_rows);

}  // namespace dsinfer::cli
