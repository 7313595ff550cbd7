"""PGCL in PyTorch and the writer of pgcld checkpoints (docs/checkpoint-format.md).

model: the PGCL module; losses: the training objective; trainer: the training loop; probe: the
logistic-regression head; calibrate: decision policies; fit: the `fit` command (train, calibrate,
export); evaluate, report, metrics: evaluation; examples: request files; export: config.json +
model.safetensors and the decision policy; load: reading a checkpoint back; safetensors_io: the file
format with numpy only; __main__: the command line (`python3 -m train --help`); selftest: checks of
the generated fixtures and the committed models. See train/README.md.
"""

from .export import decide, export_checkpoint
from .load import load_checkpoint
from .model import PGCL

__all__ = ["PGCL", "decide", "export_checkpoint", "load_checkpoint"]
