"""The DeepSeek-V3 checkpoint as DeepSeek publishes it, shared by the tools that write checkpoints.

Used by tools/make_model_fixtures.py (random-weight test fixtures) and tools/train_small_model.py (the
trained bundled model). One place says:
  - the layout: every tensor's original name and shape (one tensor per expert, the MTP module at layer
    index num_hidden_layers + k with its own copies of the embedding and the head);
  - the FP8 block format: F8_E4M3 weights with one float32 weight_scale_inv per 128x128 block;
  - how those names map onto transformers' DeepseekV3/V2 modules (experts fused into 3-D tensors, the
    MTP module as transformers' MtpModel), so the tools can check their checkpoints against it;
  - the tokenizer: a byte-level BPE with DeepSeek-V3's pre-tokenizer, special tokens and official chat
    template, copied from the real tokenizer in tests/fixtures/tokenizers/deepseek-v3.
"""

import json
import lzma
import math
import os

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Its tokenizer.json is kept xz-compressed, as tokenizer.json.xz (7.8 MB plain).
DEEPSEEK_TOKENIZER = os.path.join(ROOT, "tests/fixtures/tokenizers/deepseek-v3")

BOS, EOS, PAD = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"
USER, ASSISTANT = "<｜User｜>", "<｜Assistant｜>"
THINK, END_THINK = "<think>", "</think>"
TOOL_TOKENS = [
    "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
    "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁output▁begin｜>",
    "<｜tool▁output▁end｜>", "<｜tool▁sep｜>",
]
# In this order they take ids 0..15, so BOS is 0 and EOS is 1 as in DeepSeek's config.json.
SPECIAL_TOKENS = [BOS, EOS, PAD, USER, ASSISTANT, THINK, END_THINK] + TOOL_TOKENS
# DeepSeek's tokenizer.json marks only BOS, EOS and PAD "special". The chat-role, tool-call and (in
# R1) <think>/</think> tokens are added tokens with special=false, so decoding with
# skip_special_tokens keeps them: a reasoning parser still sees </think>.
DEEPSEEK_SPECIAL = (BOS, EOS, PAD)


# ---------------------------------------------------------------------------------------------------
# Layout

def decoder_layer_layout(config, prefix, moe):
    """(name, shape, role) of one decoder layer's tensors, in checkpoint order.

    Roles say what a tensor is, so a writer can initialise it: "norm", "linear", "router",
    "router_bias" (float32 e_score_correction_bias of noaux_tc routing)."""
    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    qk = config["qk_nope_head_dim"] + config["qk_rope_head_dim"]
    latent = config["kv_lora_rank"]
    layout = [(prefix + "input_layernorm.weight", (hidden,), "norm"),
              (prefix + "post_attention_layernorm.weight", (hidden,), "norm")]
    attn = prefix + "self_attn."
    if config["q_lora_rank"]:
        layout += [(attn + "q_a_proj.weight", (config["q_lora_rank"], hidden), "linear"),
                   (attn + "q_a_layernorm.weight", (config["q_lora_rank"],), "norm"),
                   (attn + "q_b_proj.weight", (heads * qk, config["q_lora_rank"]), "linear")]
    else:
        layout.append((attn + "q_proj.weight", (heads * qk, hidden), "linear"))
    layout += [
        (attn + "kv_a_proj_with_mqa.weight", (latent + config["qk_rope_head_dim"], hidden), "linear"),
        (attn + "kv_a_layernorm.weight", (latent,), "norm"),
        (attn + "kv_b_proj.weight", (heads * (config["qk_nope_head_dim"] + config["v_head_dim"]), latent),
         "linear"),
        (attn + "o_proj.weight", (hidden, heads * config["v_head_dim"]), "linear"),
    ]
    mlp = prefix + "mlp."
    if not moe:
        inter = config["intermediate_size"]
        return layout + [(mlp + "gate_proj.weight", (inter, hidden), "linear"),
                         (mlp + "up_proj.weight", (inter, hidden), "linear"),
                         (mlp + "down_proj.weight", (hidden, inter), "linear")]
    experts = config["n_routed_experts"]
    inter = config["moe_intermediate_size"]
    layout.append((mlp + "gate.weight", (experts, hidden), "router"))
    if config["topk_method"] == "noaux_tc":
        layout.append((mlp + "gate.e_score_correction_bias", (experts,), "router_bias"))
    for e in range(experts):
        expert = f"{mlp}experts.{e}."
        layout += [(expert + "gate_proj.weight", (inter, hidden), "linear"),
                   (expert + "up_proj.weight", (inter, hidden), "linear"),
                   (expert + "down_proj.weight", (hidden, inter), "linear")]
    shared = inter * config["n_shared_experts"]
    return layout + [(mlp + "shared_experts.gate_proj.weight", (shared, hidden), "linear"),
                     (mlp + "shared_experts.up_proj.weight", (shared, hidden), "linear"),
                     (mlp + "shared_experts.down_proj.weight", (hidden, shared), "linear")]


def checkpoint_layout(config):
    """(name, shape, role) of every tensor of the published checkpoint, in order.

    Extra roles: "embedding", "head" (lm_head), "mtp_linear" (eh_proj), and "copy:NAME" for the
    MTP module's own copies of the embedding and the head."""
    hidden, vocab = config["hidden_size"], config["vocab_size"]
    layout = [("model.embed_tokens.weight", (vocab, hidden), "embedding"),
              ("model.norm.weight", (hidden,), "norm"),
              ("lm_head.weight", (vocab, hidden), "head")]
    layers = config["num_hidden_layers"]
    for i in range(layers):
        layout += decoder_layer_layout(config, f"model.layers.{i}.", i >= config["first_k_dense_replace"])
    for k in range(config.get("num_nextn_predict_layers", 0)):
        prefix = f"model.layers.{layers + k}."
        layout += decoder_layer_layout(config, prefix, True)
        layout += [(prefix + "enorm.weight", (hidden,), "norm"),
                   (prefix + "hnorm.weight", (hidden,), "norm"),
                   (prefix + "eh_proj.weight", (hidden, 2 * hidden), "mtp_linear"),
                   (prefix + "shared_head.norm.weight", (hidden,), "norm"),
                   (prefix + "embed_tokens.weight", (vocab, hidden), "copy:model.embed_tokens.weight"),
                   (prefix + "shared_head.head.weight", (vocab, hidden), "copy:lm_head.weight")]
    return layout


# ---------------------------------------------------------------------------------------------------
# FP8 block format

FP8_MAX = 448.0
FP8_SKIP = ("embed_tokens", "lm_head", "shared_head.head", "mlp.gate.weight")
FP8_QUANTIZATION_CONFIG = {
    "activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}


def quantized_in_fp8(name, tensor, published_layout):
    """Whether the FP8 format stores this tensor as F8_E4M3 with block scales.

    published_layout: as DeepSeek's FP8 checkpoints (src/io/tensor_specs.h): every projection
    (*_proj.weight and kv_a_proj_with_mqa.weight) except the MTP module's eh_proj. Without it, the rule
    the bundled model's FP8 twin was written with (tools/train_small_model.py, tools/make_fp8_twin.py
    rebuild it byte for byte): every *_proj.weight, so eh_proj is FP8 and kv_a_proj_with_mqa is not."""
    if tensor.dim() != 2 or any(s in name for s in FP8_SKIP):
        return False
    if not published_layout:
        return name.endswith("_proj.weight")
    return name.endswith(("_proj.weight", "kv_a_proj_with_mqa.weight")) and not name.endswith(".eh_proj.weight")


def quantize_fp8_blocks(weights, block=128, published_layout=False):
    """The FP8 block format: F8_E4M3 weights with one float32 scale per 128x128 block.

    As in DeepSeek's checkpoints, the projections are quantized (which ones: quantized_in_fp8); the
    embeddings, heads, router weights, norms and biases stay as they are.
    Returns (stored tensors, dequantized float32 weights that transformers runs on)."""
    stored, dequantized = {}, {}
    for name, tensor in weights.items():
        if not quantized_in_fp8(name, tensor, published_layout):
            stored[name] = tensor
            dequantized[name] = tensor.float()
            continue
        w = tensor.float()
        rows, cols = w.shape
        row_blocks, col_blocks = math.ceil(rows / block), math.ceil(cols / block)
        padded = torch.zeros(row_blocks * block, col_blocks * block)
        padded[:rows, :cols] = w
        tiles = padded.view(row_blocks, block, col_blocks, block)
        scale = tiles.abs().amax(dim=(1, 3)).clamp(min=1e-12) / FP8_MAX      # [row_blocks, col_blocks]
        q = (tiles / scale[:, None, :, None]).to(torch.float8_e4m3fn)
        back = (q.float() * scale[:, None, :, None]).view_as(padded)[:rows, :cols]
        stored[name] = q.view_as(padded)[:rows, :cols].contiguous()
        stored[name.replace(".weight", ".weight_scale_inv")] = scale.float().contiguous()
        dequantized[name] = back.contiguous()
    return stored, dequantized


def dequantize_fp8_blocks(stored, block=128):
    """The float32 weights of a checkpoint in the FP8 block format (the weight_scale_inv tensors are
    consumed); equal to what quantize_fp8_blocks returns as dequantized. Other checkpoints: float32."""
    weights = {}
    for name, tensor in stored.items():
        if name.endswith(".weight_scale_inv"):
            continue
        scale = stored.get(name + "_scale_inv") if name.endswith(".weight") else None
        if scale is None:
            weights[name] = tensor.float()
            continue
        rows, cols = tensor.shape
        scale = scale.float().repeat_interleave(block, 0).repeat_interleave(block, 1)[:rows, :cols]
        weights[name] = tensor.float() * scale
    return weights


# ---------------------------------------------------------------------------------------------------
# transformers

def to_hf_state_dict(weights, config):
    """Our original-layout names -> transformers' modules (experts fused into 3-D tensors)."""
    layers = config["num_hidden_layers"]
    state = {}
    for name, tensor in weights.items():
        if name.startswith("model.layers."):
            index = int(name.split(".")[2])
            if index >= layers or ".experts." in name:
                continue
        state[name] = tensor.float()
    for i in range(config["first_k_dense_replace"], layers):
        mlp = f"model.layers.{i}.mlp."
        experts = range(config["n_routed_experts"])
        gate_up = [torch.cat([weights[f"{mlp}experts.{e}.gate_proj.weight"].float(),
                              weights[f"{mlp}experts.{e}.up_proj.weight"].float()]) for e in experts]
        state[mlp + "experts.gate_up_proj"] = torch.stack(gate_up)
        state[mlp + "experts.down_proj"] = torch.stack(
            [weights[f"{mlp}experts.{e}.down_proj.weight"].float() for e in experts])
    return state


def mtp_state_dict(weights, config):
    """The MTP module's tensors under transformers' MtpModel names (layers.0.mtp_block...)."""
    layer = config["num_hidden_layers"]
    prefix = f"model.layers.{layer}."
    renamed = {}
    for name, tensor in weights.items():
        if not name.startswith(prefix):
            continue
        rest = name[len(prefix):]
        if rest in ("embed_tokens.weight", "shared_head.head.weight"):
            continue
        if rest.split(".")[0] in ("enorm", "hnorm", "eh_proj"):
            renamed["layers.0." + rest] = tensor
        elif rest == "shared_head.norm.weight":
            renamed["layers.0.post_norm.weight"] = tensor
        else:
            renamed[f"model.layers.0.{rest}"] = tensor
    state = {}
    mtp_config = dict(config, num_hidden_layers=1, first_k_dense_replace=0)
    for name, tensor in to_hf_state_dict(renamed, mtp_config).items():
        state[name.replace("model.layers.0.", "layers.0.mtp_block.")] = tensor
    return state


def build_hf_model(config, weights):
    """transformers' model (float32, eager attention) holding `weights` (original layout)."""
    import transformers
    hf_config_dict = {k: v for k, v in config.items() if k not in ("architectures", "torch_dtype")}
    if config["model_type"] == "deepseek_v3":
        hf_config = transformers.DeepseekV3Config(**hf_config_dict)
        model_class = transformers.DeepseekV3ForCausalLM
    else:
        hf_config = transformers.DeepseekV2Config(**hf_config_dict)
        model_class = transformers.DeepseekV2ForCausalLM
    hf_config._attn_implementation = "eager"
    model = model_class(hf_config).float().eval()
    missing, unexpected = model.load_state_dict(to_hf_state_dict(weights, config), strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    return model


def build_hf_mtp(model, config, weights):
    """transformers' MtpModel for the checkpoint's MTP module, sharing `model`'s embedding and head."""
    from transformers.modeling_layers import MtpModel
    mtp = MtpModel(model, config["num_nextn_predict_layers"]).float().eval()
    missing, unexpected = mtp.load_state_dict(mtp_state_dict(weights, config), strict=False)
    assert not unexpected, unexpected
    assert all(k.startswith(("embed_tokens", "shared_head")) for k in missing), missing
    mtp.tie_with_main_model(model)
    return mtp


@torch.no_grad()
def hf_mtp_logits(model, mtp, ids, hidden):
    """MTP logits at positions 0..n-2: hidden state i (after the final norm) with token i + 1."""
    n = len(ids) - 1
    next_ids = torch.tensor([ids[1:]])
    positions = torch.arange(n)[None]
    embeds = mtp.embed_tokens(next_ids)
    rotary = mtp.rotary_emb(embeds, position_ids=positions)
    mask = torch.full((n, n), float("-inf")).triu(1)[None, None]
    h = mtp.layers[0](embeds, hidden[None, :n], position_embeddings=rotary, attention_mask=mask,
                      position_ids=positions, past_key_values=None)
    return model.lm_head(h)[0]


# ---------------------------------------------------------------------------------------------------
# Tokenizer

def _reference_tokenizer_json():
    with lzma.open(os.path.join(DEEPSEEK_TOKENIZER, "tokenizer.json.xz"), "rt", encoding="utf-8") as f:
        return json.load(f)


def train_bpe_tokenizer(texts, vocab_size, special_tokens=SPECIAL_TOKENS):
    """A byte-level BPE trained on `texts` with the DeepSeek-V3 pre-tokenizer (its three Split regexes,
    digits in groups of up to three, then ByteLevel), `special_tokens` taking the first ids."""
    splits = [step["pattern"]["Regex"] for step in _reference_tokenizer_json()["pre_tokenizer"]["pretokenizers"]
              if step["type"] == "Split"]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(pattern), behavior="isolated") for pattern in splits]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special_tokens,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(texts, trainer=trainer)
    assert tokenizer.get_vocab_size() <= vocab_size, tokenizer.get_vocab_size()
    return tokenizer


def mark_added_tokens_like_deepseek(tokenizer):
    """The trainer adds every special token with special=true; DeepSeek's tokenizer.json marks only
    BOS/EOS/PAD so (and those normalized=false), the others special=false, normalized=true."""
    data = json.loads(tokenizer.to_str())
    for token in data["added_tokens"]:
        special = token["content"] in DEEPSEEK_SPECIAL
        token["special"], token["normalized"] = special, not special
    return Tokenizer.from_str(json.dumps(data, ensure_ascii=False))


def official_chat_template():
    """The chat template of DeepSeek-V3's tokenizer_config.json, verbatim."""
    with open(os.path.join(DEEPSEEK_TOKENIZER, "tokenizer_config.json"), encoding="utf-8") as f:
        return json.load(f)["chat_template"]


def tokenizer_config(model_max_length):
    """tokenizer_config.json as DeepSeek publishes it, with the official DeepSeek-V3 chat template."""
    return {"add_bos_token": True, "add_eos_token": False, "bos_token": BOS,
            "eos_token": EOS, "pad_token": EOS, "model_max_length": model_max_length,
            "tokenizer_class": "LlamaTokenizerFast", "chat_template": official_chat_template()}
