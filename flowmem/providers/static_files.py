"""What a static model's directory must hold, checked with `stat`s alone: so that opening an
agent's memory (`jobs.factories.check_store`) refuses a wrong `FLOWMEM_EMBEDDER_PATH` at once
without importing the embedder (`flowmem.providers.static`, which loads numpy)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["FILES", "ModelFileError", "check_model", "model_problem"]

FILES = ("model.safetensors", "tokenizer.json")
"""What a model directory must hold (`config.json` is optional, as for model2vec)."""


class ModelFileError(ValueError):
    """A static model's directory is missing, incomplete or unreadable; the message names it."""


def model_problem(path: str | Path) -> str | None:
    """Why `path` cannot be a static model's directory, as the end of a line that names the
    path ("is not a directory: ..."), or None. Only `stat`s."""
    folder = Path(path)
    if not folder.is_dir():
        return "is not a directory: name a model2vec model's directory"
    missing = [name for name in FILES if not (folder / name).is_file()]
    if missing:
        return f"has no {' nor '.join(missing)}: name a model2vec model's directory"
    return None


def check_model(path: str | Path) -> None:
    """Refuse a directory that holds no static model (`model_problem`).

    Raises:
        ModelFileError: naming the directory and what is wrong with it.
    """
    if problem := model_problem(path):
        raise ModelFileError(f"{str(Path(path))!r} {problem}")
