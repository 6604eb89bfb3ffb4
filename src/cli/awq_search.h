// AWQ (Lin et al., "AWQ: Activation-aware Weight Quantization", 2024) for the routed experts of a
// W4A8 checkpoint (docs/w4a8.md): per input channel k a factor s_k > 0 scales the weight's column k
// up before int4 rounding and the input's channel k down by as much, so that the channels that carry
// large activations lose less to rounding. In the checkpoint the input side is p = 1 / s, the
// P.pre_quant_scale the runtime multiplies the input by (ModelOpt's name and meaning):
//
//   y = x . W^T = (x * p) . (W / p)^T           W / p: column k divided by p_k, then int4 (RTN)
//
// The search (llm-awq's auto_scale): s = mean|x|^alpha per channel over the calibration rows,
// normalised to s / sqrt(max(s) min(s)), p = 1 / s; alpha on a grid of grid + 1 points in [0, 1]; the
// alpha whose product, computed as the runtime computes it (Backend::linear on the int4 weight with
// p: the e4m3 activations included), leaves the expert's output closest to the unquantized one on
// those rows. alpha = 0 is p = 1, plain round to nearest, and the first point tried.
//
// An expert's two sets (expert: y = down(silu(gate x) * up x)), searched in order:
//   gate_up: p_in [H] on x, shared by gate and up (one input, quantized once), the error measured on
//     y with down unquantized (llm-awq measures a block's output alike); stored as
//     gate_proj.pre_quant_scale and up_proj.pre_quant_scale.
//   down: p_down [I] on h = silu(g) * u as the chosen int4 gate_up gives it (its input at run time),
//     the error measured on y; folded into up's rows (up_i * p_i gives h_i * p_i exactly, silu(g)
//     being untouched), so it costs nothing at run time and is not stored.
// Then the whole expert with both choices against both products at p = 1: an expert where AWQ would
// do worse on its calibration rows keeps round to nearest, so it never does.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace dsinfer::cli {

struct AwqOptions {
  int64_t group_size = 128;  // the checkpoint's int4 group (columns per scale)
  int grid = 20;             // alpha = 0, 1 / grid, ..., 1
};

// One product's search: the factors it chose and how far each end of the comparison is from the
// unquantized product, as relative squared errors sum (y_q - y)^2 / sum y^2 over the rows.
struct AwqChoice {
  Tensor factors;  // [K] f32, p: positive and finite
  double alpha = 0;
  double error = 0;      // with the chosen p
  double rtn_error = 0;  // with p = 1 (alpha = 0): round to nearest; error <= rtn_error
};

struct ExpertAwq {
  AwqChoice gate_up;  // p_in [H]
  AwqChoice down;     // p_down [I]
  // The expert's output y = down(silu(gate x) * up x) with both products in int4, as relative squared
  // errors: round to nearest (p = 1 for both) and the choice; error <= rtn_error.
  double rtn_error = 0, error = 0;
};

// An expert's f32 weights: gate and up [I, H], down [H, I].
struct ExpertWeights {
  Tensor gate, up, down;
};

// weight [N, K] f32 with its input multiplied by factors (p [K] f32; undefined: none) as the runtime
// takes it: W / p rounded to int4 in groups of group_size (io/int4_pack.h, BF16 scales), p as its
// pre_scale. On the host (CPU tensors).
backend::LinearWeight w4a8_weight(const Tensor& weight, const Tensor& factors, int64_t group_size);

// Searches both sets of an expert on x [R, H] f32, rows it was routed (R >= 1). `cpu` computes the
// products (the CPU backend: the W4A8 reference).
ExpertAwq search_expert(backend::Backend& cpu, const ExpertWeights& expert, const Tensor& x, const AwqOptions& options);

// weight [N, K] f32 with row n multiplied by row_factors[n] and column k divided by
// column_factors[k] (undefined: no change on that side): a new tensor.
Tensor scale_weight(const Tensor& weight, const Tensor& row_factors, const Tensor& column_factors);

// The weights as the checkpoint stores them before int4 rounding: gate / p_in, (up * p_down) / p_in
// (rows times p_down, columns divided by p_in), down / p_down. Exact up to float32 rounding:
// down'(silu(gate'(x p_in)) * up'(x p_in)) = down(silu(gate x) * up x).
ExpertWeights fold_factors(const ExpertWeights& expert, const Tensor& p_in, const Tensor& p_down);

}  // namespace dsinfer::cli
