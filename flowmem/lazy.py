"""A package's public names imported when first used (`lazy_exports`): so that importing
`flowmem` or `flowmem.agents` loads only what the caller touches."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, home: Mapping[str, str], names: Sequence[str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's module `__getattr__` and `__dir__` that import each public name of `home`
    (name -> the module that defines it) when first used and then keep it in the package's
    `namespace`, so later lookups are plain module attributes."""

    def getattr_(name: str) -> Any:
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home[name]), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *names})

    return getattr_, dir_
