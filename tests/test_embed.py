from __future__ import annotations

import subprocess
import sys

import numpy as np

from flowmem.induction import Embedder, HashingEmbedder

TEXTS = ["Forward the latest email about the budget to olga", "Cancel my next meeting with Ada", ""]


def test_unit_vectors_and_lexical_similarity() -> None:
    e = HashingEmbedder(dim=256)
    assert isinstance(e, Embedder) and e.name == "hashing-v1-256"
    v = e.embed(TEXTS)
    assert v.shape == (3, 256) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v[:2], axis=1), 1.0) and not v[2].any()
    near = e.embed(["forward the newest email about the budget to Olga"])[0]
    assert float(near @ v[0]) > 0.7 > float(near @ v[1])
    assert e.embed([]).shape == (0, 256)


def test_same_text_same_vector_in_another_process() -> None:
    code = (
        "import sys, numpy as np; from flowmem.induction import HashingEmbedder; "
        f"np.save(sys.stdout.buffer, HashingEmbedder().embed({TEXTS!r}))"
    )
    env = {"PYTHONHASHSEED": "12345"}
    import io
    import os

    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, check=True, env={**os.environ, **env}
    )
    theirs = np.load(io.BytesIO(out.stdout))
    assert np.array_equal(theirs, HashingEmbedder().embed(TEXTS))
