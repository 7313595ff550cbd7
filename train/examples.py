"""`python3 -m train examples`: example /v1/score request files built from labelled rows.

Each file is {"model": MODEL, "items": [{"id": <the row's text truncated to --id-bytes bytes on a UTF-8
boundary>, "embedding": [D numbers]}, ...]}; rows are drawn with a seeded generator among rows with a
non-zero embedding, and every file mixes labels (round-robin over the labels). Numbers are written with 9
significant digits, which reproduces each float32 exactly.
"""

import json
import os

import numpy as np

from . import data


def truncate_utf8(text, limit):
    """The longest prefix of `text` whose UTF-8 encoding has at most `limit` bytes."""
    raw = text.encode("utf-8")[:limit]
    return raw.decode("utf-8", errors="ignore")


def request_text(model, items):
    """The JSON text of one request; embeddings as %.9g numbers."""
    parts = []
    for item_id, embedding in items:
        numbers = ",".join(format(float(v), ".9g") for v in embedding)
        parts.append('{"id":' + json.dumps(item_id, ensure_ascii=False) + ',"embedding":[' + numbers + "]}")
    return '{"model":' + json.dumps(model) + ',"items":[' + ",".join(parts) + "]}\n"


def run_examples_command(args):
    rows = data.read_tsv(args.tsv)
    X = data.read_embeddings(args.emb)
    if len(rows) != len(X):
        raise ValueError(f"{args.tsv}: {len(rows)} rows for {len(X)} embeddings")
    y = np.array([row[0] for row in rows])
    usable = (np.linalg.norm(X, axis=1) > 0) & np.array([row[2].strip() != "" for row in rows])
    rng = np.random.default_rng(args.seed)
    pools = {k: list(rng.permutation(np.flatnonzero(usable & (y == k)))) for k in np.unique(y)}
    classes = sorted(pools)
    os.makedirs(args.out_dir, exist_ok=True)
    written = []
    for n in range(1, args.files + 1):
        chosen = []
        for j in range(args.items):
            k = classes[(n + j) % len(classes)]
            chosen.append(int(pools[k].pop()))
        items = [(truncate_utf8(rows[i][2], args.id_bytes), X[i]) for i in chosen]
        path = os.path.join(args.out_dir, f"{args.prefix}-{n}.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(request_text(args.model, items))
        written.append({"file": path, "rows": chosen, "labels": [rows[i][1] for i in chosen]})
    print(json.dumps(written))
