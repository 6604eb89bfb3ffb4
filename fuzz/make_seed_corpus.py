#!/usr/bin/env python3
"""Writes the seed corpus of the safetensors_header fuzz target: small valid files of each shape the
format allows, and one file per class of malformed header the parser must reject.

usage: fuzz/make_seed_corpus.py [OUT_DIR]   (default fuzz/corpus/safetensors_header)

Regression inputs found by the fuzzer sit beside the seeds under their libFuzzer names
(crash-<sha1>, ...); this script leaves them alone.
"""
import json
import os
import struct
import sys

DTYPE_SIZES = {"F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1, "I32": 4, "I64": 8, "U8": 1}


def safetensors(header, data=b"", pad=True):
    """The bytes of a file: header (a dict, or raw text) padded with spaces to 8 bytes, then data."""
    text = header if isinstance(header, (str, bytes)) else json.dumps(header)
    text = text.encode() if isinstance(text, str) else text
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def packed(*tensors, metadata=None):
    """A valid file holding (name, dtype, shape) tensors back to back, with patterned bytes."""
    header, offset = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        count = DTYPE_SIZES[dtype]
        for dim in shape:
            count *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + count]}
        offset += count
    return safetensors(header, bytes(i % 251 for i in range(offset)))


def entry(dtype="F32", shape=(2,), offsets=(0, 8)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


SEEDS = {
    # Accepted.
    "valid_empty_header": safetensors({}),
    "valid_one_f32": packed(("x.weight", "F32", [2, 3])),
    "valid_every_dtype": packed(("a", "I64", [2]), ("b", "F32", [3]), ("c", "I32", [1]), ("d", "BF16", [2, 2]),
                                ("e", "F16", [3]), ("f", "F8_E4M3", [4, 4]), ("g", "U8", [5])),
    "valid_metadata": packed(("w", "BF16", [4]), metadata={"format": "pt", "note": "seed"}),
    "valid_deepseek_fp8_pair": packed(("model.layers.0.mlp.down_proj.weight", "F8_E4M3", [4, 8]),
                                      ("model.layers.0.mlp.down_proj.weight_scale_inv", "F32", [1, 1])),
    "valid_rank6_and_scalar": packed(("r6", "U8", [1, 2, 1, 2, 1, 2]), ("scalar", "F32", [])),
    "valid_empty_tensor": safetensors({"e": entry("BF16", [0, 7], [0, 0]), "x": entry("U8", [2], [0, 2])}, b"ab"),
    "valid_gap_and_unpadded": safetensors({"x": entry("U8", [2], [4, 6])}, b"\0" * 8, pad=False),
    "valid_unicode_name": packed(("m\u00e9lange.\u6743\u91cd", "F16", [2])),
    # Rejected.
    "bad_too_short": b"\x10\x00\x00",
    "bad_length_only": struct.pack("<Q", 0),
    "bad_length_past_end": struct.pack("<Q", 64) + b"{}",
    "bad_length_huge": struct.pack("<Q", 1 << 62) + b"{}",
    "bad_json": safetensors('{"x": {"dtype": "F32", "shape": [2'),
    "bad_json_trailing": safetensors('{} {}'),
    "bad_not_object": safetensors("[1, 2, 3]"),
    "bad_entry_not_object": safetensors({"x": [1]}),
    "bad_missing_dtype": safetensors({"x": {"shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8),
    "bad_missing_shape": safetensors({"x": {"dtype": "F32", "data_offsets": [0, 8]}}, b"\0" * 8),
    "bad_missing_offsets": safetensors({"x": {"dtype": "F32", "shape": [2]}}, b"\0" * 8),
    "bad_dtype_type": safetensors({"x": entry(dtype=7)}, b"\0" * 8),
    "bad_dtype_unknown": safetensors({"x": entry(dtype="F64", shape=[1])}, b"\0" * 8),
    "bad_shape_negative": safetensors({"x": entry(shape=[-2])}, b"\0" * 8),
    "bad_shape_float": safetensors({"x": entry(shape=[2.0])}, b"\0" * 8),
    "bad_shape_rank7": safetensors({"x": entry("U8", [1] * 7, [0, 1])}, b"\0"),
    "bad_shape_overflow": safetensors({"x": entry("U8", [1 << 32, 1 << 32, 0], [0, 0])}),
    "bad_bytes_overflow": safetensors({"x": entry("I64", [1 << 61], [0, 0])}),
    "bad_offsets_arity": safetensors({"x": entry(offsets=[8])}, b"\0" * 8),
    "bad_offsets_reversed": safetensors({"x": entry(shape=[0], offsets=[8, 0])}, b"\0" * 8),
    "bad_offsets_past_data": safetensors({"x": entry(shape=[4], offsets=[0, 16])}, b"\0" * 8),
    "bad_offsets_int64_max": safetensors({"x": entry("U8", [1], [9223372036854775806, 9223372036854775807])}),
    "bad_byte_count": safetensors({"x": entry(shape=[4], offsets=[0, 8])}, b"\0" * 16),
    "bad_overlap": safetensors({"a": entry(shape=[4], offsets=[0, 16]), "b": entry(shape=[4], offsets=[8, 24])},
                               b"\0" * 24),
    "bad_duplicate_name": safetensors('{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, '
                                      '"a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}', b"ab"),
    "bad_metadata_not_object": safetensors({"__metadata__": "pt"}),
    "bad_metadata_value": safetensors({"__metadata__": {"format": 1}}),
    "bad_control_char_name": safetensors('{"a\\nb\\u0000": 1}'),
}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "safetensors_header")
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(SEEDS)} seeds to {out}")


if __name__ == "__main__":
    main()
