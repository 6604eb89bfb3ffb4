#!/usr/bin/env python3
"""Rebuilds the README's performance table from the JSON files under bench/results/.

Every benchmark writes {"benchmark", "device", "commit", "date", "config", "figures", "anchor"};
each figure becomes a row, next to the anchor's figure of the same name when the anchor has one.
The table replaces what stands between <!-- results:begin --> and <!-- results:end --> in README.md.

Usage: python3 tools/results_table.py [--check]   (--check: exit 1 if the README is out of date)
"""

import argparse
import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
# The figures worth a row, for benchmarks that report many; the JSON files keep them all.
HEADLINES = {
    "model_step": ["decode_ms_b1", "decode_ms_b64", "decode_ms_b256", "decode_ms_b32", "ratio_b1", "ratio_b64",
                   "ratio_b256", "ratio_b32", "tokens_per_s_b1", "tokens_per_s_b32", "speedup_vs_hf_b1",
                   "speedup_vs_hf_b32", "tokens_per_s_overlapped_b1", "speedup_vs_hf_overlapped_b1",
                   "prefill_tokens_per_s"],
    "generate_gpu": ["prefill_tokens_per_s", "decode_tokens_per_s"],
    "serve": ["output_throughput", "output_throughput_per_gpu", "kv_cache_tokens", "qpm", "median_ttft_ms", "median_tpot_ms", "p90_tpot_ms", "max_qpm",
              "max_qpm_p90_tpot_ms"],
    "pd_serving": ["pd_output_throughput", "ifb_output_throughput", "pd_vs_ifb_output_throughput", "pd_goodput_qpm",
                   "ifb_goodput_qpm", "pd_vs_ifb_goodput_qpm", "pd_median_ttft_ms", "ifb_median_ttft_ms",
                   "pd_p99_ttft_ms", "ifb_p99_ttft_ms", "pd_median_tpot_ms", "ifb_median_tpot_ms", "pd_p99_tpot_ms",
                   "ifb_p99_tpot_ms"],
    "http_connections": ["concurrent_streams_held", "server_kib_per_stream"],
    "kernels_mla": ["mla_h128_q1_b128_c4096_fp8_gpu_us", "mla_h128_q1_b128_c4096_fp8_vs_bf16",
                    "mla_h128_q1_b64_c4096_fp8_vs_bf16", "mla_h128_q2_b128_c4096_fp8_vs_bf16",
                    "mla_h16_q1_b128_c4096_fp8_vs_bf16"],
    "kernels": ["timing_floor_us", "fp8_gemm_m64_n7168_k2048_kernel_gpu_us", "mla_h128_q1_b128_c4096_gpu_us",
                "mla_h128_q1_b128_c4096_tflops", "mla_h128_q1_b64_c4096_vs_flashmla", "mla_h128_q1_b128_c4096_vs_flashmla",
                "mla_h128_q1_b128_c8192_vs_flashmla", "mla_h128_q2_b128_c4096_vs_flashmla",
                "mla_h16_q1_b128_c8192_tb_s", "mla_h16_q1_b128_c4096_vs_flashmla", "mla_h16_q1_b128_c8192_vs_flashmla",
                "fp8_gemm_m64_n7168_k2048_vs_deepgemm", "fp8_gemm_m64_n4096_k7168_vs_deepgemm",
                "fp8_gemm_m64_n24576_k1536_vs_deepgemm", "fp8_gemm_m64_n2112_k7168_vs_deepgemm",
                "fp8_gemm_m4096_n7168_k2048_vs_deepgemm", "fp8_gemm_m4096_n4096_k7168_vs_deepgemm",
                "fp8_gemm_m4096_n24576_k1536_vs_deepgemm", "fp8_gemm_m4096_n2112_k7168_vs_deepgemm",
                "fp8_gemm_m8_n7168_k2048_us", "fp8_gemm_m8_n7168_k2048_cublaslt_us",
                "route_t256_us", "silu_mul_i2048_t16384_of_copy", "silu_mul_i2048_t16384_quant_of_copy",
                "add_rms_norm_t4096_of_copy", "add_rms_norm_t16384_of_copy", "add_rms_norm_t16384_quant_of_copy",
                "rope_q_t16384_of_copy", "write_latent_cache_t16384_of_copy", "moe_combine_t16384_of_copy",
                "grouped_masked_m20_n4096_k7168_weight_tb_s", "grouped_masked_m20_n4096_k7168_vs_deepgemm",
                "grouped_masked_m192_n4096_k7168_vs_deepgemm", "grouped_masked_m192_n7168_k2048_vs_deepgemm",
                "grouped_masked_m192_n4096_k7168_bm128_bn192_us", "grouped_masked_m192_n7168_k2048_bm128_bn192_us",
                "prefill_attention_8x2048_tflops", "prefill_attention_1x16384_tflops",
                "prefill_attention_4096_on_4096_prefix_tflops", "prefill_attention_8x2048_vs_flashinfer",
                "prefill_attention_1x16384_vs_flashinfer", "prefill_attention_4096_on_4096_prefix_vs_flashinfer",
                "fp8_gemm_m4096_n4096_k7168_kernel_us", "grouped_masked_m20_n7168_k2048_weight_tb_s",
                "mla_h16_q1_b128_c4096_tb_s", "grouped_contiguous_g4_n4096_k7168_tflops",
                "grouped_contiguous_g4_n4096_k7168_vs_deepgemm", "grouped_contiguous_g4_n7168_k2048_vs_deepgemm"],
    "dispatch": ["t128_uniform_dispatch_us", "t128_uniform_combine_us", "t4096_uniform_dispatch_gb_s",
                 "t4096_uniform_combine_gb_s", "peer_t128_uniform_dispatch_us", "peer_t128_uniform_combine_us",
                 "peer_t4096_uniform_dispatch_gb_s", "peer_t4096_uniform_combine_gb_s"],
    "soak": ["requests_done", "errors", "rss_start_mib", "rss_end_mib", "leaked_pages", "open_connections_end"],
    "eval_kv_cache": ["fp8_mean_kl", "fp8_max_kl", "fp8_top1_agreement", "fp8_ds_mla_mean_kl", "fp8_ds_mla_max_kl",
                      "fp8_ds_mla_top1_agreement", "sort_fp8_points_vs_f32", "sort_fp8_ds_mla_points_vs_f32",
                      "reverse_fp8_points_vs_f32", "reverse_fp8_ds_mla_points_vs_f32"],
    "eval_w4a8": ["w4a8_mean_kl", "w4a8_max_kl", "w4a8_fp8_kv_mean_kl", "w4a8_fp8_kv_max_kl",
                  "copy_w4a8_points_vs_bf16", "copy_w4a8_fp8_kv_points_vs_bf16", "reverse_w4a8_points_vs_bf16",
                  "reverse_w4a8_fp8_kv_points_vs_bf16",
                  "w4a8_awq_mean_kl", "w4a8_awq_max_kl", "w4a8_awq_fp8_kv_mean_kl", "w4a8_awq_fp8_kv_max_kl",
                  "w4a8_worst_points_vs_bf16", "w4a8_fp8_kv_worst_points_vs_bf16", "w4a8_awq_worst_points_vs_bf16",
                  "w4a8_awq_fp8_kv_worst_points_vs_bf16"],
}
CONFIG_KEYS = {
    "model_step": ["config", "num_layers", "weights", "routed_experts", "cache_dtype", "context", "prefill"],
    "serve": ["model", "parallel", "input_len", "output_len", "num_prompts", "max_concurrency", "request_rate",
              "slo_tpot_ms", "overlap_schedule"],
}


def number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


def rows_of(path):
    with open(path) as f:
        result = json.load(f)
    anchor = result.get("anchor") or {}
    anchor_name = anchor.get("name", "")
    benchmark = result.get("benchmark", os.path.basename(path))
    config = result.get("config", {})
    keys = CONFIG_KEYS.get(benchmark, list(config))
    summary = ", ".join(f"{k} {config[k]}" for k in keys
                        if k in config and isinstance(config[k], (int, float, str)) and len(str(config[k])) < 60)
    headline = HEADLINES.get(benchmark)
    for name, value in result.get("figures", {}).items():
        if isinstance(value, (dict, list)) or value is None or (headline and name not in headline):
            continue
        compared = anchor.get(name)
        yield [benchmark, name.replace("_", " "), number(value),
               f"{number(compared)} ({anchor_name})" if compared is not None else "",
               summary, result.get("device", ""), str(result.get("commit", ""))]


def table():
    lines = ["| benchmark | figure | value | anchor | config | device | commit |",
             "|---|---|---|---|---|---|---|"]
    for path in sorted(glob.glob(os.path.join(ROOT, "bench", "results", "*.json"))):
        with open(path) as f:
            if "figures" not in json.load(f):
                continue  # an anchor's own file
        for row in rows_of(path):
            lines.append("| " + " | ".join(cell.replace("|", "/") for cell in row) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    readme_path = os.path.join(ROOT, "README.md")
    with open(readme_path) as f:
        readme = f.read()
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    updated = readme[:start] + "\n" + table() + "\n" + readme[end:]
    if args.check:
        if updated != readme:
            print("README.md's performance table is out of date: run python3 tools/results_table.py")
            return 1
        return 0
    with open(readme_path, "w") as f:
        f.write(updated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
