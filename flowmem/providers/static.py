"""`StaticEmbedder`: a model2vec static model read from its directory, with numpy alone.

A model2vec model (distilled once from a sentence transformer, docs/usage.md "A static
embedder") is a token embedding matrix and a tokenizer: a text's vector is the mean of its
tokens' rows, L2-normalised. This module reads the directory `StaticModel.save_pretrained`
writes (`model.safetensors`, `tokenizer.json`, `config.json`) without model2vec, safetensors or
tokenizers, and embeds as `StaticModel.encode` does: the text cut to `max_length` × the median
token length in characters, tokenized without special tokens, cut to `max_length` tokens, the
unknown token dropped, the rest's rows averaged (a text with no known token: the zero vector).
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from flowmem.providers.static_files import FILES, ModelFileError, check_model, model_problem
from flowmem.providers.wordpiece import WordPiece

__all__ = ["FILES", "ModelFileError", "StaticEmbedder", "model_problem", "read_safetensors"]

Vectors = npt.NDArray[np.float32]

DEFAULT_MAX_LENGTH = 512
"""model2vec's `max_length` when config.json names none."""

_DTYPES = {"F16": "<f2", "F32": "<f4", "F64": "<f8"}
"""safetensors dtypes read, as numpy little-endian dtypes."""


def read_safetensors(data: bytes) -> dict[str, npt.NDArray[Any]]:
    """The tensors of a safetensors file's bytes: an 8-byte little-endian header length, a JSON
    header (name -> dtype, shape, data_offsets into the buffer after it), then the buffer.

    Raises:
        ValueError: if the header is cut, not JSON, or names a dtype, shape or offsets that do
            not fit the buffer.
    """
    if len(data) < 8:
        raise ValueError("safetensors file shorter than its 8-byte header length")
    (size,) = struct.unpack("<Q", data[:8])
    if size > len(data) - 8:
        raise ValueError(f"safetensors header of {size} bytes runs past the file ({len(data)} bytes)")
    try:
        header = json.loads(data[8 : 8 + size])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"safetensors header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError("safetensors header is not a JSON object")
    buffer = memoryview(data)[8 + size :]
    tensors: dict[str, npt.NDArray[Any]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        tensors[name] = _tensor(name, info, buffer)
    return tensors


def _tensor(name: str, info: Any, buffer: memoryview) -> npt.NDArray[Any]:
    try:
        dtype, shape, (start, end) = (
            np.dtype(_DTYPES[info["dtype"]]),
            list(info["shape"]),
            info["data_offsets"],
        )
    except (KeyError, TypeError, ValueError):
        kind = info.get("dtype") if isinstance(info, dict) else info
        raise ValueError(
            f"safetensors tensor {name!r}: dtype {kind!r} not one of {sorted(_DTYPES)}"
        ) from None
    count = int(np.prod(shape, dtype=np.int64))
    if not 0 <= start <= end <= len(buffer) or end - start != count * dtype.itemsize:
        raise ValueError(f"safetensors tensor {name!r}: offsets {start}..{end} do not hold shape {shape}")
    return np.frombuffer(buffer[start:end], dtype=dtype).reshape(shape)


class StaticEmbedder:
    """Embeds texts with a model2vec static model: the mean of its tokens' vectors, normalised.

    Offline and deterministic, at thousands of texts per second on one core, with similarity
    learned by the transformer it was distilled from (paraphrases near, unrelated texts apart).
    Its `name` carries a content hash of the model's files, so vectors stored with one model are
    never mixed with another's.
    """

    VERSION = 1
    """Bumped whenever the vectors this class computes from the same files would change."""

    def __init__(self, path: str | Path) -> None:
        """Load the model in `path`.

        Raises:
            ModelFileError: naming the directory and what is wrong with it.
        """
        folder = Path(path)
        check_model(folder)
        raw = {
            name: (folder / name).read_bytes()
            for name in (*FILES, "config.json")
            if (folder / name).is_file()
        }
        try:
            matrix, self._tokenizer, max_length = _parse(raw)
        except ValueError as e:
            raise ModelFileError(f"{str(folder)!r}: {e}") from None
        self._matrix = matrix
        self._max_tokens = max_length
        median = int(np.median([len(token) for token in self._tokenizer.vocab]))
        self._max_chars = None if max_length is None else max_length * median
        digest = hashlib.sha256()
        for name in sorted(raw):  # every file the vectors depend on
            digest.update(f"{name}\0{len(raw[name])}\0".encode())
            digest.update(raw[name])
        self._name = f"static-v{self.VERSION}-{digest.hexdigest()[:16]}-{matrix.shape[1]}"

    @property
    def name(self) -> str:
        """`static-v<version>-<first 16 hex digits of the files' SHA-256>-<dim>`."""
        return self._name

    @property
    def dim(self) -> int:
        """Vector size: the model's."""
        return int(self._matrix.shape[1])

    def token_ids(self, text: str) -> list[int]:
        """The tokens a text's vector averages (model2vec's truncations, `[UNK]` dropped)."""
        ids = self._tokenizer.ids(text if self._max_chars is None else text[: self._max_chars])
        if self._max_tokens is not None:
            ids = ids[: self._max_tokens]
        return [i for i in ids if i != self._tokenizer.unk_id]

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed texts into L2-normalised float32 rows; a text with no known token is zero."""
        if isinstance(texts, str):
            raise ValueError("Expected a sequence of texts, got a single string.")
        ids = [self.token_ids(t) for t in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        rows = [i for i, row in enumerate(ids) if row]
        if rows:
            flat = np.fromiter((t for i in rows for t in ids[i]), dtype=np.int64)
            counts = np.array([len(ids[i]) for i in rows])
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
            out[rows] = np.add.reduceat(self._matrix[flat], starts, axis=0) / counts[:, None]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


def _parse(raw: dict[str, bytes]) -> tuple[npt.NDArray[np.float32], WordPiece, int | None]:
    """The embedding matrix (float32), the tokenizer and the token limit from the files' bytes."""
    tensors = read_safetensors(raw["model.safetensors"])
    if set(tensors) - {"embeddings"}:
        extra = sorted(set(tensors) - {"embeddings"})
        raise ValueError(
            f"model.safetensors holds {extra}: vocabulary-quantized or weighted models are not read"
        )
    if "embeddings" not in tensors or tensors["embeddings"].ndim != 2:
        raise ValueError("model.safetensors holds no 2-D 'embeddings' tensor")
    try:
        tokenizer = WordPiece(json.loads(raw["tokenizer.json"]))
        config = json.loads(raw.get("config.json", b"{}"))
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(
            f"tokenizer.json or config.json is not a tokenizer's or model's JSON: {e!r}"
        ) from None
    matrix = tensors["embeddings"].astype(np.float32)
    ids = tokenizer.vocab.values()
    if max(ids) >= len(matrix) or min(ids) < 0:
        raise ValueError(f"tokenizer ids reach {max(ids)} but the matrix has {len(matrix)} rows")
    max_length = (
        config.get("max_length", DEFAULT_MAX_LENGTH) if isinstance(config, dict) else DEFAULT_MAX_LENGTH
    )
    return matrix, tokenizer, None if max_length is None else int(max_length)
