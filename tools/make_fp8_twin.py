#!/usr/bin/env python3
"""Writes the FP8 twin of a BF16 DeepSeek checkpoint directory, in the published block format
(F8_E4M3 weights with one float32 scale per 128x128 block, `quantization_config` in config.json).

The bundled model keeps only its BF16 export in the repository; this rebuilds the FP8 export that
tools/train_small_model.py wrote next to it, byte for byte (both quantize the same BF16 tensors with
tools/dsv3_checkpoint.quantize_fp8_blocks):
    python3 tools/make_fp8_twin.py models/dsv3-tiny /tmp/dsv3-tiny-fp8
Needs torch and safetensors.
"""

import argparse
import json
import os
import shutil
import sys

from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dsv3_checkpoint import quantize_fp8_blocks  # noqa: E402

FP8_QUANTIZATION_CONFIG = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                           "weight_block_size": [128, 128]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="the BF16 model directory")
    parser.add_argument("target", help="where to write the FP8 twin")
    args = parser.parse_args()
    shutil.copytree(args.source, args.target, ignore=shutil.ignore_patterns("model.safetensors", "config.json", "README.md"),
                    dirs_exist_ok=True)
    with open(os.path.join(args.source, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = FP8_QUANTIZATION_CONFIG
    with open(os.path.join(args.target, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    stored, _ = quantize_fp8_blocks(load_file(os.path.join(args.source, "model.safetensors")))
    save_file({k: v.contiguous() for k, v in sorted(stored.items())}, os.path.join(args.target, "model.safetensors"),
              metadata={"format": "pt"})
    print(f"wrote {args.target}")


if __name__ == "__main__":
    main()
