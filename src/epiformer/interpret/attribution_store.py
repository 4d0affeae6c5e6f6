"""The attributions file (`attributions.safetensors`), written by the attributions rule, read by the motifs rule.

Tensors, N explained pairs in the order they were chosen (best score first):
- `pair_id` int64 [N], `score` float32 [N] (the model's predicted probability);
- `{enhancer,promoter}_sequence` uint8 [N, L/2]: the windows' one-hot, packed as in the shards
  (4 bits a base, `sequence.onehot.unpack`);
- `{enhancer,promoter}_hypothetical` float16 [N, L, 4]: hypothetical contributions to the logit
  (`epiformer.interpret.attributions`), channels A, C, G, T.

Metadata: `method`, `steps`, and `of: logit`. Kept apart from `epiformer.interpret.attributions` so that
reading it needs numpy and safetensors only, not PyTorch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from epiformer.constants import ELEMENTS
from epiformer.io.files import atomic_write


def write_attributions(path: str | Path, pairs: pd.DataFrame, packed: dict, hypothetical: dict, metadata: dict):
    """Write the file (module docstring) atomically; `pairs` has pair_id and score, `packed` the packed windows."""
    from safetensors.numpy import save_file

    tensors = {
        "pair_id": pairs["pair_id"].to_numpy(np.int64),
        "score": pairs["score"].to_numpy(np.float32),
        **{f"{element}_sequence": np.ascontiguousarray(packed[element]) for element in ELEMENTS},
        **{f"{element}_hypothetical": hypothetical[element].astype(np.float16) for element in ELEMENTS},
    }
    metadata = {"of": "logit", **{key: str(value) for key, value in metadata.items()}}
    atomic_write(path, lambda temporary: save_file(tensors, str(temporary), metadata=metadata))


def read_attributions(path: str | Path) -> dict[str, np.ndarray]:
    """The file's tensors, with each element's one-hot windows unpacked as `{element}_onehot` uint8 [N, L, 4]."""
    from safetensors.numpy import load_file

    from epiformer.sequence.onehot import unpack

    tensors = load_file(str(path))
    for element in ELEMENTS:
        width = tensors[f"{element}_hypothetical"].shape[1]
        tensors[f"{element}_onehot"] = unpack(tensors[f"{element}_sequence"], width)
    return tensors
