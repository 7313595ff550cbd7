"""Self-test of train/ and of the checkpoints and parity files it generated.

Run from the repository root: /usr/bin/python3 -m train.selftest
  * safetensors: write/read round trip, layout rules, F16/BF16 widening, refusal of broken files;
  * each generated checkpoint: loads (SHA-256 checked), every golden recomputes exactly (max abs diff 0,
    same label and decision), and exporting the loaded model again reproduces both files byte for byte;
  * each parity file: regenerating it from its metadata reproduces it byte for byte, its outputs equal
    the PyTorch forward exactly, and no row's top label is within PARITY_MARGIN of a tie.
"""

import base64
import filecmp
import json
import os
import struct
import tempfile
from argparse import Namespace

import numpy as np
import torch

from . import safetensors_io
from .__main__ import parity
from .export import decide, export_checkpoint
from .load import load_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKPOINTS = ("models/toxicity/1", "models/emotions/1", "tests/fixtures/models/tiny_binary/1",
               "tests/fixtures/models/tiny_multi/1", "tests/fixtures/models/tiny_ordinal/1")
PARITY_FILES = ("tests/fixtures/parity/toxicity.safetensors", "tests/fixtures/parity/tiny_multi.safetensors")
PARITY_MARGIN = 1e-4
# float32 PyTorch against the float64 formulas of the doc
CONTRACT_TOLERANCE = 1e-5


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def max_abs_diff(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)), initial=0.0))


def expect_refused(path, what):
    try:
        safetensors_io.load(path)
    except ValueError:
        return
    raise AssertionError(f"safetensors: {what} was accepted")


def write_raw(path, header, buffer):
    """A safetensors file from a header dict and data bytes, with no checks (for broken files)."""
    text = json.dumps(header).encode("utf-8")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + buffer)


def test_safetensors(tmp):
    rng = np.random.default_rng(0)
    tensors = {"b": rng.standard_normal((2, 3)).astype(np.float32), "a.scalar": np.float32(0.3).reshape(()),
               "c": np.zeros((0, 5), np.float32), "d": rng.standard_normal((2, 1, 3, 2)).astype(np.float32)}
    path = os.path.join(tmp, "roundtrip.safetensors")
    safetensors_io.save(path, tensors, metadata={"format": "pt"})
    loaded, metadata = safetensors_io.load(path)
    check(metadata == {"format": "pt"}, "safetensors: metadata lost")
    check(loaded.keys() == tensors.keys(), "safetensors: names differ")
    for name, array in tensors.items():
        check(loaded[name].shape == array.shape and loaded[name].tobytes() == array.tobytes(),
              f"safetensors: tensor {name} differs after the round trip")
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8:8 + n])
    check(n % 8 == 0, "safetensors: header length is not a multiple of 8")
    begins = [header[name]["data_offsets"][0] for name in sorted(tensors)]
    check(begins == sorted(begins), "safetensors: tensors are not stored in sorted-name order")

    half = os.path.join(tmp, "half.safetensors")
    values = [1.0, -2.5, 0.15625]
    bf16 = (np.array(values, "<f4").view("<u4") >> 16).astype("<u2")  # exact: values have short mantissas
    buffer = np.array(values, "<f2").tobytes() + bf16.tobytes()
    write_raw(half, {"h": {"dtype": "F16", "shape": [3], "data_offsets": [0, 6]},
                     "b": {"dtype": "BF16", "shape": [3], "data_offsets": [6, 12]}}, buffer)
    loaded, _ = safetensors_io.load(half)
    check(loaded["h"].tolist() == values and loaded["b"].tolist() == values, "safetensors: F16/BF16 widening")

    broken = os.path.join(tmp, "broken.safetensors")
    with open(broken, "wb") as f:
        f.write(data[:-4])
    expect_refused(broken, "a truncated file")
    zero_bytes = bytes(16)
    write_raw(broken, {"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, zero_bytes[:8])
    expect_refused(broken, "a hole before a tensor")
    write_raw(broken, {"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "y": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, zero_bytes[:12])
    expect_refused(broken, "overlapping tensors")
    write_raw(broken, {"x": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}, zero_bytes[:8])
    expect_refused(broken, "an unknown dtype")
    try:
        safetensors_io.save(broken, {"x": np.zeros(2, np.float64)})
    except TypeError:
        pass
    else:
        raise AssertionError("safetensors: a float64 tensor was written")
    print("ok safetensors round trip and checks")


def contract_forward(directory, z):
    """The formulas of docs/checkpoint-format.md in float64 numpy, reading tensors by config.json's names.

    Independent of the PGCL module: returns (e (B, d), probabilities (B, K)) for z (B, D).
    """
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    arrays, _ = safetensors_io.load(os.path.join(directory, "model.safetensors"))
    t = {name: array.astype(np.float64) for name, array in arrays.items()}

    def linear(prefix, x):
        return x @ t[prefix + ".weight"].T + t[prefix + ".bias"]

    def softmax(x):
        x = np.exp(x - x.max(axis=1, keepdims=True))
        return x / x.sum(axis=1, keepdims=True)

    z = z.astype(np.float64)
    s, eps = z, config["semantic_mlp"]["batchnorm_eps"]
    for layer in config["semantic_mlp"]["layers"]:
        s = linear(layer["linear"], s)
        s = np.where(s >= 0, s, layer["negative_slope"] * s)
        bn = layer["batchnorm"]
        s = (s - t[bn + ".running_mean"]) / np.sqrt(t[bn + ".running_var"] + eps)
        s = s * t[bn + ".weight"] + t[bn + ".bias"]
    names = config["attention"]
    C = t[names["prototypes"]]
    a = softmax(linear(names["query"], z) @ linear(names["key"], C).T / np.sqrt(C.shape[1]))
    m = a @ linear(names["value"], C)
    alpha = float(t[names["alpha"]].reshape(()))
    fused = alpha * s + (1 - alpha) * m
    e = fused / np.linalg.norm(fused, axis=1, keepdims=True)
    logits = linear(config["head"]["linear"], e)
    if config["task"] == "binary":
        p = 1 / (1 + np.exp(-logits[:, 0]))
        return e, np.stack([1 - p, p], axis=1)
    return e, softmax(logits)


def test_checkpoint(relative, tmp):
    directory = os.path.join(ROOT, relative)
    model, config = load_checkpoint(directory)
    labels, policy = config["labels"], config["decision_policy"]
    goldens = config.get("golden", [])
    inputs = np.stack([np.frombuffer(base64.b64decode(g["embedding_b64"]), "<f4") for g in goldens])
    with torch.no_grad():
        out = model(torch.from_numpy(inputs))
    for g, e, p in zip(goldens, out["e"].numpy(), out["probabilities"].numpy()):
        check(max_abs_diff(g["vector"], e) == 0.0, f"{relative}: golden vector differs")
        check(max_abs_diff(g["probabilities"], p) == 0.0, f"{relative}: golden probabilities differ")
        check(g["label_index"] == int(np.argmax(p)), f"{relative}: golden label_index differs")
        check(g["decision"] == decide(p, labels, policy), f"{relative}: golden decision differs")
    e64, p64 = contract_forward(directory, inputs)
    contract = max(max_abs_diff(e64, out["e"]), max_abs_diff(p64, out["probabilities"]))
    check(contract <= CONTRACT_TOLERANCE, f"{relative}: the documented formulas differ by {contract:.2e}")

    again = os.path.join(tmp, relative.replace("/", "_"))
    export_checkpoint(model, again, config["task"], labels, policy, golden_inputs=inputs,
                      training=config.get("training"), calibration=config.get("calibration"),
                      dsa=config.get("dsa"))
    for name in ("config.json", "model.safetensors"):
        check(filecmp.cmp(os.path.join(directory, name), os.path.join(again, name), shallow=False),
              f"{relative}: re-exporting the loaded model changes {name}")
    decisions = sorted({g["decision"] for g in goldens})
    print(f"ok {relative}: {len(goldens)} goldens exact ({', '.join(decisions)}), re-export identical, "
          f"float64 formulas within {contract:.1e}")


def test_parity(relative, tmp):
    path = os.path.join(ROOT, relative)
    stored, metadata = safetensors_io.load(path)
    again = os.path.join(tmp, os.path.basename(relative))
    cwd = os.getcwd()
    os.chdir(ROOT)  # the metadata names the checkpoint relative to the repository root
    try:
        parity(Namespace(checkpoint=metadata["checkpoint"], n=int(metadata["n"]), seed=int(metadata["seed"]),
                         out=again))
    finally:
        os.chdir(cwd)
    check(filecmp.cmp(path, again, shallow=False), f"{relative}: regenerating it gives different bytes")

    model, _ = load_checkpoint(os.path.join(ROOT, metadata["checkpoint"]))
    with torch.no_grad():
        out = model(torch.from_numpy(stored["inputs"]))
    probabilities = out["probabilities"].numpy()
    check(max_abs_diff(stored["vectors"], out["e"].numpy()) == 0.0, f"{relative}: vectors differ")
    check(max_abs_diff(stored["probabilities"], probabilities) == 0.0, f"{relative}: probabilities differ")
    check(max_abs_diff(stored["label_index"], np.argmax(probabilities, axis=1)) == 0.0,
          f"{relative}: label_index differs")
    e64, p64 = contract_forward(os.path.join(ROOT, metadata["checkpoint"]), stored["inputs"])
    contract = max(max_abs_diff(e64, stored["vectors"]), max_abs_diff(p64, probabilities))
    check(contract <= CONTRACT_TOLERANCE, f"{relative}: the documented formulas differ by {contract:.2e}")
    ranked = np.sort(probabilities, axis=1)
    margin = float(np.min(ranked[:, -1] - ranked[:, -2]))
    check(margin >= PARITY_MARGIN, f"{relative}: a row's top two probabilities are {margin:.2e} apart")
    shapes = ", ".join(f"{name} {list(array.shape)}" for name, array in sorted(stored.items()))
    print(f"ok {relative}: exact, regenerates identically ({shapes}; smallest top-2 gap {margin:.3g}; "
          f"float64 formulas within {contract:.1e})")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_safetensors(tmp)
        for relative in CHECKPOINTS:
            test_checkpoint(relative, tmp)
        for relative in PARITY_FILES:
            test_parity(relative, tmp)
    print("selftest passed")


if __name__ == "__main__":
    main()
