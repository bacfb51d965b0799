"""A search's hits as JSON, byte for byte as `list[SearchHit]` writes them, without building
and serializing each served version's view on every search.

A hit's JSON is its version's fields (`WorkflowOut`), its two scores and its prompt text
(`render_workflow`). Only the scores change from search to search: the rest is written once
per served `Workflow` object and kept (the served index keeps each version's object while it
serves it, so the same object comes back search after search; a reload makes new ones). On
a 2-core machine that is ~90 µs of a search's ~1.2 ms at three hits (model construction,
rendering and serialization), and what is left is joining bytes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from pydantic_core import to_json

from flowmem.induction.render.render import render_workflow
from flowmem.models import Workflow
from flowmem.retrieval.search import Hit
from flowmem.server.payloads import WorkflowOut

__all__ = ["HitsJson"]

CACHED = 4_096
"""Served versions whose JSON is kept (least recently served dropped first): a few MB at most,
and more than a search route's working set of distinct hits between two reloads."""


class HitsJson:
    """Writes hits as `TypeAdapter(list[SearchHit]).dump_json([SearchHit.of_hit(h) ...])` does."""

    def __init__(self, size: int = CACHED) -> None:
        self.size = size
        self._parts: OrderedDict[int, tuple[Workflow, bytes, bytes]] = OrderedDict()
        self._lock = threading.Lock()
        self.misses = 0
        """Versions written in full (not found in the cache)."""

    def dump(self, hits: Sequence[Hit]) -> bytes:
        """The hits' JSON array."""
        out = []
        for h in hits:
            head, text = self._parts_of(h.workflow)
            # SearchHit's fields are WorkflowOut's, then score, similarity and text, in order.
            out.append(
                b"".join(
                    (
                        head,
                        b',"score":',
                        to_json(round(float(h.score), 4)),
                        b',"similarity":',
                        to_json(round(float(h.similarity), 4)),
                        b',"text":',
                        text,
                        b"}",
                    )
                )
            )
        return b"[" + b",".join(out) + b"]"

    def _parts_of(self, w: Workflow) -> tuple[bytes, bytes]:
        """A version's fields as a JSON object without its closing brace, and its prompt text
        as a JSON string."""
        key = id(w)
        with self._lock:
            found = self._parts.get(key)
            if found is not None and found[0] is w:  # the entry holds `w`: its id is not reused
                self._parts.move_to_end(key)
                return found[1], found[2]
        self.misses += 1
        fields = WorkflowOut.of(w).model_dump_json()
        parts = (fields.encode()[:-1], to_json(render_workflow(w, description=True)))
        with self._lock:
            self._parts[key] = (w, *parts)
            while len(self._parts) > self.size:
                self._parts.popitem(last=False)
        return parts
