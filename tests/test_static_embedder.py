"""The `static` embedder on a tiny model2vec directory written here: tokenization, pooling,
normalisation, its name, and the errors a wrong path or file gives.

The expected token ids below are what `tokenizers` 0.22.2 gives for the same `tokenizer.json`,
and the truncated vectors what model2vec 0.10.0's `StaticModel.encode` gives for the same
directory (both run once, outside the project: flowmem depends on neither).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from pydantic import ValidationError

from flowmem.cli.errors import explain, path_problems
from flowmem.jobs.factories import embedder_from
from flowmem.providers.static import ModelFileError, StaticEmbedder, read_safetensors
from flowmem.retrieval.embed import Embedder
from flowmem.settings import Settings

VOCAB = ["[PAD]", "[UNK]", "the", "cafe", "un", "##believ", "##able", "e", "-", "mail", ".", ",", "!"]
VOCAB += ["οδο", "##σ", "東", "京", "hi", "##s"]
MATRIX = np.arange(len(VOCAB) * 4, dtype=np.float32).reshape(len(VOCAB), 4) % 7 - 3
"""Distinct small integer rows: every mean is exact in float16 and float32."""


def tokenizer_json(**model: Any) -> dict[str, Any]:
    special = [
        {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
        for i, t in enumerate(VOCAB[:2])
    ]
    return {
        "version": "1.0",
        "added_tokens": [{**t, "special": True} for t in special],
        "normalizer": {
            "type": "BertNormalizer",
            "clean_text": True,
            "handle_chinese_chars": True,
            "strip_accents": None,
            "lowercase": True,
        },
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "model": {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 12,
            "vocab": {t: i for i, t in enumerate(VOCAB)},
        }
        | model,
    }


def safetensors(tensors: dict[str, npt.NDArray[Any]]) -> bytes:
    """The safetensors layout: header length (u64 little-endian), JSON header, raw buffer."""
    header, buffer = {}, b""
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        code = {"<f2": "F16", "<f4": "F32", "<f8": "F64", "<i8": "I64"}[array.dtype.str]
        header[name] = {
            "dtype": code,
            "shape": list(array.shape),
            "data_offsets": [len(buffer), len(buffer) + len(data)],
        }
        buffer += data
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + buffer


def write_model(
    folder: Path,
    matrix: npt.NDArray[Any] = MATRIX,
    *,
    config: dict[str, Any] | None = None,
    tokenizer: dict[str, Any] | None = None,
    extra: dict[str, npt.NDArray[Any]] | None = None,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.safetensors").write_bytes(safetensors({"embeddings": matrix, **(extra or {})}))
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer or tokenizer_json()))
    (folder / "config.json").write_text(
        json.dumps({"model_type": "model2vec", "normalize": True} | (config or {}))
    )
    return folder


@pytest.fixture
def model(tmp_path: Path) -> StaticEmbedder:
    return StaticEmbedder(write_model(tmp_path / "model"))


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        # Accents stripped, lower-cased; "—" is punctuation outside the vocabulary: [UNK].
        ("The café — unbelievable!", [2, 3, 1, 4, 5, 6, 12]),
        # Punctuation splits words; "his" is "hi" + "##s".
        ("E-mail, HIS", [7, 8, 9, 11, 17, 18]),
        # One character at a time: the last Σ lower-cases to σ, not to a final ς.
        ("ΟΔΟΣ", [13, 14]),
        # CJK ideographs are words of their own (`tokenizers`' ranges: U+2B820 is not one).
        ("東京", [15, 16]),
        ("the\U0002b920 the\U0002b820", [2, 1, 1]),
        # ASCII symbols are punctuation too, in a text that is not ASCII.
        ("é the$the", [7, 2, 1, 2]),
        # A word with a part no piece matches is one [UNK], whatever matched before.
        ("unbeliev unbelievabl", [4, 5, 1]),
        # NUL, format and private-use characters dropped, tab made a space; an unassigned code
        # point stays (`tokenizers` knows no such category), so its word is [UNK].
        ("the\x00\tcafe\u200b.", [2, 3, 10]),
        ("the\ue000 cafe the\u0378", [2, 3, 1]),
        # Added tokens are matched in the raw text and kept whole.
        ("[PAD] the [UNK]", [0, 2, 1]),
        # Longer than max_input_chars_per_word (12): [UNK] without trying.
        ("unbelievables unbelievable", [1, 4, 5, 6]),
        ("", []),
    ],
)
def test_tokens_are_those_of_tokenizers(model: StaticEmbedder, text: str, ids: list[int]) -> None:
    assert model._tokenizer.ids(text) == ids


def test_a_vector_is_the_normalised_mean_of_its_known_tokens(model: StaticEmbedder) -> None:
    texts = ["The café — unbelievable!", "E-mail, HIS", "— ??", ""]
    vectors = model.embed(texts)
    assert vectors.shape == (4, 4) and vectors.dtype == np.float32 and isinstance(model, Embedder)
    mean = MATRIX[[2, 3, 4, 5, 6, 12]].mean(axis=0)  # [UNK] left out, as model2vec does
    assert np.allclose(vectors[0], mean / np.linalg.norm(mean))
    assert np.allclose(vectors[0], [0.680414, -0.408248, -0.544331, 0.272166])  # model2vec's
    assert np.isclose(np.linalg.norm(vectors[1]), 1.0)
    assert not vectors[2].any() and not vectors[3].any()  # nothing known: the zero vector
    assert np.array_equal(model.embed(["E-mail, HIS"])[0], vectors[1])  # batching changes nothing
    assert model.embed([]).shape == (0, 4)
    with pytest.raises(ValueError, match="single string"):
        model.embed("E-mail")


def test_max_length_cuts_characters_then_tokens(tmp_path: Path) -> None:
    model = StaticEmbedder(write_model(tmp_path / "m", config={"max_length": 3}))
    # The median token length is 3, so the text is cut to 9 characters ("the cafe "), then to
    # 3 tokens ("e-e-e" gives 5); model2vec's vectors.
    assert model.token_ids("the cafe unbelievable") == [2, 3]
    assert np.allclose(model.embed(["e-e-e"])[0], [-0.800641, -0.320256, 0.160128, -0.480384])
    unlimited = StaticEmbedder(write_model(tmp_path / "n", config={"max_length": None}))
    assert unlimited.token_ids("the cafe unbelievable") == [2, 3, 4, 5, 6]


def test_float16_matrices_are_read(tmp_path: Path) -> None:
    half = StaticEmbedder(write_model(tmp_path / "h", MATRIX.astype(np.float16)))
    full = StaticEmbedder(write_model(tmp_path / "f"))
    assert np.array_equal(half.embed(["E-mail, HIS"]), full.embed(["E-mail, HIS"]))


def test_the_name_carries_a_hash_of_the_files(tmp_path: Path, model: StaticEmbedder) -> None:
    again = StaticEmbedder(write_model(tmp_path / "again"))
    other = StaticEmbedder(write_model(tmp_path / "other", MATRIX * 2))
    longer = StaticEmbedder(write_model(tmp_path / "longer", config={"max_length": 3}))
    assert model.name == again.name and model.name.startswith("static-v1-") and model.name.endswith("-4")
    assert len({model.name, other.name, longer.name}) == 3
    assert model.dim == 4


def test_the_settings_select_it(tmp_path: Path) -> None:
    folder = write_model(tmp_path / "model")
    settings = Settings(db=str(tmp_path / "db"), embedder="static", embedder_path=str(folder))
    embedder = embedder_from(settings)
    assert embedder.name == StaticEmbedder(folder).name
    assert np.array_equal(embedder.embed(["the cafe"]), StaticEmbedder(folder).embed(["the cafe"]))
    with pytest.raises(ValidationError, match="FLOWMEM_EMBEDDER=static needs the directory"):
        Settings(db=str(tmp_path / "db"), embedder="static")


def test_a_missing_path_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    write_model(tmp_path / "half").joinpath("tokenizer.json").unlink()
    expected = {
        tmp_path / "nowhere": "is not a directory",
        tmp_path / "empty": "has no model.safetensors nor tokenizer.json",
        tmp_path / "half": "has no tokenizer.json",
    }
    for path, why in expected.items():
        with pytest.raises(ModelFileError, match=why):
            StaticEmbedder(path)
        settings = Settings(db=str(tmp_path / "db"), embedder="static", embedder_path=str(path))
        assert (
            path_problems(settings)
            == f"FLOWMEM_EMBEDDER_PATH={str(path)!r} {why}: name a model2vec model's directory"
        )
    assert path_problems(Settings(db=str(tmp_path / "db"), embedder_path=str(tmp_path / "half"))) is not None


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"model.safetensors": b"\x05"}, "shorter than its 8-byte header length"),
        ({"model.safetensors": struct.pack("<Q", 99) + b"{}"}, "runs past the file"),
        ({"model.safetensors": struct.pack("<Q", 2) + b"{x"}, "header is not JSON"),
        (
            {"model.safetensors": safetensors({"embeddings": MATRIX.astype(np.int64)})},
            "dtype 'I64' not one of",
        ),
        (
            {"model.safetensors": safetensors({"embeddings": MATRIX[:5]})},
            "tokenizer ids reach 18 but the matrix has 5",
        ),
        ({"model.safetensors": safetensors({"other": MATRIX})}, r"holds \['other'\]"),
        ({"tokenizer.json": b"not json"}, "is not a tokenizer's or model's JSON"),
        (
            {"tokenizer.json": json.dumps(tokenizer_json(type="BPE")).encode()},
            "BPE/BertNormalizer/BertPreTokenizer",
        ),
        ({"tokenizer.json": json.dumps(tokenizer_json(unk_token="<unk>")).encode()}, "'<unk>' is not in"),
    ],
)
def test_an_unreadable_model_is_one_line_naming_it(
    tmp_path: Path, change: dict[str, bytes], why: str
) -> None:
    folder = write_model(tmp_path / "model")
    for name, data in change.items():
        (folder / name).write_bytes(data)
    with pytest.raises(ModelFileError, match=why) as raised:
        StaticEmbedder(folder)
    line = explain(raised.value)
    assert (
        line is not None and line.startswith(f"FLOWMEM_EMBEDDER_PATH={str(folder)!r}: ") and "\n" not in line
    )


def test_safetensors_offsets_must_hold_the_shape() -> None:
    raw = safetensors({"a": MATRIX[:2], "b": MATRIX[2:5].astype(np.float64)})
    tensors = read_safetensors(raw)
    assert np.array_equal(tensors["a"], MATRIX[:2]) and np.array_equal(tensors["b"], MATRIX[2:5])
    size = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + size])
    header["a"]["shape"] = [3, 4]
    bad = json.dumps(header).encode()
    with pytest.raises(ValueError, match="do not hold shape"):
        read_safetensors(struct.pack("<Q", len(bad)) + bad + raw[8 + size :])
