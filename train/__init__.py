"""PGCL in PyTorch and the writer of pgcld checkpoints (docs/checkpoint-format.md).

model: the PGCL module; export: config.json + model.safetensors and the decision policy;
load: reading a checkpoint back; safetensors_io: the file format with numpy only;
__main__: the command line (`python3 -m train --help`); selftest: checks of the generated fixtures.
"""

from .export import decide, export_checkpoint
from .load import load_checkpoint
from .model import PGCL

__all__ = ["PGCL", "decide", "export_checkpoint", "load_checkpoint"]
