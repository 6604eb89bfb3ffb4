#!/usr/bin/env python3
"""Writes the Hugging Face reference fixtures for dsinfer's whole-model tests.

Runs where PyTorch and transformers are installed (the device machine: torch 2.11, transformers
5.17, tokenizers 0.23.2); no GPU and no network are needed, the models are tiny and run in float32
on the CPU. Nothing is read from outside the repository.

For each fixture model it writes, under tests/fixtures/models/NAME/:
  config.json             in the published DeepSeek layout (rope_theta + rope_scaling, scoring_func...)
  model.safetensors       original checkpoint names: one tensor per expert, the MTP module at layer
                          index num_hidden_layers, BF16 weights (the FP8 twin: the published FP8
                          layout, F8_E4M3 + 128x128 weight_scale_inv blocks, see src/io/tensor_specs.h)
  tokenizer.json, tokenizer_config.json
                          a small byte-level BPE with the DeepSeek-V3 pre-tokenizer, special tokens
                          and chat template, trained here on TRAINING_TEXT (fixed, in this file) so
                          `dsinfer generate --prompt` works
  reference.json          prompts (token ids), HF's greedy continuation with each step's top-1/top-2
                          margin, the routing margins, and the names of the logits files
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

Routing has clear margins by construction. With random routers, some token of the ~200 a fixture
runs always has two experts (or groups) within ~1e-3 of each other, and bf16 activations then pick
another expert and move the logits by several units. So the routers read only a routing code:
ROUTING_CODE_DIMS hidden dimensions that no layer writes (their rows of every o_proj and down_proj
are zero, and the MTP eh_proj copies them from the normalized embedding), so at every MoE gate they
hold the token's embedding code, scaled by norm weights and divided by the residual stream's rms.
Each token's code is drawn until its routing in every MoE layer (MTP included) keeps a margin of
ROUTING_CODE_MARGIN for any residual rms in RESIDUAL_RMS_RANGE; routing thus depends on the token
(main layers: the current one, the MTP layer: the next one), and is clear in any context. Then HF's
own routing is measured with hooks on every MoE layer over every prompt with its greedy continuation
(and the MTP module over the same tokens), and must keep MIN_ROUTING_MARGIN (see routing_margins);
if not, the weights are redrawn.

Usage: python3 tools/make_model_fixtures.py [--out tests/fixtures/models]
       python3 tools/make_model_fixtures.py --check-only   # the fixtures on disk: HF logits, margins
"""

import argparse
import hashlib
import json
import math
import os
import sys

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from dsv3_checkpoint import (FP8_QUANTIZATION_CONFIG, ROOT, build_hf_model, build_hf_mtp, checkpoint_layout,
                             dequantize_fp8_blocks, hf_mtp_logits, quantize_fp8_blocks, tokenizer_config,
                             train_bpe_tokenizer)

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
FIXTURES = ("v3-tiny", "v3-tiny-fp8", "v2-lite-tiny")

# Routing (see the docstring). Scores are in score units: sigmoid scores plus the noaux_tc bias, or
# softmax probabilities; both lie in [0, 1], so an absolute margin is also relative to their scale.
ROUTING_CODE_DIMS = 8                # hidden dimensions carrying the routing code
ROUTING_CODE_STD = 2.0               # of the code values drawn into the embedding
ROUTER_GAIN = 2.0                    # router logits ~ gain * code / residual rms
RESIDUAL_RMS_RANGE = (0.6, 5.0)      # residual rms at any MoE gate, assumed (a numpy emulation: 0.9-2.4)
ROUTING_CODE_MARGIN = 2e-2           # what the code search asks for, on a grid over that range
MIN_ROUTING_MARGIN = 1e-2            # what HF's routing must keep on every token of every fixture
ROUTING_ATTEMPTS = 4                 # weight seeds tried before giving up

# The tokenizer's training text: fixed here (not taken from the Python installation), so the tokenizer,
# and with it the prompts, depend only on the tokenizers version.
TRAINING_TEXT = """\
A small language model reads text one token at a time. Each token is a piece of a word, a whole word,
a number or a mark of punctuation, and the model turns every token into a vector of numbers before it
does anything else. Those vectors pass through a stack of layers. In every layer, attention lets a
token look back at the tokens before it and gather what it needs, and a feed-forward network then
changes the result, one token at a time. At the end, the last vector is compared with every entry of
the vocabulary, and the scores say which token is likely to come next.

A mixture of experts replaces the single feed-forward network of a layer with many smaller ones. A
router gives each token a score for every expert, keeps the best few, and adds up their outputs,
weighted by the scores. Most experts stay idle for most tokens, so the model can hold far more
parameters than it uses for any single step. DeepSeek's models also share one expert between all
tokens, and they group the experts so that a token only ever visits a few groups.

Latent attention stores a compressed summary of each token instead of its full keys and values. The
cache is much smaller, which matters when a server keeps thousands of requests in memory at once.
Rotary position embeddings turn each pair of numbers in a query or a key by an angle that grows with
the position, so the score of two tokens depends on how far apart they are, not on where they sit.

The weather was cold and bright that morning. We walked along the river to the old bridge, where the
water was high and fast after a week of rain. A heron stood on a stone near the far bank, perfectly
still, and a dog ran past us chasing a ball that its owner had thrown much too far. By noon the
clouds had come back, and we sat in a small cafe near the market, drinking tea and reading the paper.
My sister ordered soup and fresh bread; I had an apple pie with cream. Later we bought vegetables,
cheese, eggs, rice, flour, sugar and a bunch of yellow flowers for the kitchen table.

Good software is tested often and changed in small steps. Write the test first, run it, and watch it
fail for the right reason. Then write the simplest code that makes it pass, and clean up what you
wrote while the test still passes. When a bug appears, find the smallest input that shows it, turn
that input into a new test, and keep it forever. Measure before you optimise: the slow part of a
program is rarely where you expect it to be.

Questions and answers. What is the capital of France? Paris. How many days are in a week? Seven.
Which planet is closest to the sun? Mercury. Why is the sky blue? Sunlight scatters off the air, and
blue light scatters more than red light. Can you count to five? One, two, three, four, five. What
comes after Monday? Tuesday, then Wednesday, Thursday, Friday, Saturday and Sunday. In which month
does spring begin? In March, in the north; in September, in the south. Who wrote this? A person who
needed some text that would never change.

def fibonacci(n):
    \"\"\"Returns the first n Fibonacci numbers.\"\"\"
    values = [0, 1]
    while len(values) < n:
        values.append(values[-1] + values[-2])
    return values[:n]


class Counter:
    def __init__(self):
        self.counts = {}

    def add(self, key, amount=1):
        self.counts[key] = self.counts.get(key, 0) + amount
        return self.counts[key]


for index, value in enumerate(fibonacci(10)):
    print(f"{index}: {value}")

int main(int argc, char** argv) {
  std::vector<float> scores(argc, 0.0f);
  for (int i = 0; i < argc; ++i) scores[i] = static_cast<float>(i) * 0.5f;
  return scores.empty() ? 1 : 0;
}

{"model": "tiny", "messages": [{"role": "user", "content": "Hello world"}], "max_tokens": 16}

数学很有趣。 我们今天学习加法和减法。 计算 一 加 二 等于 三。 世界 你好。 こんにちは、世界。 ありがとう。
"""


def training_text():
    """TRAINING_TEXT in paragraphs, and some arithmetic (digit groups for the BPE to merge)."""
    arithmetic = [f"{a}+{b}={a + b} {a}*{b}={a * b} {a}-{b}={a - b}"
                  for a in range(3, 1000, 37) for b in (7, 48, 215, 906)]
    return TRAINING_TEXT.split("\n\n") + ["\n".join(arithmetic)]


def train_tokenizer(vocab_size):
    """A byte-level BPE with the DeepSeek-V3 pre-tokenizer and special tokens."""
    tokenizer = train_bpe_tokenizer(training_text(), vocab_size)
    assert tokenizer.get_vocab_size() == vocab_size, tokenizer.get_vocab_size()
    return tokenizer


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
    layout = checkpoint_layout(config)
    for name, shape, role in layout:
        if role == "embedding":
            w[name] = make.normal(shape, 1.0)
        elif role == "norm":
            w[name] = make.norm(shape[0])
        elif role in ("linear", "mtp_linear", "router", "head"):
            gain = {"router": 2.0, "head": 3.0}.get(role, 1.0)
            w[name] = make.linear(*shape, gain=gain)
        elif role == "router_bias":
            w[name] = (0.1 * torch.randn(shape, generator=make.generator)).float()
    add_routing_code(config, w, make)
    for name, shape, role in layout:
        if role.startswith("copy:"):
            # As published: the MTP module carries its own copies of the embedding and the head.
            w[name] = w[role.removeprefix("copy:")].clone()
    return w


# ---------------------------------------------------------------------------------------------------
# Routing

def routing_code_dims(config):
    """The hidden dimensions that carry the routing code, spread over the vector (3, 19, ... at 128)."""
    hidden = config["hidden_size"]
    return list(range(3, hidden, hidden // ROUTING_CODE_DIMS))[:ROUTING_CODE_DIMS]


def moe_layer_indices(config):
    """The layer indices whose MLP is routed, in checkpoint_layout's terms: main layers, MTP layers."""
    layers = config["num_hidden_layers"]
    main = [i for i in range(layers) if i >= config["first_k_dense_replace"]]
    return main, [layers + k for k in range(config.get("num_nextn_predict_layers", 0))]


def routing_margins(logits, config, bias=None):
    """Per token [T]: how far the routing of router logits [T, E] is from changing, in score units.

    As HF routes (and DeepSeek): sigmoid noaux_tc ranks the biased scores (sigmoid + bias); groups by
    the sum of their two best, keeping topk_group: the gap between the last kept and the best dropped
    group; within the kept groups, the gap between the top_k-th expert and the next. HF fills the
    dropped groups' experts with 0 where DeepSeek uses -inf, so that next one is at least 0: the
    chosen experts must also clear 0 for both to choose alike. Softmax greedy: the gap between the
    top_k-th and the next probability. The smaller gap counts."""
    logits = np.asarray(logits, dtype=np.float64)
    tokens, experts = logits.shape
    top_k = config["num_experts_per_tok"]
    if config["scoring_func"] == "softmax":
        scores = np.exp(logits - logits.max(axis=1, keepdims=True))
        scores /= scores.sum(axis=1, keepdims=True)
    else:
        scores = 1.0 / (1.0 + np.exp(-logits))
    if bias is not None:
        scores = scores + np.asarray(bias, dtype=np.float64)
    if config["topk_method"] == "greedy":
        ranked = -np.sort(-scores, axis=1)
        return ranked[:, top_k - 1] - ranked[:, top_k]
    assert config["topk_method"] == "noaux_tc", config["topk_method"]
    n_group, topk_group = config["n_group"], config["topk_group"]
    grouped = scores.reshape(tokens, n_group, experts // n_group)
    group_scores = np.sort(grouped, axis=2)[:, :, -2:].sum(axis=2)
    group_order = np.argsort(-group_scores, axis=1, kind="stable")
    kept = np.zeros((tokens, n_group), dtype=bool)
    np.put_along_axis(kept, group_order[:, :topk_group], True, axis=1)
    ranked = -np.sort(-np.where(kept[:, :, None], grouped, -np.inf).reshape(tokens, experts), axis=1)
    next_score = ranked[:, top_k] if top_k < experts else np.full(tokens, -np.inf)
    if topk_group == n_group:
        return ranked[:, top_k - 1] - next_score
    ranked_groups = np.take_along_axis(group_scores, group_order, axis=1)
    group_gap = ranked_groups[:, topk_group - 1] - ranked_groups[:, topk_group]
    return np.minimum(group_gap, ranked[:, top_k - 1] - np.maximum(next_score, 0.0))


def bf16_round(values):
    """float32 values rounded to the nearest bfloat16 (ties to even), as float32."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    bits = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def add_routing_code(config, w, make):
    """Makes every router read only the routing code (see the docstring) and draws each token's code."""
    dims = routing_code_dims(config)
    main, mtp = moe_layer_indices(config)
    for name, tensor in w.items():
        if name.endswith((".o_proj.weight", "down_proj.weight")):   # every write to the residual stream
            tensor[dims, :] = 0
    for layer in mtp:
        eh_proj = w[f"model.layers.{layer}.eh_proj.weight"]      # [hidden, 2 hidden]: [enorm(embedding), hnorm(h)]
        eh_proj[dims, :] = 0
        eh_proj[dims, dims] = 1
    for layer in main + mtp:
        gate = w[f"model.layers.{layer}.mlp.gate.weight"]
        gate.zero_()
        gate[:, dims] = make.linear(gate.shape[0], len(dims), gain=ROUTER_GAIN)
    codes = choose_routing_codes(config, w, dims,
                                 lambda shape: torch.randn(shape, generator=make.generator).numpy())
    w["model.embed_tokens.weight"][:, dims] = torch.from_numpy(codes).to(torch.bfloat16)


def choose_routing_codes(config, w, dims, standard_normal):
    """[vocab, len(dims)] float32 (bfloat16 values): for each token, the first code drawn whose routing
    keeps ROUTING_CODE_MARGIN in every MoE layer at every residual rms of RESIDUAL_RMS_RANGE.

    At a main layer's gate the code dims hold norm_weight * code / rms; at the MTP layer's,
    norm_weight * enorm_weight * code / (embedding rms * rms), the embedding rms including the code."""
    main, mtp = moe_layer_indices(config)
    embedding = w["model.embed_tokens.weight"].float().numpy().copy()
    embedding[:, dims] = 0
    rest_square = (embedding.astype(np.float64) ** 2).sum(axis=1)        # each row's sum of squares outside the code
    hidden, eps = config["hidden_size"], config["rms_norm_eps"]
    rms_grid = np.geomspace(*RESIDUAL_RMS_RANGE, 33)
    gates = []                                                 # (readout [E, dims], bias or None, enorm weight or None)
    for layer in main + mtp:
        prefix = f"model.layers.{layer}."
        norm = w[prefix + "post_attention_layernorm.weight"].float().numpy()[dims]
        readout = w[prefix + "mlp.gate.weight"].float().numpy()[:, dims] * norm
        bias = w.get(prefix + "mlp.gate.e_score_correction_bias")
        enorm = w[prefix + "enorm.weight"].float().numpy()[dims] if layer in mtp else None
        gates.append((readout, None if bias is None else bias.numpy(), enorm))
    batch = 64
    codes = np.zeros((embedding.shape[0], len(dims)), dtype=np.float32)
    for token in range(embedding.shape[0]):
        for _ in range(200):
            candidates = bf16_round(standard_normal((batch, len(dims))) * ROUTING_CODE_STD)   # [batch, dims]
            square = rest_square[token] + (candidates.astype(np.float64) ** 2).sum(axis=1)
            embedding_rms = np.sqrt(square / hidden + eps)                                      # [batch]
            clear = np.ones(batch, dtype=bool)
            for readout, bias, enorm in gates:
                code = candidates if enorm is None else enorm * candidates / embedding_rms[:, None]
                logits = (code @ readout.T)[None] / rms_grid[:, None, None]                  # [grid, batch, E]
                margins = routing_margins(logits.reshape(-1, logits.shape[-1]), config, bias)
                clear &= margins.reshape(len(rms_grid), batch).min(axis=0) >= ROUTING_CODE_MARGIN
            if clear.any():
                codes[token] = candidates[np.argmax(clear)]
                break
        else:
            raise RuntimeError(f"no routing code with margin {ROUTING_CODE_MARGIN} found for token {token}")
    return codes


# ---------------------------------------------------------------------------------------------------
# transformers

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


def routed_layers(*roots):
    """(name, decoder layer) of every decoder layer with routed experts under the given modules, once."""
    found, seen = [], set()
    for prefix, root in roots:
        for name, module in root.named_modules():
            mlp = getattr(module, "mlp", None)
            if (hasattr(module, "post_attention_layernorm") and hasattr(mlp, "gate") and hasattr(mlp, "experts")
                    and id(module) not in seen):
                seen.add(id(module))
                found.append((prefix + name, module))
    return found


@torch.no_grad()
def routing_report(model, mtp, config, sequences):
    """Runs each token sequence through the model, and its MTP module over the same tokens, with hooks
    on every routed layer. Returns {layer name: (routing margin per token, residual rms per token)}: the
    margins of the router logits computed from the MoE block's input as HF computes them (float32),
    the rms of the residual stream entering post_attention_layernorm."""
    layers = routed_layers(("", model), *([("mtp.", mtp)] if mtp is not None else []))
    main, mtp_layers = moe_layer_indices(config)
    assert len(layers) == len(main) + len(mtp_layers), [name for name, _ in layers]
    margins = {name: [] for name, _ in layers}
    rms = {name: [] for name, _ in layers}

    def first_input(args, kwargs):
        return (args[0] if args else kwargs["hidden_states"]).detach().float()

    def on_norm(name):
        def hook(module, args, kwargs):
            h = first_input(args, kwargs)
            rms[name].append(torch.sqrt(h.pow(2).mean(-1) + config["rms_norm_eps"]).flatten().numpy())
        return hook

    def on_moe(name):
        def hook(module, args, kwargs):
            x = first_input(args, kwargs)
            logits = torch.nn.functional.linear(x.reshape(-1, x.shape[-1]), module.gate.weight.detach().float())
            bias = getattr(module.gate, "e_score_correction_bias", None)
            margins[name].append(routing_margins(logits.numpy(), config,
                                                 None if bias is None else bias.detach().float().numpy()))
        return hook

    handles = []
    try:
        for name, layer in layers:
            handles.append(layer.post_attention_layernorm.register_forward_pre_hook(on_norm(name), with_kwargs=True))
            handles.append(layer.mlp.register_forward_pre_hook(on_moe(name), with_kwargs=True))
        for ids in sequences:
            _, hidden = hf_logits(model, ids)
            if mtp is not None and len(ids) > 1:
                hf_mtp_logits(model, mtp, ids, hidden)
    finally:
        for handle in handles:
            handle.remove()
    assert all(margins.values()), "a routed layer never ran"
    return {name: (np.concatenate(margins[name]), np.concatenate(rms[name])) for name, _ in layers}


def print_routing(name, report):
    """Prints the report's smallest margin per layer; returns the smallest overall."""
    for layer, (margins, rms) in report.items():
        print(f"    {name} {layer}: smallest routing margin {margins.min():.4f} over {len(margins)} tokens "
              f"(residual rms {rms.min():.2f}..{rms.max():.2f})")
    smallest = min(float(margins.min()) for margins, _ in report.values())
    print(f"  {name}: smallest routing margin {smallest:.4f} (need >= {MIN_ROUTING_MARGIN})")
    return smallest


def hf_reference(name, config, reference_weights, prompts):
    """HF's reference (float32, CPU) on `prompts`, in memory: the cases and the routing margins."""
    model = build_hf_model(config, reference_weights)
    mtp = build_hf_mtp(model, config, reference_weights) if config.get("num_nextn_predict_layers") else None
    cases = []
    for ids in prompts:
        logits, hidden = hf_logits(model, ids)
        case = {"prompt_ids": ids, "logits": logits}
        if mtp is not None and len(ids) > 1:
            case["mtp_logits"] = hf_mtp_logits(model, mtp, ids, hidden)
        case["greedy_ids"], case["greedy_margins"] = hf_greedy(model, ids, GENERATE_STEPS)
        cases.append(case)
        print(f"  {name} prompt of {len(ids)} tokens: |logits| max {logits.abs().max():.2f}, "
              f"smallest greedy margin {min(case['greedy_margins']):.4f}")
    report = routing_report(model, mtp, config, [c["prompt_ids"] + c["greedy_ids"] for c in cases])
    return {"cases": cases, "routing_margin": print_routing(name, report)}


# ---------------------------------------------------------------------------------------------------
# Files

def save_npy(path, tensor):
    np.save(path, tensor.float().numpy().astype(np.float32))


def write_fixture(out_dir, name, config, stored, tokenizer, description, reference):
    directory = os.path.join(out_dir, name)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    save_file({k: v.contiguous() for k, v in sorted(stored.items())}, os.path.join(directory, "model.safetensors"),
              metadata={"format": "pt"})
    tokenizer.save(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(model_max_length=256), f, ensure_ascii=False, indent=2)
    cases = []
    for index, case in enumerate(reference["cases"]):
        entry = {"prompt_ids": case["prompt_ids"], "logits": f"logits_{index}.npy"}
        save_npy(os.path.join(directory, entry["logits"]), case["logits"])
        if "mtp_logits" in case:
            entry["mtp_logits"] = f"mtp_logits_{index}.npy"
            save_npy(os.path.join(directory, entry["mtp_logits"]), case["mtp_logits"])
        entry["greedy_ids"], entry["greedy_margins"] = case["greedy_ids"], case["greedy_margins"]
        cases.append(entry)
    import transformers
    record = {
        "description": description,
        "made_by": "tools/make_model_fixtures.py",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "dtype": "float32 on the CPU, eager attention",
        "smallest_routing_margin": reference["routing_margin"],
        "cases": cases,
    }
    with open(os.path.join(directory, "reference.json"), "w") as f:
        json.dump(record, f, indent=1)
    if "quantization_config" not in config:
        check_hf_loads_checkpoint(directory, cases[-1])
    with open(os.path.join(directory, "tokenizer.json"), "rb") as f:
        print(f"  wrote {directory} (tokenizer.json sha256 {hashlib.sha256(f.read()).hexdigest()[:16]})")


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


def check_fixture(directory):
    """--check-only: HF on the fixture as stored; prints how far its logits, MTP logits and greedy
    continuations are from the recorded ones, and the routing margins."""
    name = os.path.basename(os.path.normpath(directory))
    if not os.path.exists(os.path.join(directory, "reference.json")):
        print(f"  {name}: no fixture at {directory}")
        return
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(directory, "reference.json")) as f:
        recorded = json.load(f)
    weights = dequantize_fp8_blocks(load_file(os.path.join(directory, "model.safetensors")))
    model = build_hf_model(config, weights)
    mtp = build_hf_mtp(model, config, weights) if config.get("num_nextn_predict_layers") else None
    print(f"  {name}: made with torch {recorded.get('torch')}, transformers {recorded.get('transformers')}")
    for case in recorded["cases"]:
        ids = case["prompt_ids"]
        logits, hidden = hf_logits(model, ids)
        line = f"  {name} prompt of {len(ids)} tokens: logits max |diff| "
        line += f"{np.abs(logits.numpy() - np.load(os.path.join(directory, case['logits']))).max():.2e}"
        if mtp is not None and "mtp_logits" in case:
            mtp_logits = hf_mtp_logits(model, mtp, ids, hidden).numpy()
            line += f", MTP {np.abs(mtp_logits - np.load(os.path.join(directory, case['mtp_logits']))).max():.2e}"
        greedy, _ = hf_greedy(model, ids, len(case["greedy_ids"]))
        line += f", greedy ids {'as recorded' if greedy == case['greedy_ids'] else 'DIFFER'}"
        print(line + f", smallest greedy margin {min(case['greedy_margins']):.4f}")
    report = routing_report(model, mtp, config, [c["prompt_ids"] + c["greedy_ids"] for c in recorded["cases"]])
    print_routing(name, report)


# ---------------------------------------------------------------------------------------------------

def prompts_for(tokenizer, vocab, seed):
    """A one-token prompt, 7 tokens of text, 70 tokens of text (longer than a 64-token page), 23
    random ids: the lengths src/backend/conformance takes for the fixture's shapes."""
    rng = np.random.default_rng(seed)
    text = ("The quick brown fox jumps over the lazy dog while the model counts: "
            "one, two, three, 123+456=579. 数学很有趣。 Then it writes code: def f(x): return x * 2\n") * 2
    short = tokenizer.encode("Hello world! How are you today?").ids[:6]
    long = tokenizer.encode(text).ids[:69]
    assert len(short) == 6 and len(long) == 69, (len(short), len(long))
    return [[0], [0] + short, [0] + long, [int(v) for v in rng.integers(3, vocab, size=23)]]


def make_fixtures(out_dir, tokenizer, variants):
    """variants(attempt) -> [(name, config, stored, reference weights, prompts, description)], fixtures
    made from one draw of weights; draws again until all of them route with MIN_ROUTING_MARGIN."""
    for attempt in range(ROUTING_ATTEMPTS):
        fixtures = variants(attempt)
        references = [hf_reference(name, config, reference_weights, prompts)
                      for name, config, _, reference_weights, prompts, _ in fixtures]
        if all(r["routing_margin"] >= MIN_ROUTING_MARGIN for r in references):
            for (name, config, stored, _, _, description), reference in zip(fixtures, references):
                write_fixture(out_dir, name, config, stored, tokenizer, description, reference)
            return
        print(f"  routing margin below {MIN_ROUTING_MARGIN}: drawing the weights again")
    raise SystemExit(f"no weights with routing margins >= {MIN_ROUTING_MARGIN} in {ROUTING_ATTEMPTS} draws; "
                     "if the residual rms printed above leaves RESIDUAL_RMS_RANGE, widen it")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "tests/fixtures/models"))
    parser.add_argument("--check-only", action="store_true",
                        help="write nothing: run HF on the fixtures in --out and print logit differences and margins")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    if args.check_only:
        for name in FIXTURES:
            check_fixture(os.path.join(args.out, name))
        return 0

    tokenizer = train_tokenizer(V3_CONFIG["vocab_size"])
    v3_prompts = prompts_for(tokenizer, V3_CONFIG["vocab_size"], seed=3)

    def v3_variants(attempt):
        v3 = make_checkpoint(V3_CONFIG, seed=3 + 1000 * attempt)
        stored, dequantized = quantize_fp8_blocks(v3, published_layout=True)
        fp8_config = dict(V3_CONFIG, quantization_config=FP8_QUANTIZATION_CONFIG)
        return [("v3-tiny", V3_CONFIG, v3, v3, v3_prompts,
                 "DeepSeek-V3 architecture at the real MLA widths, BF16, YaRN, MTP"),
                ("v3-tiny-fp8", fp8_config, stored, dequantized, v3_prompts,
                 "v3-tiny in the published FP8 block format; reference run on the dequantized weights")]

    def v2_variants(attempt):
        v2 = make_checkpoint(V2_CONFIG, seed=2 + 1000 * attempt)
        return [("v2-lite-tiny", V2_CONFIG, v2, v2, prompts_for(tokenizer, V2_CONFIG["vocab_size"], seed=2),
                 "DeepSeek-V2-Lite-like: q_proj, softmax greedy routing, default RoPE")]

    make_fixtures(args.out, tokenizer, v3_variants)
    make_fixtures(args.out, tokenizer, v2_variants)
    return 0


if __name__ == "__main__":
    sys.exit(main())
