#!/usr/bin/env python3
"""Writes the Hugging Face reference fixtures for dsinfer's whole-model tests.

Runs where PyTorch and transformers are installed (the device machine: torch 2.11, transformers
5.17, tokenizers 0.23.2); no GPU is needed, the models are tiny and run in float32 on the CPU.

For each fixture model it writes, under tests/fixtures/models/NAME/:
  config.json             in the published DeepSeek layout (rope_theta + rope_scaling, scoring_func...)
  model.safetensors       original checkpoint names: one tensor per expert, the MTP module at layer
                          index num_hidden_layers, BF16 weights (the FP8 twin: F8_E4M3 + 128x128
                          weight_scale_inv blocks)
  tokenizer.json, tokenizer_config.json
                          a small byte-level BPE with the DeepSeek-V3 pre-tokenizer, special tokens
                          and chat template, trained here so `dsinfer generate --prompt` works
  reference.json          prompts (token ids), HF's greedy continuation with each step's top-1/top-2
                          margin, and the names of the logits files
  logits_K.npy            float32 [prompt_len, vocab]: HF logits at every position of prompt K
  mtp_logits_K.npy        float32 [prompt_len - 1, vocab]: HF's MTP module at positions 0..len-2
                          (main hidden state at i, token i + 1), predicting token i + 2

The models:
  v3-tiny      DeepSeek-V3 at the real MLA widths (kv_lora 512, rope 64, nope 128, v 128), YaRN
               with attention factor != 1, sigmoid noaux_tc routing in groups, shared expert, MTP.
  v3-tiny-fp8  the same weights in the published FP8 block format; its reference is HF run on the
               dequantized weights.
  v2-lite-tiny DeepSeek-V2-Lite-like: no q_lora (q_proj), softmax greedy routing, 2 shared
               experts, default RoPE, other widths.

Weights are well conditioned (std 1/sqrt(fan_in), unit-scale embeddings, a lm_head that spreads
the logits) so that greedy steps have clear margins.

Usage: python3 tools/make_model_fixtures.py [--out tests/fixtures/models]
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch
from safetensors.torch import save_file

from dsv3_checkpoint import (FP8_QUANTIZATION_CONFIG, ROOT, build_hf_model, build_hf_mtp, checkpoint_layout,
                             hf_mtp_logits, quantize_fp8_blocks, tokenizer_config, train_bpe_tokenizer)

V3_CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "vocab_size": 1024,
    "hidden_size": 128,
    "intermediate_size": 256,
    "moe_intermediate_size": 64,
    "num_hidden_layers": 3,
    "num_nextn_predict_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "n_shared_experts": 1,
    "n_routed_experts": 8,
    "routed_scaling_factor": 2.5,
    "kv_lora_rank": 512,
    "q_lora_rank": 96,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "qk_nope_head_dim": 128,
    "topk_method": "noaux_tc",
    "n_group": 4,
    "topk_group": 2,
    "num_experts_per_tok": 3,
    "moe_layer_freq": 1,
    "first_k_dense_replace": 1,
    "norm_topk_prob": True,
    "scoring_func": "sigmoid",
    "hidden_act": "silu",
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "rope_scaling": {
        "type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
        "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0.8,
    },
    "tie_word_embeddings": False,
    "attention_bias": False,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "torch_dtype": "bfloat16",
}

V2_CONFIG = {
    "architectures": ["DeepseekV2ForCausalLM"],
    "model_type": "deepseek_v2",
    "vocab_size": 1024,
    "hidden_size": 96,
    "intermediate_size": 192,
    "moe_intermediate_size": 48,
    "num_hidden_layers": 3,
    "num_attention_heads": 3,
    "num_key_value_heads": 3,
    "n_shared_experts": 2,
    "n_routed_experts": 6,
    "routed_scaling_factor": 1.0,
    "kv_lora_rank": 160,
    "q_lora_rank": None,
    "qk_rope_head_dim": 32,
    "v_head_dim": 48,
    "qk_nope_head_dim": 64,
    "topk_method": "greedy",
    "n_group": 1,
    "topk_group": 1,
    "num_experts_per_tok": 2,
    "moe_layer_freq": 1,
    "first_k_dense_replace": 1,
    "norm_topk_prob": False,
    "scoring_func": "softmax",
    "hidden_act": "silu",
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "rope_scaling": None,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "torch_dtype": "bfloat16",
}

GENERATE_STEPS = 24


def training_text():
    """Deterministic English prose and code from the Python standard library's docstrings."""
    import inspect
    import collections, functools, itertools, json as json_module, os as os_module, re, string, textwrap
    parts = []
    for module in [collections, functools, itertools, json_module, os_module, re, string, textwrap]:
        parts.append(inspect.getdoc(module) or "")
        for _, member in sorted(inspect.getmembers(module)):
            doc = inspect.getdoc(member)
            if doc:
                parts.append(doc)
    parts.append("123+456=579 98*7=686 1000-1=999 数学 计算 加法 こんにちは 世界 ")
    return parts


def train_tokenizer(vocab_size):
    """A byte-level BPE with the DeepSeek-V3 pre-tokenizer and special tokens."""
    return train_bpe_tokenizer(training_text(), vocab_size)


class WeightMaker:
    """Seeded, well-conditioned random weights, rounded to bfloat16 (the stored precision)."""

    def __init__(self, seed):
        self.generator = torch.Generator().manual_seed(seed)

    def normal(self, shape, std):
        values = torch.randn(shape, generator=self.generator, dtype=torch.float32) * std
        return values.to(torch.bfloat16)

    def linear(self, out_features, in_features, gain=1.0):
        return self.normal((out_features, in_features), gain / math.sqrt(in_features))

    def norm(self, size):
        return (1.0 + 0.1 * torch.randn(size, generator=self.generator)).to(torch.bfloat16)


def make_checkpoint(config, seed):
    """The whole model in the published layout, MTP module(s) at layer num_hidden_layers + k."""
    make = WeightMaker(seed)
    w = {}
    for name, shape, role in checkpoint_layout(config):
        if role == "embedding":
            w[name] = make.normal(shape, 1.0)
        elif role == "norm":
            w[name] = make.norm(shape[0])
        elif role in ("linear", "mtp_linear", "router", "head"):
            gain = {"router": 2.0, "head": 3.0}.get(role, 1.0)
            w[name] = make.linear(*shape, gain=gain)
        elif role == "router_bias":
            w[name] = (0.1 * torch.randn(shape, generator=make.generator)).float()
        else:
            # As published: the MTP module carries its own copies of the embedding and the head.
            w[name] = w[role.removeprefix("copy:")].clone()
    return w


@torch.no_grad()
def hf_logits(model, ids):
    out = model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    return out.logits[0], out.hidden_states[-1][0]


@torch.no_grad()
def hf_greedy(model, ids, steps):
    """Greedy continuation by full recomputation; each step's chosen token and top-1/top-2 margin."""
    ids = list(ids)
    tokens, margins = [], []
    for _ in range(steps):
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
        top = torch.topk(logits, 2)
        tokens.append(int(top.indices[0]))
        margins.append(float(top.values[0] - top.values[1]))
        ids.append(tokens[-1])
    return tokens, margins


def save_npy(path, tensor):
    np.save(path, tensor.float().numpy().astype(np.float32))


def write_fixture(out_dir, name, config, stored, reference_weights, tokenizer, prompts, description):
    directory = os.path.join(out_dir, name)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    save_file({k: v.contiguous() for k, v in sorted(stored.items())}, os.path.join(directory, "model.safetensors"),
              metadata={"format": "pt"})
    tokenizer.save(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(model_max_length=256), f, ensure_ascii=False, indent=2)

    model = build_hf_model(config, reference_weights)
    mtp = build_hf_mtp(model, config, reference_weights) if config.get("num_nextn_predict_layers") else None
    cases = []
    for index, ids in enumerate(prompts):
        logits, hidden = hf_logits(model, ids)
        save_npy(os.path.join(directory, f"logits_{index}.npy"), logits)
        case = {"prompt_ids": ids, "logits": f"logits_{index}.npy"}
        if mtp is not None and len(ids) > 1:
            save_npy(os.path.join(directory, f"mtp_logits_{index}.npy"), hf_mtp_logits(model, mtp, ids, hidden))
            case["mtp_logits"] = f"mtp_logits_{index}.npy"
        case["greedy_ids"], case["greedy_margins"] = hf_greedy(model, ids, GENERATE_STEPS)
        cases.append(case)
        print(f"  {name} prompt {index}: {len(ids)} tokens, |logits| max {logits.abs().max():.2f}, "
              f"smallest greedy margin {min(case['greedy_margins']):.4f}")
    import transformers
    reference = {
        "description": description,
        "made_by": "tools/make_model_fixtures.py",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "dtype": "float32 on the CPU, eager attention",
        "cases": cases,
    }
    with open(os.path.join(directory, "reference.json"), "w") as f:
        json.dump(reference, f, indent=1)
    if "quantization_config" not in config:
        check_hf_loads_checkpoint(directory, cases[-1])


@torch.no_grad()
def check_hf_loads_checkpoint(directory, case):
    """transformers must read the checkpoint as written (its own loader and name conversions) and
    give the logits of the in-memory model: proof that the layout is the published one."""
    import transformers
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32,
                                                              attn_implementation="eager")
    logits = model(input_ids=torch.tensor([case["prompt_ids"]])).logits[0].numpy()
    expected = np.load(os.path.join(directory, case["logits"]))
    assert np.array_equal(logits, expected), np.abs(logits - expected).max()


def prompts_for(tokenizer, vocab, seed):
    """A one-token prompt, a short text, a text longer than a 64-token page, random ids."""
    rng = np.random.default_rng(seed)
    text = ("The quick brown fox jumps over the lazy dog while the model counts: "
            "one, two, three, 123+456=579. 数学很有趣。 Then it writes code: def f(x): return x * 2\n") * 2
    encoded = tokenizer.encode(text).ids
    return [[0], [0] + tokenizer.encode("Hello world").ids, [0] + encoded[:69],
            [int(v) for v in rng.integers(3, vocab, size=23)]]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "tests/fixtures/models"))
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(min(8, os.cpu_count() or 1))

    tokenizer = train_tokenizer(V3_CONFIG["vocab_size"])

    v3 = make_checkpoint(V3_CONFIG, seed=3)
    prompts = prompts_for(tokenizer, V3_CONFIG["vocab_size"], seed=3)
    write_fixture(args.out, "v3-tiny", V3_CONFIG, v3, v3, tokenizer, prompts,
                  "DeepSeek-V3 architecture at the real MLA widths, BF16, YaRN, MTP")
    stored, dequantized = quantize_fp8_blocks(v3)
    fp8_config = dict(V3_CONFIG, quantization_config=FP8_QUANTIZATION_CONFIG)
    write_fixture(args.out, "v3-tiny-fp8", fp8_config, stored, dequantized, tokenizer, prompts,
                  "v3-tiny in the published FP8 block format; reference run on the dequantized weights")
    v2 = make_checkpoint(V2_CONFIG, seed=2)
    write_fixture(args.out, "v2-lite-tiny", V2_CONFIG, v2, v2, tokenizer,
                  prompts_for(tokenizer, V2_CONFIG["vocab_size"], seed=2),
                  "DeepSeek-V2-Lite-like: q_proj, softmax greedy routing, default RoPE")
    return 0


if __name__ == "__main__":
    sys.exit(main())
