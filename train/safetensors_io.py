"""Reading and writing safetensors files with numpy only (no safetensors package).

Layout (docs/checkpoint-format.md): an unsigned 64-bit little-endian header length N, N bytes of JSON
mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (plus an optional
"__metadata__" of string pairs), then the data buffer. The writer emits F32 tensors contiguously in
sorted-name order and pads the JSON with spaces so that N is a multiple of 8. The reader checks the same
rules pgcld checks and widens F16 and BF16 to float32, as pgcld does.
"""

import json
import struct

import numpy as np

MAX_HEADER_BYTES = 100 * 1024 * 1024
MAX_RANK = 4
DTYPE_SIZES = {"F32": 4, "F16": 2, "BF16": 2}


def save(path, tensors, metadata=None):
    """Write `tensors` (name -> float32 numpy array) to `path`; `metadata` is an optional str -> str dict."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs, offset = [], 0
    for name in sorted(tensors):
        array = tensors[name]
        if name == "__metadata__" or array.dtype != np.float32:
            raise TypeError(f"tensor {name!r}: only float32 tensors can be written, got {array.dtype}")
        blob = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def _decode(raw, dtype, shape):
    """Bytes of one tensor -> float32 array of `shape`."""
    if dtype == "F32":
        values = np.frombuffer(raw, dtype="<f4")
    elif dtype == "F16":
        values = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    else:  # BF16: the upper half of a float32
        values = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    return values.astype(np.float32).reshape(shape)


def load(path):
    """Read `path`; returns (name -> float32 array, metadata dict or None). Raises ValueError if invalid."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: shorter than the 8-byte header length")
    (n,) = struct.unpack_from("<Q", data, 0)
    if n > MAX_HEADER_BYTES or 8 + n > len(data):
        raise ValueError(f"{path}: header length {n} does not fit the file ({len(data)} bytes)")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: header is not UTF-8 JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    buffer = data[8 + n:]
    metadata = header.pop("__metadata__", None)

    tensors, spans = {}, []
    for name, info in header.items():
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in DTYPE_SIZES:
            raise ValueError(f"{path}: tensor {name!r}: unsupported dtype {dtype!r}")
        if (not isinstance(shape, list) or len(shape) > MAX_RANK
                or not all(isinstance(x, int) and x >= 0 for x in shape)):
            raise ValueError(f"{path}: tensor {name!r}: bad shape {shape!r}")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(x, int) for x in offsets)
                or not 0 <= offsets[0] <= offsets[1] <= len(buffer)):
            raise ValueError(f"{path}: tensor {name!r}: bad data_offsets {offsets!r}")
        begin, end = offsets
        if end - begin != int(np.prod(shape, dtype=np.int64)) * DTYPE_SIZES[dtype]:
            raise ValueError(f"{path}: tensor {name!r}: {end - begin} bytes for shape {shape} {dtype}")
        tensors[name] = _decode(buffer[begin:end], dtype, shape)
        spans.append((begin, end, name))

    # The tensors must tile the buffer exactly: no overlaps, no holes.
    position = 0
    for begin, end, name in sorted(spans):
        if begin != position:
            raise ValueError(f"{path}: tensor {name!r} starts at {begin}, expected {position}")
        position = end
    if position != len(buffer):
        raise ValueError(f"{path}: {len(buffer) - position} bytes after the last tensor")
    return tensors, metadata
