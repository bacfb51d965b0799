"""`python -m bench`: the performance figures (bench/run.py), or one benchmark by its name.

Usage: python -m bench [--quick | --full] [--json] [--out FILE]   (what `make bench` runs)
       python -m bench NAME [ARGS]                                (bench/NAME.py, e.g. scaling)
       python -m bench --list                                     (the names)
"""

from __future__ import annotations

import importlib
import sys

from bench.paths import BENCH

__all__ = ["benchmarks", "main"]


def benchmarks() -> list[str]:
    """The benchmarks that run by name: every module of bench/ with a `main(argv)`."""
    return sorted(
        path.stem
        for path in BENCH.glob("*.py")
        if not path.stem.startswith("_") and "\ndef main(argv" in path.read_text(encoding="utf-8")
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--list"]:
        print("\n".join(benchmarks()))
        return 0
    if argv and not argv[0].startswith("-"):
        name, rest = argv[0], argv[1:]
        if name not in benchmarks():
            print(
                f"python -m bench: no benchmark {name!r} (python -m bench --list names them)", file=sys.stderr
            )
            return 2
        found: int | None = importlib.import_module(f"bench.{name}").main(rest)
        return int(found or 0)
    from bench.run import main as run

    return run(argv)


if __name__ == "__main__":
    raise SystemExit(main())
