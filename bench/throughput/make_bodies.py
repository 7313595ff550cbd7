"""Request bodies for the throughput bench: POST /v1/score with B items, JSON arrays or base64.

    python3 bench/throughput/make_bodies.py OUT_DIR [--batches 1,8,64,256] [--variants 4] [--dim 1024]

Writes OUT_DIR/{json,b64}-B{B}-{k}.json, k < variants, each with its own random embeddings
(standard normal / sqrt(D), float32) and item ids. JSON numbers are what a Python client sends for a
float32 numpy embedding: json.dumps(z.tolist()), the shortest repr of each float32 value widened to a
double (typically 17 significant digits, ~20 bytes per number). base64 is of the 1024 float32
values, little-endian. Prints one JSON line with the mean body size per file kind.
"""

import argparse
import base64
import json
import os

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batches", default="1,8,64,256")
    ap.add_argument("--variants", type=int, default=4)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--model", default=None, help="add \"model\": NAME to every body")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sizes = {}
    for B in (int(b) for b in args.batches.split(",")):
        for k in range(args.variants):
            rng = np.random.default_rng(1000 * B + k)
            Z = (rng.standard_normal((B, args.dim)) / np.sqrt(args.dim)).astype(np.float32)
            for enc in ("json", "b64"):
                if enc == "json":
                    items = [{"id": f"bench-{B}-{k}-{i}", "embedding": z.tolist()} for i, z in enumerate(Z)]
                else:
                    items = [{"id": f"bench-{B}-{k}-{i}",
                              "embedding_b64": base64.b64encode(z.astype("<f4").tobytes()).decode("ascii")}
                             for i, z in enumerate(Z)]
                body = {"items": items}
                if args.model:
                    body["model"] = args.model
                data = json.dumps(body).encode("utf-8")
                with open(os.path.join(args.out, f"{enc}-B{B}-{k}.json"), "wb") as f:
                    f.write(data)
                sizes.setdefault(f"{enc}-B{B}", []).append(len(data))
    print(json.dumps({key: int(np.mean(v)) for key, v in sizes.items()}))


if __name__ == "__main__":
    main()
