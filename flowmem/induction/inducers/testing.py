"""Test doubles for induction: an `LLM` whose replies come from a queue."""

from __future__ import annotations

from pydantic import BaseModel

from flowmem.induction.base import LLMError, M, Parsed, Usage

__all__ = ["FakeLLM"]


class FakeLLM:
    """An `LLM` for tests: replies come from a queue (an exception is raised), prompts are kept.

    Each reply costs one call and no tokens; a queued `LLMError` is raised as the reply of one
    call (its `usage` says so unless it already says more).
    """

    model = "fake"

    def __init__(self, *replies: BaseModel | Exception) -> None:
        self.replies: list[BaseModel | Exception] = list(replies)
        self.prompts: list[str] = []

    def parse(self, prompt: str, output: type[M]) -> Parsed[M]:
        """Record the prompt and return the next queued reply, validated as `output`."""
        self.prompts.append(prompt)
        if not self.replies:
            raise LLMError("FakeLLM has no reply left", usage=Usage(calls=1))
        reply = self.replies.pop(0)
        if isinstance(reply, LLMError) and not reply.usage.calls:
            reply.usage = reply.usage + Usage(calls=1)
        if isinstance(reply, Exception):
            raise reply
        return Parsed(output.model_validate(reply.model_dump()), Usage(calls=1))
