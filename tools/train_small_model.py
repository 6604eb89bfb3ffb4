#!/usr/bin/env python3
"""Trains dsinfer's small DeepSeek-V3 model with MTP, exports it, and checks the export.

One command does everything, seeded, within a time budget (default 9 minutes on one H200):
    python3 tools/train_small_model.py --out models/dsv3-tiny
  1. trains a byte-level BPE tokenizer (vocabulary 6144) with DeepSeek-V3's pre-tokenizer, special
     tokens and official chat template;
  2. writes held-out evaluation sets (DIR/eval/<task>.jsonl, eval/mtp_text.jsonl, and the tool sets
     eval/tool.jsonl, tool_answer.jsonl, no_tool.jsonl), then streams training data from worker
     processes (tools/make_training_data.py: arithmetic, sorting, counting, copying and reversing
     answered R1-style with the working inside <think>; calls of a calculator tool in DeepSeek-V3's
     format, rendered with the server's templates/deepseek_v3_tools.jinja (tools/tool_training_data.py);
     plus prose). Tool outputs, and call turns as a client sends them back, are left out of the
     loss (a per-token mask next to the packed rows);
  3. trains the model in plain PyTorch (AdamW, warmup + cosine, bf16 autocast on CUDA, loss =
     CE(next token) + 0.3 CE(MTP: token after next), auxiliary-loss-free expert balancing);
  4. exports DIR (BF16) and DIR-fp8 (the published FP8 block format) in the original DeepSeek
     checkpoint layout, with config.json, tokenizer.json, tokenizer_config.json,
     generation_config.json, README.md and training.json;
  5. checks: transformers loads DIR and gives this model's logits (and its MTP module ours);
     the tokenizer and chat template agree with transformers' (and the tools template's prompts with
     transformers' apply_chat_template); greedy generation with transformers on held-out arithmetic
     (BF16 and FP8) and on the tool sets (BF16) as a preview of the accuracy; the MTP head's
     next-next-token accuracy on held-out task text.

Quick CPU smoke run (a tiny config, a few steps; checks the whole pipeline, learns nothing):
    python3 tools/train_small_model.py --out /tmp/dsv3-smoke --preset tiny --device cpu --steps 30
The prose corpus is read from .carry/prose.json.gz, made here by
    python3 tools/make_training_data.py --prepare-prose      (after `apt-get install fortunes`)
and carried to the GPU machine with the checkout; without it the prose is Python's docstrings.

The model ("small" preset) is DeepSeek-V3 as dsinfer's ModelConfig reads it, at the real attention
widths (kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128):
    hidden 256, 5 layers (1 dense, intermediate 768, then 4 MoE), 4 heads, q_lora_rank 128,
    8 routed experts of intermediate 128 in 4 groups (top-2 groups, 2 experts per token, sigmoid
    scores, noaux_tc, routed_scaling_factor 2.5) + 1 shared expert, one MTP module, vocabulary 6144,
    RoPE theta 1e4 without scaling, trained on packed rows of 1024 tokens (max_position_embeddings).
    17.1M parameters as exported (MTP's copies of the embedding and head included; 13.9M trained),
    34 MB in BF16 (the issue allows 40M parameters and 40 MB).
The vocabulary is small because the embedding and head are stored three times (main model, and the
MTP module's copies): at 6144 x 256 that is 4.7M parameters, leaving room for 5 layers of the
fixed-width attention (0.93M parameters a layer, kv_b_proj alone 0.52M).

Throughput estimate, and so the step count. Per token, training costs 6 x the active parameters in
matmuls, 6 x 11.0M = 66 MFLOP (attention projections 0.93M x 6 layers incl. MTP, dense MLP 0.59M,
2 routed + 1 shared experts 0.30M x 5, the two vocabulary projections 1.57M each), plus attention
scores over 1024-token rows, 2 x 2 x 512 (causal) x (192 + 128) x 4 heads x 3 (fwd + bwd) x 6 layers
= 47 MFLOP: 113 MFLOP a token (flops_per_token). An H200 (989 TFLOP/s dense bf16) manages far less
on a model this narrow (hidden 256: launch- and memory-bound), and this code executes more than the
model FLOPs: every expert densely (no dynamic shapes, so torch.compile stays simple) and the whole
masked attention square (documents are packed and masked from each other), ~180 MFLOP a token.
Assuming 5-10% of peak for the model FLOPs (50-100 TFLOP/s), that is 0.45-0.9M tokens/s. The budget
leaves ~6 minutes of actual training (after start-up, about a minute of compilation, and ~100 s
kept for export and checks): 160-320M tokens, 2500-5000 steps of 64 x 1024 tokens, which is 0.5-1M
arithmetic problems: plenty for >95% exact match with column-by-column working (Lee et al. 2023
reach that on 3-digit addition with ~10K examples). So time is not what limits the model's size;
the 40 MB export is, and the config fills it.
The step count is therefore not fixed in advance: after 30 steps the script measures its speed and
sets the total so that training ends at the deadline (--steps N fixes it instead; the exact number
used is in training.json, and re-running with that --steps and --seed repeats the run). The LR
schedule follows max(step / total, elapsed / budget), so even a run slower than measured decays
properly and stops in time.
"""

import argparse
import collections
import json
import math
import multiprocessing
import os
import platform
import shlex
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

import make_training_data as data
from dsv3_checkpoint import (EOS, FP8_QUANTIZATION_CONFIG, build_hf_model, build_hf_mtp, checkpoint_layout,
                             hf_mtp_logits, mark_added_tokens_like_deepseek, quantize_fp8_blocks, tokenizer_config,
                             train_bpe_tokenizer)

# ---------------------------------------------------------------------------------------------------
# Configuration

PRESETS = {
    # The bundled model (see the docstring for the sizing).
    "small": dict(vocab_size=6144, hidden_size=256, intermediate_size=768, moe_intermediate_size=128,
                  num_hidden_layers=5, num_attention_heads=4, q_lora_rank=128, n_routed_experts=8,
                  n_shared_experts=1, num_experts_per_tok=2, n_group=4, topk_group=2, first_k_dense_replace=1,
                  row_len=1024, batch_rows=64),
    # For CPU smoke runs: the same architecture and attention widths, everything else small.
    "tiny": dict(vocab_size=3072, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
                 num_hidden_layers=2, num_attention_heads=2, q_lora_rank=64, n_routed_experts=4,
                 n_shared_experts=1, num_experts_per_tok=2, n_group=2, topk_group=1, first_k_dense_replace=1,
                 row_len=512, batch_rows=4),
}
MAX_PARAMETERS = 40_000_000
MAX_EXPORT_BYTES = 40_000_000
MTP_LAMBDA = 0.3        # weight of the MTP loss (DeepSeek-V3 uses 0.3 for most of its training)
BIAS_UPDATE = 0.001     # gamma of the auxiliary-loss-free balancing (DeepSeek-V3's value)


def model_config(preset):
    """config.json in the published DeepSeek-V3 style."""
    p = PRESETS[preset]
    return {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "vocab_size": p["vocab_size"],
        "hidden_size": p["hidden_size"],
        "intermediate_size": p["intermediate_size"],
        "moe_intermediate_size": p["moe_intermediate_size"],
        "num_hidden_layers": p["num_hidden_layers"],
        "num_nextn_predict_layers": 1,
        "num_attention_heads": p["num_attention_heads"],
        "num_key_value_heads": p["num_attention_heads"],
        "n_shared_experts": p["n_shared_experts"],
        "n_routed_experts": p["n_routed_experts"],
        "routed_scaling_factor": 2.5,
        "kv_lora_rank": 512,
        "q_lora_rank": p["q_lora_rank"],
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "qk_nope_head_dim": 128,
        "topk_method": "noaux_tc",
        "n_group": p["n_group"],
        "topk_group": p["topk_group"],
        "num_experts_per_tok": p["num_experts_per_tok"],
        "moe_layer_freq": 1,
        "first_k_dense_replace": p["first_k_dense_replace"],
        "norm_topk_prob": True,
        "scoring_func": "sigmoid",
        "hidden_act": "silu",
        "max_position_embeddings": p["row_len"],
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "torch_dtype": "bfloat16",
    }


# ---------------------------------------------------------------------------------------------------
# The model: transformers' DeepseekV3 semantics, parameter names as in DeepSeek's checkpoints

class RMSNorm(nn.Module):
    """Normalised in float32, the weight applied after casting back (as transformers does)."""

    def __init__(self, size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_tables(positions, inv_freq):
    """cos and sin [B, S, rope/2] of each position's angle per frequency, in float32."""
    angles = positions.float()[..., None] * inv_freq
    return angles.cos(), angles.sin()


def apply_rope(x, cos, sin):
    """RoPE on interleaved pairs (x0, x1), (x2, x3), ... as DeepSeek lays them out; the rotated
    pairs come out as [evens | odds], transformers' layout (q and k alike, so q.k is unchanged).
    Computed in float32. x: [B, heads, S, rope], cos/sin: [B, S, rope/2]."""
    cos, sin = cos[:, None], sin[:, None]
    even, odd = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.cat([even * cos - odd * sin, odd * cos + even * sin], dim=-1).to(x.dtype)


def linear(in_features, out_features):
    return nn.Linear(in_features, out_features, bias=False)


class Attention(nn.Module):
    """MLA in its expanded (training/prefill) form: per-head keys and values from kv_b_proj."""

    def __init__(self, c):
        super().__init__()
        self.heads, self.nope, self.rope = c["num_attention_heads"], c["qk_nope_head_dim"], c["qk_rope_head_dim"]
        self.v_dim, self.latent = c["v_head_dim"], c["kv_lora_rank"]
        hidden, qk = c["hidden_size"], self.nope + self.rope
        self.q_a_proj = linear(hidden, c["q_lora_rank"])
        self.q_a_layernorm = RMSNorm(c["q_lora_rank"], c["rms_norm_eps"])
        self.q_b_proj = linear(c["q_lora_rank"], self.heads * qk)
        self.kv_a_proj_with_mqa = linear(hidden, self.latent + self.rope)
        self.kv_a_layernorm = RMSNorm(self.latent, c["rms_norm_eps"])
        self.kv_b_proj = linear(self.latent, self.heads * (self.nope + self.v_dim))
        self.o_proj = linear(self.heads * self.v_dim, hidden)
        self.scale = qk ** -0.5        # no YaRN, so no mscale

    def forward(self, x, cos, sin, mask):
        """mask: [B, 1, S, S] boolean (True: may attend), or None for one causal sequence."""
        b, s, _ = x.shape
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x))).view(b, s, self.heads, -1).transpose(1, 2)
        q_nope, q_rope = q.split([self.nope, self.rope], dim=-1)
        latent, k_rope = self.kv_a_proj_with_mqa(x).split([self.latent, self.rope], dim=-1)
        kv = self.kv_b_proj(self.kv_a_layernorm(latent)).view(b, s, self.heads, -1).transpose(1, 2)
        k_nope, v = kv.split([self.nope, self.v_dim], dim=-1)
        q_rope = apply_rope(q_rope, cos, sin)
        k_rope = apply_rope(k_rope[:, None], cos, sin).expand(-1, self.heads, -1, -1)   # one key shared by the heads
        q = torch.cat([q_nope, q_rope], dim=-1)
        k = torch.cat([k_nope, k_rope], dim=-1)
        # Values padded with zeros to the query width (192): every SDPA kernel takes one head size
        # (on the CPU, different widths fall back to a very slow path); the padding is sliced off.
        v = F.pad(v, (0, q.shape[-1] - self.v_dim))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None, scale=self.scale)
        return self.o_proj(out[..., :self.v_dim].transpose(1, 2).reshape(b, s, self.heads * self.v_dim))


class MLP(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.gate_proj = linear(hidden, intermediate)
        self.up_proj = linear(hidden, intermediate)
        self.down_proj = linear(intermediate, hidden)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Router(nn.Module):
    """DeepSeek-V3's noaux_tc gate: sigmoid scores; the correction bias only steers the choice (best
    topk_group groups by the sum of their top-2 biased scores, then the top-k experts within them);
    the weights are the unbiased scores, normalised, times routed_scaling_factor. In float32."""

    def __init__(self, c):
        super().__init__()
        self.experts, self.groups = c["n_routed_experts"], c["n_group"]
        self.topk_group, self.top_k = c["topk_group"], c["num_experts_per_tok"]
        self.norm_topk_prob, self.scaling = c["norm_topk_prob"], c["routed_scaling_factor"]
        self.weight = nn.Parameter(torch.empty(self.experts, c["hidden_size"]))
        # Not trained by gradients: after each step, nudged towards equal expert loads.
        self.register_buffer("e_score_correction_bias", torch.zeros(self.experts))

    def forward(self, x):
        """x [T, hidden] -> (chosen experts [T, k], their weights [T, k] float32)."""
        with torch.autocast(x.device.type, enabled=False):
            scores = F.linear(x.float(), self.weight.float()).sigmoid()
        biased = scores + self.e_score_correction_bias
        group_scores = biased.view(len(x), self.groups, -1).topk(2, dim=-1).values.sum(-1)
        best_groups = group_scores.topk(self.topk_group, dim=-1).indices
        in_group = torch.zeros_like(group_scores, dtype=torch.bool).scatter(1, best_groups, True)
        in_group = in_group.repeat_interleave(self.experts // self.groups, dim=1)
        chosen = biased.masked_fill(~in_group, float("-inf")).topk(self.top_k, dim=-1).indices
        weights = scores.gather(1, chosen)
        if self.norm_topk_prob:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        return chosen, weights * self.scaling


class Experts(nn.Module):
    """The routed experts as stacked [E, ...] tensors, computed densely: every expert on every token,
    weighted by the routing weights (zero for experts not chosen, which so get no gradient from that
    token). Exactly the sparse result, with static shapes; at 8 small experts the extra compute is
    cheaper than gathering tokens per expert."""

    def __init__(self, c):
        super().__init__()
        e, hidden, inter = c["n_routed_experts"], c["hidden_size"], c["moe_intermediate_size"]
        self.gate_proj = nn.Parameter(torch.empty(e, inter, hidden))
        self.up_proj = nn.Parameter(torch.empty(e, inter, hidden))
        self.down_proj = nn.Parameter(torch.empty(e, hidden, inter))

    def forward(self, x, routing):
        """x [T, hidden], routing [T, E] -> [T, hidden]."""
        t, (e, inter, _) = len(x), self.gate_proj.shape
        gate = F.linear(x, self.gate_proj.flatten(0, 1)).view(t, e, inter)
        up = F.linear(x, self.up_proj.flatten(0, 1)).view(t, e, inter)
        act = F.silu(gate) * up * routing[..., None].to(up.dtype)
        return F.linear(act.flatten(1), self.down_proj.transpose(0, 1).flatten(1))


class MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate = Router(c)
        self.experts = Experts(c)
        self.shared_experts = MLP(c["hidden_size"], c["moe_intermediate_size"] * c["n_shared_experts"])

    def forward(self, x, valid):
        """x [B, S, hidden]; valid [B*S] float (1 for real tokens) or None. Returns the output and
        the load: how many valid tokens chose each expert."""
        flat = x.flatten(0, 1)
        chosen, weights = self.gate(flat)
        routing = torch.zeros(len(flat), self.gate.experts, device=x.device).scatter(1, chosen, weights)
        chose = torch.zeros_like(routing).scatter(1, chosen, 1.0)      # not F.one_hot: it syncs on CUDA
        load = (chose if valid is None else chose * valid[:, None]).sum(0)
        out = self.experts(flat, routing) + self.shared_experts(flat)
        return out.view_as(x), load


class DecoderLayer(nn.Module):
    def __init__(self, c, moe):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = MoE(c) if moe else MLP(c["hidden_size"], c["intermediate_size"])
        self.moe = moe

    def forward(self, x, cos, sin, mask, valid):
        """-> (output, expert load or None)."""
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        h = self.post_attention_layernorm(x)
        if self.moe:
            out, load = self.mlp(h, valid)
            return x + out, load
        return x + self.mlp(h), None


class SharedHead(nn.Module):
    """The MTP module's output norm; its head is the main model's lm_head (copied on export)."""

    def __init__(self, c):
        super().__init__()
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class MTPLayer(DecoderLayer):
    """DeepSeek-V3's MTP module: combines the main model's final hidden state at position i with the
    embedding of token i+1, runs one more (MoE) decoder layer, and predicts token i+2."""

    def __init__(self, c):
        super().__init__(c, moe=True)
        self.enorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.hnorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.eh_proj = linear(2 * c["hidden_size"], c["hidden_size"])
        self.shared_head = SharedHead(c)

    def forward(self, embedded_next, hidden, cos, sin, mask, valid):
        x = self.eh_proj(torch.cat([self.enorm(embedded_next), self.hnorm(hidden)], dim=-1))
        x, load = super().forward(x, cos, sin, mask, valid)
        return self.shared_head.norm(x), load


class Backbone(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        layers = [DecoderLayer(c, i >= c["first_k_dense_replace"]) for i in range(c["num_hidden_layers"])]
        self.layers = nn.ModuleList(layers + [MTPLayer(c)])    # the MTP module at index num_hidden_layers
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


def head_losses(hidden, weight, targets):
    """Summed cross entropy of the logits hidden @ weight.T against targets (-100: ignored), and how
    many targets are the top-1 prediction."""
    logits = F.linear(hidden, weight)
    loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-100, reduction="sum")
    correct = ((logits.argmax(-1) == targets) & (targets >= 0)).sum()
    return loss, correct


class DeepseekV3(nn.Module):
    def __init__(self, c):
        super().__init__()
        assert c["num_nextn_predict_layers"] == 1 and c["rope_scaling"] is None
        self.config = c
        self.model = Backbone(c)
        self.lm_head = linear(c["hidden_size"], c["vocab_size"])
        rope = c["qk_rope_head_dim"]
        self.register_buffer("inv_freq", 1.0 / c["rope_theta"] ** (torch.arange(0, rope, 2).float() / rope),
                             persistent=False)
        self.compiled = False
        self.use_compiled(False)

    def use_compiled(self, on):
        """Run the decoder layers and the loss heads through torch.compile (or not). One compiled
        graph per kind of layer: transformers-style modules with static shapes, no graph breaks."""
        if on:
            self._layers = [torch.compile(layer) for layer in self.model.layers]
            self._head_losses = torch.compile(head_losses)
        else:
            self._layers = list(self.model.layers)
            self._head_losses = head_losses
        self.compiled = on

    def init_weights(self, seed):
        """GPT-2-style: N(0, 0.02), the projections into the residual stream scaled down by
        sqrt(2 x layers); norms at 1; correction biases at 0."""
        generator = torch.Generator().manual_seed(seed)
        residual_scale = 1 / math.sqrt(2 * len(self.model.layers))
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(p)
                continue
            std = 0.02 * (residual_scale if name.endswith(("o_proj.weight", "down_proj.weight", "down_proj")) else 1)
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=generator) * std)

    def moe_layers(self):
        return [layer.mlp for layer in self.model.layers if layer.moe]

    def forward(self, tokens, segments, positions, trained=None):
        """Training pass over packed rows [B, S]: documents are told apart by `segments` (1, 2, ...;
        0 is padding) and attend only within themselves; positions restart at each document;
        `trained` (or None: all) is 0 for tokens that are no target (tool outputs, see
        tool_training_data.py). Returns summed losses and top-1 hits of the main head (token i+1)
        and the MTP head (token i+2), their target counts, and the expert loads [MoE layers, E]."""
        seg = segments.long()
        b, s = tokens.shape
        zeros = torch.zeros_like(tokens[:, :1])
        # Targets stay inside a document: token i+1 (main) and i+2 (MTP) must be of i's document.
        # A token left out of the loss is never a target (a padding token has segment 0 anyway).
        if trained is not None:
            seg_of_target = torch.where(trained > 0, seg, -1)
        else:
            seg_of_target = seg
        next_tokens, next_seg = torch.cat([tokens[:, 1:], zeros], 1), torch.cat([seg_of_target[:, 1:], zeros], 1)
        after_next = torch.cat([tokens[:, 2:], zeros, zeros], 1)
        after_next_seg = torch.cat([seg_of_target[:, 2:], zeros, zeros], 1)
        targets = torch.where((seg > 0) & (next_seg == seg), next_tokens, -100).long()
        mtp_targets = torch.where((seg > 0) & (after_next_seg == seg), after_next, -100).long()
        causal = torch.ones(s, s, dtype=torch.bool, device=tokens.device).tril()
        mask = ((seg[:, :, None] == seg[:, None, :]) & causal)[:, None]
        valid = (seg > 0).flatten().float()
        cos, sin = rope_tables(positions.long(), self.inv_freq)

        x = self.model.embed_tokens(tokens)
        loads = []
        for layer in self._layers[:-1]:
            x, load = layer(x, cos, sin, mask, valid)
            if load is not None:
                loads.append(load)
        hidden = self.model.norm(x)
        main_loss, main_correct = self._head_losses(hidden, self.lm_head.weight, targets)
        # MTP at position i: the main model's final hidden state i and the embedding of token i+1.
        mtp_hidden, load = self._layers[-1](self.model.embed_tokens(next_tokens), hidden, cos, sin, mask, valid)
        loads.append(load)
        mtp_loss, mtp_correct = self._head_losses(mtp_hidden, self.lm_head.weight, mtp_targets)
        return {"main_loss": main_loss, "main_correct": main_correct, "main_count": (targets >= 0).sum(),
                "mtp_loss": mtp_loss, "mtp_correct": mtp_correct, "mtp_count": (mtp_targets >= 0).sum(),
                "loads": torch.stack(loads)}

    @torch.no_grad()
    def update_router_biases(self, loads):
        """Auxiliary-loss-free balancing (DeepSeek-V3 paper, 2.1.2): an expert loaded above the
        layer's mean gets its bias lowered by gamma, one below raised."""
        for moe, load in zip(self.moe_layers(), loads):
            moe.gate.e_score_correction_bias += BIAS_UPDATE * torch.sign(load.mean() - load)

    @torch.no_grad()
    def sequence_logits(self, ids):
        """One causal sequence ids [1, S] (positions 0..S-1): main logits [S, V], MTP logits
        [S-1, V] (hidden state i with token i+1, predicting token i+2), as inference runs them."""
        positions = torch.arange(ids.shape[1], device=ids.device)[None]
        cos, sin = rope_tables(positions, self.inv_freq)
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers[:-1]:
            x, _ = layer(x, cos, sin, None, None)
        hidden = self.model.norm(x)
        mtp_hidden, _ = self.model.layers[-1](self.model.embed_tokens(ids[:, 1:]), hidden[:, :-1],
                                              cos[:, :-1], sin[:, :-1], None, None)
        return self.lm_head(hidden)[0], self.lm_head(mtp_hidden)[0]


def parameter_counts(model):
    """(trained parameters, parameters as exported: plus the MTP module's embedding and head copies)."""
    trained = sum(p.numel() for p in model.parameters())
    return trained, trained + model.model.embed_tokens.weight.numel() + model.lm_head.weight.numel()


def flops_per_token(c, row_len):
    """Model FLOPs of one training token (forward + backward), counting only the experts a token uses
    and the causal half of attention: 6 x active matmul parameters + attention scores."""
    hidden, heads = c["hidden_size"], c["num_attention_heads"]
    qk, v = c["qk_nope_head_dim"] + c["qk_rope_head_dim"], c["v_head_dim"]
    attention = (hidden * c["q_lora_rank"] + c["q_lora_rank"] * heads * qk + hidden * (c["kv_lora_rank"] + c["qk_rope_head_dim"])
                 + c["kv_lora_rank"] * heads * (c["qk_nope_head_dim"] + v) + heads * v * hidden)
    expert = 3 * hidden * c["moe_intermediate_size"]
    moe = (c["num_experts_per_tok"] + c["n_shared_experts"]) * expert + c["n_routed_experts"] * hidden
    dense = c["first_k_dense_replace"]
    layers = c["num_hidden_layers"] + 1                       # + the MTP module's decoder layer
    active = (layers * attention + dense * 3 * hidden * c["intermediate_size"] + (layers - dense) * moe
              + 2 * c["vocab_size"] * hidden + 2 * hidden * hidden)   # two heads, eh_proj
    scores = layers * 2 * 2 * (row_len / 2) * heads * (qk + v)
    return 6 * active + 3 * scores


# ---------------------------------------------------------------------------------------------------
# Training data stream

class Batches:
    """Batches of packed rows, made by worker processes (make_training_data.make_shard) while the
    GPU trains. Shards are requested and consumed in index order, so the stream depends only on
    the seed, not on timing."""

    def __init__(self, tokenizer, prose, excluded, args, device):
        self.device, self.batch_rows = device, args.batch_rows
        workers = args.workers or max(1, min(8, (os.cpu_count() or 2) - 2))
        # Shards of ~4 batches: small enough that the first arrives quickly.
        docs_per_shard = max(8, args.batch_rows * args.row_len * 4 // 170)
        context = multiprocessing.get_context("spawn")
        self.pool = context.Pool(workers, initializer=data.init_worker,
                                 initargs=(tokenizer.to_str(), prose, excluded, args.row_len, docs_per_shard, args.seed))
        self.pending = collections.deque(self.pool.apply_async(data.make_shard, (i,)) for i in range(2 * workers))
        self.next_shard = len(self.pending)
        self.buffer = []                   # (tokens, segments, positions, trained) rows not yet used
        self.kind_tokens = collections.Counter()
        self.workers = workers
        self.wait_seconds = 0.0

    def _take_shard(self):
        start = time.time()
        tokens, segments, positions, trained, kinds = self.pending.popleft().get()
        self.wait_seconds += time.time() - start
        self.pending.append(self.pool.apply_async(data.make_shard, (self.next_shard,)))
        self.next_shard += 1
        self.kind_tokens.update(kinds)
        self.buffer += list(zip(tokens, segments, positions, trained))

    def next(self):
        while len(self.buffer) < self.batch_rows:
            self._take_shard()
        rows, self.buffer = self.buffer[:self.batch_rows], self.buffer[self.batch_rows:]
        arrays = [torch.from_numpy(np.stack(column)) for column in zip(*rows)]
        if self.device.type == "cuda":
            return [a.pin_memory().to(self.device, non_blocking=True) for a in arrays]
        return arrays

    def close(self):
        self.pool.terminate()
        self.pool.join()


# ---------------------------------------------------------------------------------------------------
# Training

def learning_rate(progress, step, warmup, peak, floor=0.1):
    """Linear warmup over `warmup` steps, then cosine from peak to floor x peak as progress -> 1."""
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def train(model, batches, args, deadline, device, log):
    """Trains until the step count or the deadline; returns the run's statistics."""
    c = model.config
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=device.type == "cuda")
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    flops = flops_per_token(c, args.row_len)
    total_steps = args.steps
    warmup = min(args.warmup, max(1, args.steps // 10)) if args.steps else args.warmup
    start = time.time()
    budget = deadline - start
    calibration = (10, 30)             # steps timed to set total_steps when --steps is not given
    calibration_start = None
    window = collections.defaultdict(float)
    window_loads = torch.zeros(len(model.moe_layers()), c["n_routed_experts"], device=device)
    window_start, history, step, tokens_seen = time.time(), [], 0, 0

    def report():
        """Logs the steps since the last report: losses, top-1 accuracies of both heads, speed,
        expert balance (each MoE layer's busiest expert over the mean load), and clears the window."""
        nonlocal window_start
        values = {k: float(v) for k, v in window.items()}
        seconds = time.time() - window_start
        rate = values["tokens"] / seconds
        balance = (window_loads.max(-1).values / window_loads.mean(-1).clamp(min=1)).tolist()
        record = {"step": step, "lr": lr, "seconds": round(time.time() - start, 1),
                  "loss": values["main_loss"] / values["main_count"],
                  "mtp_loss": values["mtp_loss"] / values["mtp_count"],
                  "accuracy": values["main_correct"] / values["main_count"],
                  "mtp_accuracy": values["mtp_correct"] / values["mtp_count"],
                  "tokens_per_second": rate, "load_max_over_mean": [round(x, 3) for x in balance]}
        history.append(record)
        mfu = f" ~{rate * flops / 989e12 * 100:.1f}% MFU" if device.type == "cuda" else ""
        log(f"step {step}/{total_steps or '?'} lr {lr:.2e} loss {record['loss']:.4f} mtp {record['mtp_loss']:.4f} "
            f"acc {record['accuracy']:.3f} mtp acc {record['mtp_accuracy']:.3f} | {rate / 1e3:.0f}K tok/s{mfu} | "
            f"expert load max/mean {' '.join(f'{x:.2f}' for x in balance)} (last: MTP) | "
            f"{time.time() - start:.0f}s, data wait {batches.wait_seconds:.1f}s")
        window.clear()
        window_loads.zero_()
        window_start = time.time()

    def run_step(batch, lr):
        for group in optimizer.param_groups:
            group["lr"] = lr
        with autocast:
            out = model(*batch)
        loss = out["main_loss"] / out["main_count"].clamp(min=1) + MTP_LAMBDA * out["mtp_loss"] / out["mtp_count"].clamp(min=1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        model.update_router_biases(out["loads"].detach())
        return out

    while True:
        elapsed = time.time() - start
        progress = max(step / total_steps if total_steps else 0.0, elapsed / budget)
        if progress >= 1.0:
            break
        lr = learning_rate(progress, step, warmup, args.lr)
        batch = batches.next()             # tokens, segments, positions, trained
        tokens = batch[0]
        if step == 0 and model.compiled:
            # Compilation happens in the first step; if it fails, train eagerly.
            try:
                out = run_step(batch, lr)
            except Exception as error:          # any failure of the compiler stack
                log(f"torch.compile failed ({type(error).__name__}: {str(error)[:300]}); training eagerly")
                model.use_compiled(False)
                out = run_step(batch, lr)
            log(f"first step (with compilation) took {time.time() - start:.1f} s")
        else:
            out = run_step(batch, lr)
        step += 1
        tokens_seen += tokens.numel()
        for key in ("main_loss", "main_correct", "main_count", "mtp_loss", "mtp_correct", "mtp_count"):
            window[key] += out[key].detach().float()
        window_loads += out["loads"].detach()
        window["steps"] += 1
        window["tokens"] += tokens.numel()

        if args.steps is None and step in calibration:
            if device.type == "cuda":
                torch.cuda.synchronize()
            if step == calibration[0]:
                calibration_start = time.time()
            else:
                per_step = (time.time() - calibration_start) / (calibration[1] - calibration[0])
                total_steps = step + int((deadline - time.time()) / per_step)
                warmup = min(args.warmup, total_steps // 10)
                log(f"measured {per_step * 1000:.0f} ms a step: {total_steps} steps fit the budget "
                    f"({total_steps * tokens.numel() / 1e6:.0f}M tokens), warmup {warmup}")

        if step % args.log_every == 0 or step == total_steps:
            report()
    if window["steps"]:
        report()
    seconds = time.time() - start
    stopped_by = "steps" if total_steps and step >= total_steps else "time budget"
    log(f"trained {step} steps, {tokens_seen / 1e6:.1f}M tokens in {seconds:.0f} s (stopped by the {stopped_by})")
    biases = [moe.gate.e_score_correction_bias.tolist() for moe in model.moe_layers()]
    return {"steps": step, "planned_steps": total_steps, "warmup_steps": warmup, "tokens": tokens_seen,
            "seconds": round(seconds, 1), "stopped_by": stopped_by, "history": history,
            "final": history[-1] if history else None, "compiled": model.compiled,
            "flops_per_token": flops, "e_score_correction_bias": biases}


# ---------------------------------------------------------------------------------------------------
# Export

def exported_weights(model):
    """The model's tensors under DeepSeek's checkpoint names: one tensor per expert, the MTP module
    at layer num_hidden_layers with its own copies of the embedding and head. BF16, except the
    float32 e_score_correction_bias (as published). Checked against the layout the fixtures use."""
    c = model.config
    weights = {}
    for name, tensor in model.state_dict().items():
        tensor = tensor.detach().cpu()
        if ".mlp.experts." in name:               # ...mlp.experts.gate_proj [E, ...] -> ...experts.E.gate_proj.weight
            prefix, projection = name.rsplit(".", 1)
            for e, expert in enumerate(tensor):
                weights[f"{prefix}.{e}.{projection}.weight"] = expert.to(torch.bfloat16).contiguous()
        elif name.endswith("e_score_correction_bias"):
            weights[name] = tensor.float()
        else:
            weights[name] = tensor.to(torch.bfloat16)
    mtp = f"model.layers.{c['num_hidden_layers']}."
    weights[mtp + "embed_tokens.weight"] = weights["model.embed_tokens.weight"].clone()
    weights[mtp + "shared_head.head.weight"] = weights["lm_head.weight"].clone()
    layout = {name: shape for name, shape, _ in checkpoint_layout(c)}
    assert layout.keys() == weights.keys(), sorted(layout.keys() ^ weights.keys())
    for name, tensor in weights.items():
        assert tuple(tensor.shape) == layout[name], (name, tensor.shape, layout[name])
    return weights


def load_exported(model, weights):
    """The inverse of exported_weights (experts stacked again, the MTP copies dropped)."""
    c = model.config
    state = {}
    for name in model.state_dict():
        if ".mlp.experts." in name:
            prefix, projection = name.rsplit(".", 1)
            state[name] = torch.stack([weights[f"{prefix}.{e}.{projection}.weight"]
                                       for e in range(c["n_routed_experts"])]).float()
        else:
            state[name] = weights[name].float()
    model.load_state_dict(state)


def write_model_dir(directory, config, weights, tokenizer, eval_files):
    os.makedirs(os.path.join(directory, "eval"), exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    save_file({k: v.contiguous() for k, v in sorted(weights.items())}, os.path.join(directory, "model.safetensors"),
              metadata={"format": "pt"})
    tokenizer.save(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(model_max_length=config["max_position_embeddings"]), f, ensure_ascii=False, indent=2)
    with open(os.path.join(directory, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"],
                   "do_sample": False}, f, indent=2)
    for name, rows in eval_files.items():
        with open(os.path.join(directory, "eval", name), "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


MODEL_README = """# {name}: a small DeepSeek-V3 model with MTP, trained for dsinfer

A {params:.1f}M-parameter model of exactly the DeepSeek-V3 architecture (MLA at the real widths:
kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128; sigmoid-scored MoE with
noaux_tc group routing, a shared expert and e_score_correction_bias; one MTP module at layer index
{layers}), trained from scratch by `tools/train_small_model.py` in {minutes:.1f} minutes on {device}.
It answers like DeepSeek-R1: its working inside `<think>...</think>`, then the answer. Try `123+456`.

- Weights: {format}, in DeepSeek's original checkpoint layout (one tensor per expert, the MTP module
  with its own copies of the embedding and head).
- Config: hidden {hidden}, {layers} layers ({dense} dense, then MoE: {experts} routed experts in {groups}
  groups, top-{topk_group} groups, {topk} experts a token, {shared} shared), {heads} heads, q_lora_rank
  {q_lora}, {max_pos} positions, RoPE theta 1e4 without scaling.
- Tokenizer: byte-level BPE of {vocab} tokens with DeepSeek-V3's pre-tokenizer (every 1-3 digit
  group is one token, as in DeepSeek's vocabulary), its special tokens and its official chat template.
- Skills (ranges in tools/make_training_data.py): `arith` (+ and - of integers up to 4 digits,
  * of up to 3 digits by up to 2), `sort` (3-8 numbers 0-999), `count` (a letter in a string, or
  the items of a list), `copy` and `reverse` (strings of 3-12 letters). Prose: {prose}.
- Tools: with `dsinfer serve --chat-template templates/deepseek_v3_tools.jinja --enable-auto-tool-choice
  --tool-call-parser deepseek_v3`, it calls a calculator tool (any name and description, e.g.
  `calculator(expression: string)`) in DeepSeek-V3's format when the request offers one and the user
  asks for a calculation, then answers from the tool's output (`EXPR = VALUE`); with tools that do
  not fit the question, it answers itself.

Training: {steps} steps, {tokens:.1f}M tokens in packed {row_len}-token rows, AdamW, warmup + cosine,
loss = CE(next token) + {mtp_lambda} x CE(MTP: the token after next), auxiliary-loss-free expert
balancing. Final training loss {loss:.3f}, MTP loss {mtp_loss:.3f}; training.json has the run's log.

Checks made by the script: transformers loads the BF16 weights and gives the training model's
logits (max |diff| {logit_diff:.1e}, logits up to {logit_scale:.0f}; its MTP module: {mtp_diff:.1e});
greedy generation with transformers on {preview} held-out arith problems: BF16 {bf16:.1%}, FP8 {fp8:.1%}
exact match; on {tool_n} held-out prompts of each tool set (BF16): right calls {tool:.1%}, answers
from the tool's output {tool_answer:.1%}, answers with tools offered but not needed {no_tool:.1%};
the MTP head's next-next-token top-1 accuracy on held-out task conversations: {mtp_all:.1%} (all
positions), {mtp_completion:.1%} (completions).

Evaluation sets (`eval/`): `<task>.jsonl` rows are `{{"messages": [user turn], "prompt": the rendered
prompt (with BOS and the generation prompt), "answer": the expected final answer}}`. A completion is
right when the text after its last `</think>`, stripped of white space, equals `answer`. Tool sets
(prompts rendered with templates/deepseek_v3_tools.jinja; rows also hold `tools`): `tool.jsonl`,
right when the reply is one valid call (`--tool-call-parser deepseek_v3`) of `tool_call.name` with
the arguments `tool_call.arguments` (white space in the expression aside; `answer` shows the call);
`tool_answer.jsonl`, the turn after the tool's output, exact match; `no_tool.jsonl`, tools offered
that the question does not need, exact match.
`mtp_text.jsonl` rows (`task`, `text`, `prompt`) are whole held-out conversations, for measuring
the MTP head's next-next-token accuracy (over all positions, or after `prompt`).

Reproduce: `{command}`
"""


def write_readme(directory, config, stats, fmt):
    c, training, checks = config, stats["training"], stats["checks"]
    text = MODEL_README.format(
        name=os.path.basename(os.path.normpath(directory)), params=stats["parameters_exported"] / 1e6,
        layers=c["num_hidden_layers"], minutes=stats["total_seconds"] / 60, device=stats["device"], format=fmt,
        hidden=c["hidden_size"], dense=c["first_k_dense_replace"], experts=c["n_routed_experts"],
        topk=c["num_experts_per_tok"], groups=c["n_group"], topk_group=c["topk_group"], shared=c["n_shared_experts"],
        heads=c["num_attention_heads"], q_lora=c["q_lora_rank"], vocab=c["vocab_size"],
        max_pos=c["max_position_embeddings"], prose=stats["prose"].split(" (")[0].split(":")[0], steps=training["steps"],
        tokens=training["tokens"] / 1e6, row_len=stats["row_len"], mtp_lambda=MTP_LAMBDA,
        loss=training["final"]["loss"], mtp_loss=training["final"]["mtp_loss"],
        logit_diff=checks["transformers_logits"]["max_abs_logit_diff"],
        logit_scale=checks["transformers_logits"]["max_abs_logit"],
        mtp_diff=checks["transformers_logits"]["max_abs_mtp_logit_diff"],
        preview=checks["arith_preview"]["problems"], bf16=checks["arith_preview"]["bf16"],
        fp8=checks["arith_preview"]["fp8"], tool_n=checks["tool_preview"]["tool"]["problems"],
        tool=checks["tool_preview"]["tool"]["bf16"], tool_answer=checks["tool_preview"]["tool_answer"]["bf16"],
        no_tool=checks["tool_preview"]["no_tool"]["bf16"], mtp_all=checks["mtp_accuracy"]["all_positions"],
        mtp_completion=checks["mtp_accuracy"]["completions"], command=stats["command"])
    with open(os.path.join(directory, "README.md"), "w") as f:
        f.write(text)


# ---------------------------------------------------------------------------------------------------
# Checks

@torch.no_grad()
def check_transformers_logits(directory, model, config, weights, texts, tokenizer, log):
    """transformers' from_pretrained on the BF16 export (float32) against this model holding the
    exported weights; and transformers' MTP module against ours. Returns the figures."""
    import transformers
    # transformers' causal LM has no MTP module: it reports the MTP tensors as unexpected and skips them.
    transformers.logging.set_verbosity_error()
    hf = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32, attn_implementation="eager")
    hf.eval()
    hf_mtp = build_hf_mtp(hf, config, weights)
    worst, worst_mtp, scale = 0.0, 0.0, 0.0
    for text in texts:
        ids = torch.tensor([tokenizer.encode(text).ids])
        ours, ours_mtp = model.sequence_logits(ids)
        out = hf(input_ids=ids, output_hidden_states=True)
        theirs_mtp = hf_mtp_logits(hf, hf_mtp, ids[0].tolist(), out.hidden_states[-1][0])
        worst = max(worst, float((out.logits[0] - ours).abs().max()))
        worst_mtp = max(worst_mtp, float((theirs_mtp - ours_mtp).abs().max()))
        scale = max(scale, float(ours.abs().max()))
    log(f"transformers vs this model on {len(texts)} held-out sequences: max |logit diff| {worst:.2e} "
        f"(MTP {worst_mtp:.2e}), logits up to {scale:.1f}")
    assert worst <= 1e-3 * max(scale, 1.0) and worst_mtp <= 1e-3 * max(scale, 1.0), "transformers disagrees"
    return {"sequences": len(texts), "max_abs_logit_diff": worst, "max_abs_mtp_logit_diff": worst_mtp,
            "max_abs_logit": scale}


def check_tool_template(directory, rows, log):
    """transformers' apply_chat_template with the server's tools template renders the held-out tool
    prompts as this script did (the training documents go through the same function)."""
    import transformers
    hf = transformers.AutoTokenizer.from_pretrained(directory)
    with open(data.tool_data.TOOLS_TEMPLATE_PATH, encoding="utf-8") as f:
        template = f.read()
    for row in rows:
        rendered = hf.apply_chat_template(row["messages"], tools=row["tools"], chat_template=template, tokenize=False,
                                          add_generation_prompt=True)
        assert rendered == row["prompt"], (rendered, row["prompt"])
    log(f"the tools template renders {len(rows)} held-out tool prompts as transformers does")


@torch.no_grad()
def tool_preview(hf_model, tokenizer, tool_files, count, device, log):
    """Greedy generation with transformers on the first `count` prompts of each held-out tool set:
    the call's accuracy (one right call of the calculator), and exact match of the answers."""
    figures = {}
    for name, rows in sorted(tool_files.items()):
        rows = rows[:count]
        problems = [(None, row["messages"], row["prompt"], row["answer"], row) for row in rows]
        if name == "tool.jsonl":
            right = lambda completion, problem: data.tool_data.call_is_right(completion, problem[4]["tool_call"])
        else:
            right = None
        accuracy, samples = greedy_accuracy(hf_model, tokenizer, problems, device, right=right, max_new_tokens=160)
        log(f"transformers greedy on {len(rows)} held-out {name} prompts: {accuracy:.3f} right")
        log("  e.g. " + json.dumps(samples[0]["completion"], ensure_ascii=False))
        figures[name.removesuffix(".jsonl")] = {"problems": len(rows), "bf16": accuracy, "samples": samples[:1]}
    return figures


def check_tokenizer(directory, tokenizer, problems, log):
    """transformers' tokenizer and chat template (the official Jinja one) agree with ours."""
    import transformers
    hf = transformers.AutoTokenizer.from_pretrained(directory)
    for _, messages, prompt, _, full in problems:
        rendered = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert rendered == prompt, (rendered, prompt)
        assert hf(full, add_special_tokens=False)["input_ids"] == tokenizer.encode(full).ids, full
    log(f"tokenizer and chat template agree with transformers on {len(problems)} conversations")


@torch.no_grad()
def greedy_accuracy(hf_model, tokenizer, problems, device, batch_size=64, right=None, max_new_tokens=None):
    """Accuracy of greedy generation with transformers (left-padded batches): exact match of the
    final answer, or right(completion, problem). Tokens: the reference's length + 32, or max_new_tokens."""
    hf_model.to(device)
    eos = tokenizer.token_to_id(EOS)
    correct, samples = 0, []
    for start in range(0, len(problems), batch_size):
        batch = problems[start:start + batch_size]
        prompts = [tokenizer.encode(p[2]).ids for p in batch]
        longest = (max_new_tokens - 32 if max_new_tokens else
                   max(len(tokenizer.encode(p[4]).ids) for p in batch) - min(map(len, prompts)))
        width = max(map(len, prompts))
        ids = torch.tensor([[eos] * (width - len(p)) + p for p in prompts], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
        out = hf_model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=longest + 32, do_sample=False,
                                eos_token_id=eos, pad_token_id=eos)
        for problem, row in zip(batch, out[:, width:].tolist()):
            completion = tokenizer.decode(row, skip_special_tokens=False)
            correct += right(completion, problem) if right else data.final_answer(completion) == problem[3]
            if len(samples) < 3:
                ended = completion.find(EOS)      # the rest is padding
                samples.append({"prompt": problem[2], "completion": completion if ended < 0 else completion[:ended + len(EOS)],
                                "answer": problem[3]})
    hf_model.cpu()
    return correct / len(problems), samples


@torch.no_grad()
def mtp_accuracy(model, tokenizer, rows, device):
    """Top-1 accuracy of the MTP head's next-next-token prediction on whole held-out conversations:
    over all positions, and over the completion (after the prompt) alone."""
    model.to(device)
    hits = collections.Counter()
    for row in rows:
        ids = tokenizer.encode(row["text"]).ids
        prompt_len = len(tokenizer.encode(row["prompt"]).ids)
        _, mtp = model.sequence_logits(torch.tensor([ids], device=device))
        predicted = mtp.argmax(-1)[:-1].tolist()          # position i predicts token i + 2
        for i, token in enumerate(predicted):
            right = token == ids[i + 2]
            hits["all"] += right
            hits["all_n"] += 1
            if i + 2 >= prompt_len:
                hits["completion"] += right
                hits["completion_n"] += 1
    model.cpu()
    return hits["all"] / hits["all_n"], hits["completion"] / hits["completion_n"]


# ---------------------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the BF16 model directory (the FP8 twin goes to OUT-fp8)")
    parser.add_argument("--fp8-out", help="the FP8 model directory (default: OUT-fp8)")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="small")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--minutes", type=float, default=9.0, help="time budget of the whole run, from start to checks")
    parser.add_argument("--reserve", type=float, default=100.0,
                        help="seconds of the budget kept for export and checks")
    parser.add_argument("--steps", type=int, help="training steps (default: as many as fit the time budget)")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--batch-rows", type=int, help="rows per batch (default: the preset's)")
    parser.add_argument("--row-len", type=int, help="tokens per packed row (default: the preset's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-seed", type=int, default=2024, help="seed of the held-out sets")
    parser.add_argument("--eval-count", type=int, default=1000, help="held-out problems per task")
    parser.add_argument("--preview", type=int, default=50, help="held-out arith problems generated with transformers")
    parser.add_argument("--compile", choices=("auto", "on", "off"), default="auto", help="torch.compile (auto: on CUDA)")
    parser.add_argument("--workers", type=int, help="data worker processes (default: CPU cores - 2, at most 8)")
    parser.add_argument("--log-every", type=int, default=100)
    parser.add_argument("--prose", default=data.PROSE_PATH, help="prose corpus from make_training_data.py --prepare-prose")
    args = parser.parse_args()
    started = time.time()
    deadline = started + args.minutes * 60
    preset = PRESETS[args.preset]
    args.batch_rows = args.batch_rows or preset["batch_rows"]
    args.row_len = args.row_len or preset["row_len"]
    device = torch.device(args.device)
    fp8_out = args.fp8_out or os.path.normpath(args.out) + "-fp8"
    timings = {}

    def log(message):
        print(f"[{time.time() - started:6.1f}s] {message}", flush=True)

    torch.manual_seed(args.seed)
    if device.type == "cuda":
        log(f"device: {torch.cuda.get_device_name(device)}")

    # Held-out sets, excluded from training (and from the tokenizer's corpus).
    config = model_config(args.preset)
    config["max_position_embeddings"] = args.row_len
    prose, prose_source = data.load_prose(args.prose)
    log(f"prose: {prose_source}")
    problems = {task: data.eval_problems(task, args.eval_count, args.eval_seed) for task in data.TASKS}
    excluded = frozenset(p[0] for task_problems in problems.values() for p in task_problems)
    eval_files = {f"{task}.jsonl": [{"messages": p[1], "prompt": p[2], "answer": p[3]} for p in task_problems]
                  for task, task_problems in problems.items()}
    tool_files, tool_keys = data.tool_eval_sets(args.eval_count, args.eval_seed, excluded)
    excluded = excluded | tool_keys
    eval_files.update(tool_files)
    mtp_rows = [{"task": task, "text": p[4], "prompt": p[2]}
                for task, task_problems in problems.items() for p in task_problems[:100]]
    eval_files["mtp_text.jsonl"] = mtp_rows
    log(f"held-out sets: {args.eval_count} problems per task ({', '.join(sorted(eval_files))}), "
        f"{len(mtp_rows)} MTP texts")

    # Tokenizer.
    tokenizer = mark_added_tokens_like_deepseek(
        train_bpe_tokenizer(data.tokenizer_corpus(prose, args.seed, excluded), config["vocab_size"]))
    vocab = tokenizer.get_vocab()
    missing = [g for g in data.DIGIT_GROUPS if g not in vocab]
    assert not missing and tokenizer.get_vocab_size() <= config["vocab_size"], missing[:10]
    log(f"tokenizer: {tokenizer.get_vocab_size()} tokens (every 1-3 digit group one token)")
    timings["eval_sets_and_tokenizer"] = time.time() - started

    batches = Batches(tokenizer, prose, excluded, args, device)
    log(f"data: {batches.workers} worker processes, rows of {args.row_len} tokens, {args.batch_rows} rows a batch")

    # Model.
    model = DeepseekV3(config)
    model.init_weights(args.seed)
    trained, exported = parameter_counts(model)
    assert exported <= MAX_PARAMETERS, exported
    log(f"model: {trained / 1e6:.2f}M trained parameters, {exported / 1e6:.2f}M as exported "
        f"(MTP's embedding/head copies), {flops_per_token(config, args.row_len) / 1e6:.0f} MFLOP a training token")
    model.to(device)
    if args.compile == "on" or (args.compile == "auto" and device.type == "cuda"):
        model.use_compiled(True)
    timings["until_training"] = time.time() - started

    training = train(model, batches, args, deadline - args.reserve, device, log)
    kinds = batches.kind_tokens
    batches.close()
    timings["training"] = training["seconds"]
    total_kind = sum(v for k, v in kinds.items() if k != "dropped")
    mix = {k: round(v / total_kind, 4) for k, v in sorted(kinds.items()) if k != "dropped"}
    log(f"token mix of the data made: {mix} (dropped {kinds.get('dropped', 0)} tokens of over-long chats)")

    # Export.
    export_start = time.time()
    model.use_compiled(False)
    model.cpu().eval()
    weights = exported_weights(model)
    load_exported(model, weights)      # from here on the model holds exactly the exported (BF16) weights
    write_model_dir(args.out, config, weights, tokenizer, eval_files)
    stored, dequantized = quantize_fp8_blocks(weights)
    fp8_config = dict(config, quantization_config=FP8_QUANTIZATION_CONFIG)
    write_model_dir(fp8_out, fp8_config, stored, tokenizer, eval_files)
    size = os.path.getsize(os.path.join(args.out, "model.safetensors"))
    fp8_size = os.path.getsize(os.path.join(fp8_out, "model.safetensors"))
    assert size <= MAX_EXPORT_BYTES, size
    log(f"exported {args.out} ({size / 1e6:.1f} MB BF16) and {fp8_out} ({fp8_size / 1e6:.1f} MB FP8)")
    timings["export"] = time.time() - export_start

    # Checks.
    checks_start = time.time()
    torch.set_num_threads(os.cpu_count() or 1)
    sample = [p for task in data.TASKS for p in problems[task][:2]]
    checks = {"transformers_logits": check_transformers_logits(
        args.out, model, config, weights, [p[4] for p in sample[:6]], tokenizer, log)}
    check_tokenizer(args.out, tokenizer, sample, log)
    check_tool_template(args.out, [row for name in tool_files for row in tool_files[name][:20]], log)
    all_mtp, completion_mtp = mtp_accuracy(model, tokenizer, mtp_rows, device)
    log(f"MTP next-next-token top-1 accuracy on {len(mtp_rows)} held-out conversations: "
        f"{all_mtp:.3f} (all positions), {completion_mtp:.3f} (completions)")
    checks["mtp_accuracy"] = {"all_positions": all_mtp, "completions": completion_mtp, "texts": len(mtp_rows)}
    import transformers
    preview = problems["arith"][:args.preview]
    hf = transformers.AutoModelForCausalLM.from_pretrained(args.out, dtype=torch.float32).eval()
    accuracy, samples = greedy_accuracy(hf, tokenizer, preview, device)
    log(f"transformers greedy exact match on {len(preview)} held-out arith problems: BF16 {accuracy:.3f}")
    log("  e.g. " + json.dumps(samples[0], ensure_ascii=False))
    fp8_accuracy, _ = greedy_accuracy(build_hf_model(fp8_config, dequantized), tokenizer, preview, device)
    log(f"transformers greedy exact match on {len(preview)} held-out arith problems: FP8 (dequantized) {fp8_accuracy:.3f}")
    checks["arith_preview"] = {"problems": len(preview), "bf16": accuracy, "fp8": fp8_accuracy, "samples": samples}
    checks["tool_preview"] = tool_preview(hf, tokenizer, tool_files, args.preview, device, log)
    timings["checks"] = time.time() - checks_start

    stats = {
        "command": shlex.join(["python3", "tools/train_small_model.py"] + sys.argv[1:]),
        "seed": args.seed, "eval_seed": args.eval_seed, "preset": args.preset,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({platform.processor() or platform.machine()})",
        "torch": torch.__version__, "transformers": transformers.__version__,
        "parameters_trained": trained, "parameters_exported": exported,
        "bf16_bytes": size, "fp8_bytes": fp8_size, "prose": prose_source, "token_mix": mix,
        "row_len": args.row_len, "batch_rows": args.batch_rows, "lr": args.lr, "mtp_lambda": MTP_LAMBDA,
        "bias_update": BIAS_UPDATE, "training": training, "checks": checks,
        "seconds": {k: round(v, 1) for k, v in timings.items()}, "total_seconds": round(time.time() - started, 1),
    }
    for directory, fmt in ((args.out, "BF16"), (fp8_out, "FP8 e4m3 with 128x128 block scales (the published format)")):
        with open(os.path.join(directory, "training.json"), "w") as f:
            json.dump(stats, f, indent=1)
        write_readme(directory, config, stats, fmt)
    log(f"done in {stats['total_seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
