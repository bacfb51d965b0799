"""Do induced workflows read as procedures? Counts over what the rule inducer makes of each
shared set's training runs (issue 38's table).

Per set (the splits of `bench.eval_sets`): workflows; those with 3 or more consecutive steps
of one action (a repeat left unrolled); those with a placeholder numbered `_3` or more, and
the highest number; loops; pitfalls; names of more than 5 words, with a counting word, and
names shared within the namespace. `--show N` prints N workflows of each set as agents get them.

Usage: python bench/procedures.py [DATA_DIR] [--json] [--show N]
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.render.render import render_workflow
from flowmem.interchange import Rejection, read_trajectories
from flowmem.jobs.evaluate import induced_store
from flowmem.models import Trajectory, Workflow
from flowmem.settings import Settings

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.eval_sets import SPLITS, agent_split
from bench.paths import SHARED_DATA

__all__ = ["COUNTING", "main", "procedure_figures"]

COUNTING = frozenset(
    "once twice thrice times one two three four five six seven eight nine ten eleven twelve many".split()
)
"""Words that count calls: no name says how often a run did something."""

_NUMBERED = re.compile(r"\{[a-z_][a-z0-9_]*?_(\d+)\}")


def _unrolled(w: Workflow, at_least: int = 3) -> bool:
    """Whether `at_least` consecutive steps call one action outside a loop."""
    run, last = 0, None
    for s in w.steps:
        key = (s.action, s.repeat)
        run = run + 1 if key == last and s.repeat is None else 1
        last = key
        if run >= at_least:
            return True
    return False


def _name_words(name: str) -> list[str]:
    return [w for w in re.split(r"[_\s]+", name.lower()) if w]


def procedure_figures(workflows: Sequence[Workflow]) -> dict[str, object]:
    """The counts of the module docstring over one namespace's workflows."""
    numbers = [int(n) for w in workflows for n in _NUMBERED.findall(render_workflow(w))]
    names = Counter(w.name for w in workflows)
    return {
        "workflows": len(workflows),
        "unrolled_3": sum(_unrolled(w) for w in workflows),
        "numbered_3": sum(any(int(n) >= 3 for n in _NUMBERED.findall(render_workflow(w))) for w in workflows),
        "highest_number": max(numbers, default=0),
        "with_loops": sum(any(s.repeat is not None for s in w.steps) for w in workflows),
        "pitfalls": sum(len(w.pitfalls) for w in workflows),
        "long_names": sum(len(_name_words(w.name)) > 5 for w in workflows),
        "counting_names": sum(bool(COUNTING & set(_name_words(w.name))) for w in workflows),
        "shared_names": sum(n for n in names.values() if n > 1),
    }


def training_sets(data: Path, settings: Settings) -> dict[str, list[Trajectory]]:
    """Each shared set's training runs (those present)."""
    out: dict[str, list[Trajectory]] = {}
    for name, (file, is_train) in SPLITS.items():
        if (data / file).exists():
            runs = [t for t in read_trajectories(data / file, settings) if not isinstance(t, Rejection)]
            out[name] = [t for t in runs if is_train(t)]
    agents = agent_split(data, settings)
    if agents is not None:
        out["tau2_agents"] = agents[0]
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = [a for a in argv if not a.startswith("--")]
    show = int(argv[argv.index("--show") + 1]) if "--show" in argv else 0
    data = Path(args[0]) if args and args[0] != str(show) else SHARED_DATA
    settings = Settings()
    results: dict[str, dict[str, object]] = {}
    for name, train in training_sets(data, settings).items():
        with induced_store(train, RuleInducer(), settings=settings) as (_, induced):
            result = induced.result
        results[name] = {**procedure_figures(result.workflows), "rejected": dict(result.failed_reasons)}
        for w in result.workflows[:show]:
            print(f"--- {name}\n{render_workflow(w)}\n")
    if "--json" in argv:
        print(json.dumps(results))
        return 0
    for name, figures in results.items():
        print(name, json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
