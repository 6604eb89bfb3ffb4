#include "loadgen/spec_decode_stats.h"

#include <cmath>
#include <string>

#include "core/strings.h"

namespace dsinfer::loadgen {
namespace {

// One sample line of Prometheus' text format: name{labels} value [timestamp].
struct Sample {
  std::string_view name;
  std::string_view labels;  // between the braces, quotes and escapes as written
  double value = 0;
};

std::optional<Sample> parse_sample(std::string_view line) {
  line = trim(line);
  if (line.empty() || line.front() == '#') return std::nullopt;
  Sample sample;
  const size_t name_end = line.find_first_of("{ \t");
  if (name_end == std::string_view::npos) return std::nullopt;
  sample.name = line.substr(0, name_end);
  size_t rest = name_end;
  if (line[rest] == '{') {
    bool quoted = false;
    size_t close = rest + 1;
    for (; close < line.size(); ++close) {
      const char c = line[close];
      if (quoted && c == '\\') ++close;  // an escaped character inside a label value
      else if (c == '"') quoted = !quoted;
      else if (!quoted && c == '}') break;
    }
    if (close >= line.size()) return std::nullopt;
    sample.labels = line.substr(rest + 1, close - rest - 1);
    rest = close + 1;
  }
  std::string_view value = trim(line.substr(rest));
  value = value.substr(0, value.find_first_of(" \t"));  // a timestamp may follow
  if (!parse_double(value, &sample.value) || !std::isfinite(sample.value)) return std::nullopt;
  return sample;
}

// The value of label `name` (label values here are plain digits: no escapes to undo).
std::optional<std::string_view> label(std::string_view labels, std::string_view name) {
  const std::string key = std::string(name) + "=\"";
  for (size_t at = labels.find(key); at != std::string_view::npos; at = labels.find(key, at + 1)) {
    if (at > 0 && labels[at - 1] != ',' && labels[at - 1] != ' ') continue;  // a longer name ending in `name`
    const size_t start = at + key.size();
    const size_t end = labels.find('"', start);
    if (end == std::string_view::npos) return std::nullopt;
    return labels.substr(start, end - start);
  }
  return std::nullopt;
}

// `name` as prometheus_client writes a counter (with _total), or as other exporters do (without).
bool is_counter(std::string_view sample, std::string_view name) {
  return sample == name || (sample.size() == name.size() + 6 && sample.starts_with(name) && sample.ends_with("_total"));
}

}  // namespace

std::optional<SpecDecodeCounters> parse_spec_decode_counters(std::string_view prometheus_text) {
  SpecDecodeCounters counters;
  bool found = false;
  for (const std::string& line : split(prometheus_text, '\n')) {
    const std::optional<Sample> sample = parse_sample(line);
    if (!sample) continue;
    if (is_counter(sample->name, "vllm:spec_decode_num_drafts")) {
      counters.drafts += sample->value;
      found = true;
    } else if (is_counter(sample->name, "vllm:spec_decode_num_draft_tokens")) {
      counters.draft_tokens += sample->value;
    } else if (is_counter(sample->name, "vllm:spec_decode_num_accepted_tokens")) {
      counters.accepted_tokens += sample->value;
    } else if (is_counter(sample->name, "vllm:spec_decode_num_accepted_tokens_per_pos")) {
      const std::optional<std::string_view> position = label(sample->labels, "position");
      int64_t index = 0;
      if (!position || !parse_int64(*position, &index) || index < 0 || index >= 64) continue;
      if (counters.accepted_per_position.size() <= static_cast<size_t>(index))
        counters.accepted_per_position.resize(static_cast<size_t>(index) + 1, 0.0);
      counters.accepted_per_position[static_cast<size_t>(index)] += sample->value;
    }
  }
  if (!found) return std::nullopt;
  return counters;
}

std::optional<SpecDecodeStats> spec_decode_stats(const std::optional<SpecDecodeCounters>& before,
                                                 const std::optional<SpecDecodeCounters>& after) {
  if (!before || !after) return std::nullopt;
  const double drafts = after->drafts - before->drafts;
  const double draft_tokens = after->draft_tokens - before->draft_tokens;
  const double accepted = after->accepted_tokens - before->accepted_tokens;
  if (drafts <= 0 || draft_tokens <= 0) return std::nullopt;
  SpecDecodeStats stats;
  stats.drafts = std::llround(drafts);
  stats.draft_tokens = std::llround(draft_tokens);
  stats.accepted_tokens = std::llround(accepted);
  stats.mean_acceptance_length = 1.0 + accepted / drafts;
  stats.acceptance_rate = accepted / draft_tokens;
  for (size_t p = 0; p < after->accepted_per_position.size(); ++p) {
    const double earlier = p < before->accepted_per_position.size() ? before->accepted_per_position[p] : 0.0;
    stats.acceptance_rate_per_position.push_back((after->accepted_per_position[p] - earlier) / drafts);
  }
  return stats;
}

}  // namespace dsinfer::loadgen
