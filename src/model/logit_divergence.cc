#include "model/logit_divergence.h"

#include <algorithm>
#include <cmath>

namespace dsinfer::model {

double kl_divergence(const float* p_logits, const float* q_logits, int64_t vocab) {
  auto log_normalizer = [vocab](const float* x) {
    const double top = *std::max_element(x, x + vocab);
    double total = 0;
    for (int64_t i = 0; i < vocab; ++i) total += std::exp(x[i] - top);
    return top + std::log(total);
  };
  const double p_norm = log_normalizer(p_logits), q_norm = log_normalizer(q_logits);
  double kl = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    const double log_p = p_logits[i] - p_norm;
    kl += std::exp(log_p) * (log_p - (q_logits[i] - q_norm));
  }
  return std::max(kl, 0.0);  // rounding can leave a hair below zero for equal rows
}

}  // namespace dsinfer::model
