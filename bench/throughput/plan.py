"""What the throughput bench measures (bench.py): the cells of a full and of a --quick run, the
diagnostic variants of pgcld, and the noise threshold above which a cell is marked as disturbed."""

NOISY = 0.2  # cores used by other processes during a window above which a cell is marked as disturbed

FULL = {
    "batches": [1, 8, 64, 256], "encodings": ["json", "b64"],
    "conns": {1: [1, 4, 16, 64], 8: [1, 4, 16, 64], 64: [1, 4, 16, 64], 256: [1, 4, 16]},
    "warmup": 1.0, "duration": 3.0, "min_responses": 20, "max_duration": 8.0,
    "peers": [1, 2], "ladder": [0.5, 0.7, 0.85], "ladder_duration": 4.0,
    "forward_seconds": 0.6, "ready_runs": 5, "profile_seconds": 5.0, "audit_rows": 200000,
    "diag_cells": [("json", 64, 4), ("b64", 64, 4), ("b64", 64, 16), ("json", 1, 16)],
    "cpu_only_cells": [("json", 64, 16), ("b64", 64, 16), ("json", 256, 16), ("b64", 256, 16)],
}
# Diagnostic variants of pgcld: options that change what the audit log does (on cfg["diag_cells"]),
# and a small request-body memory budget on the cells that hold the most body memory (its own cells).
MEMORY_CELLS = [("json", 64, 64), ("json", 256, 16), ("b64", 256, 16)]
SMALL_BODY_MEMORY = 8 << 20
DIAG = [("--store-inputs none", ["--store-inputs", "none"], None),
        ("--store-inputs none --synchronous NORMAL", ["--store-inputs", "none", "--synchronous", "NORMAL"], None),
        (f"--max-body-memory {SMALL_BODY_MEMORY}", ["--max-body-memory", str(SMALL_BODY_MEMORY)], MEMORY_CELLS)]
QUICK = {
    "batches": [1, 64], "encodings": ["json", "b64"],
    "conns": {1: [1, 16], 64: [4]},
    "warmup": 0.5, "duration": 1.5, "min_responses": 10, "max_duration": 4.0,
    "peers": [1], "ladder": [0.7], "ladder_duration": 2.0,
    "forward_seconds": 0.2, "ready_runs": 2, "profile_seconds": 0, "audit_rows": 30000,
    "diag_cells": [], "cpu_only_cells": [],
}
