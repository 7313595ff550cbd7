"""Loading a pgcld checkpoint directory back into a PGCL module (for parity data and self-tests).

Only checkpoints with the PGCL architecture are accepted: every MLP layer leaky_relu followed by a
BatchNorm, one shared slope, and the tensor names of the PGCL module.
"""

import hashlib
import json
import os

import torch

from . import safetensors_io
from .export import FORMAT, FORMAT_VERSION, mlp_layers
from .model import PGCL


def load_checkpoint(directory):
    """Read directory/config.json and directory/model.safetensors; returns (PGCL in eval mode, config dict).

    Raises ValueError when the files do not describe a PGCL checkpoint of this format.
    """
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    if config.get("format") != FORMAT or config.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{directory}: not a {FORMAT} version {FORMAT_VERSION} checkpoint")

    layers = config["semantic_mlp"]["layers"]
    slopes = {layer.get("negative_slope", 0.01) for layer in layers}
    if any(layer["activation"] != "leaky_relu" for layer in layers) or len(slopes) != 1:
        raise ValueError(f"{directory}: the MLP is not PGCL's (leaky_relu with one slope in every layer)")
    dims = config["dims"]
    model = PGCL(K=dims["K"], task=config["task"], D=dims["D"], d=dims["d"],
                 hidden=tuple(layer["out"] for layer in layers[:-1]), negative_slope=slopes.pop(),
                 batchnorm_eps=config["semantic_mlp"]["batchnorm_eps"])
    expected = {"layers": mlp_layers(model)[0],
                "attention": {"query": "query_fc", "key": "key_fc", "value": "value_fc",
                              "prototypes": "prototypes", "alpha": "alpha"},
                "head": {"linear": "head"}}
    found = {"layers": [dict(layer, negative_slope=model.semantic_mlp[1].negative_slope) for layer in layers],
             "attention": config["attention"], "head": config["head"]}
    if found != expected:
        raise ValueError(f"{directory}: tensor names or shapes differ from the PGCL module's")

    weights_path = os.path.join(directory, "model.safetensors")
    if "weights_sha256" in config:
        with open(weights_path, "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() != config["weights_sha256"]:
                raise ValueError(f"{weights_path}: SHA-256 differs from config.json weights_sha256")
    arrays, _ = safetensors_io.load(weights_path)
    state = {name: torch.from_numpy(array.copy()) for name, array in arrays.items()
             if not name.endswith("num_batches_tracked")}
    if "alpha" in state:
        state["alpha"] = state["alpha"].reshape(())  # the format allows () or (1)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [name for name in missing if not name.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise ValueError(f"{weights_path}: missing tensors {missing}, unexpected tensors {unexpected}")
    model.eval()
    return model, config
