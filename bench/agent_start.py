"""Agent start: import `flowmem.agents`, open a `WorkflowMemory` and record a first step, in
fresh processes, this checkout's code and another revision's side by side in one run.

Each probe is a new Python process that imports `flowmem.agents`, opens a memory on an
existing local store with the default settings (no FLOWMEM_* variable) and records one run of
one step; the figure is the wall time from starting the process to that run being handed to
the writer (the process says so on stdout), the median of `--runs` probes. The revision to
compare with (`--before`, by default 883ba40: the commit before the change that moved LanceDB's
import off the agent's thread) is its `flowmem/` from `git archive`, run by the same
interpreter; the two alternate, so a busy moment of the machine falls on both. With
`--to-exit` each probe also runs to its normal exit, which stores the run (the process waits
at exit for the writer, so the exit still pays LanceDB's import when the process ends at once);
without it the probe is killed once it has recorded, as `python -m bench` runs it.

Usage: python bench/agent_start.py [--before REV | --before none] [--runs N] [--to-exit] [--json]
       [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.paths import REPO

__all__ = ["BEFORE", "agent_start", "emitted", "first_line", "main", "probe"]

BEFORE = "883ba40"
"""The revision compared with by default: main before the agent's thread stopped importing
LanceDB (issue 41); its `import flowmem.agents` took 1.9–2.3 s on the developers' machine."""

AGENT = """
import sys
import flowmem.agents
from flowmem.agents import WorkflowMemory

memory = WorkflowMemory.open(sys.argv[1])
with memory.record("forward the invoice about the Q3 report to ana") as run:
    run.step("mail.search", {"query": "invoice Q3"}, observation="1 mail")
    run.finish(success=True)
print("recorded", flowmem.agents.__file__, flush=True)
"""
"""The agent of a probe: import, open, one recorded step; the exit stores the run."""


def _env(code: Path) -> dict[str, str]:
    """The probe's environment: `code` first on the path, no FLOWMEM_* setting (the defaults),
    and bytecode written and read, as an installed package runs (the untimed first probe
    writes it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWMEM_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(PYTHONPATH=str(code), LANCEDB_LOG="error")
    return env


def first_line(
    code: Path, script: str, args: list[str], db: Path
) -> tuple[subprocess.Popen[str], str, float]:
    """A fresh process of the flowmem at `code` running `script` with `args`, in the directory
    of the store `db`: the process, the first line it prints, and when it was started
    (`time.perf_counter`)."""
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        env=_env(code),
        cwd=db.parent,  # not a checkout: `-c` puts the working directory first on the path
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline(), start


def probe(code: Path, db: Path, *, to_exit: bool = False) -> tuple[float, float | None]:
    """One fresh agent process on the flowmem at `code`: seconds until it has recorded, and
    (`to_exit`) until it has exited, its run stored; otherwise it is killed once recorded."""
    process, line, start = first_line(code, AGENT, [str(db)], db)
    recorded = time.perf_counter() - start
    if not to_exit:
        process.kill()
    _, err = process.communicate()
    ended = time.perf_counter() - start
    where = str(code.resolve() / "flowmem")
    if not line.startswith("recorded ") or not line.split(" ", 1)[1].startswith(where):
        raise RuntimeError(f"the probe on {code} did not record: {line!r} {err[-2000:]}")
    if to_exit and process.returncode != 0:
        raise RuntimeError(f"the probe on {code} ended with {process.returncode}: {err[-2000:]}")
    return recorded, ended if to_exit else None


def _code_at(revision: str, into: Path) -> Path:
    """`flowmem/` as it was at `revision` (git archive), under `into`."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", revision, "flowmem"], capture_output=True, check=True
    )
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def agent_start(runs: int = 10, *, before: str | None = BEFORE, to_exit: bool = False) -> dict[str, Any]:
    """The medians of `runs` probes of this checkout's flowmem and (unless `before` is None) of
    `before`'s, alternating, each on a store of its own that a first, untimed probe created."""
    with tempfile.TemporaryDirectory() as tmp:
        codes = {"now": REPO}
        if before is not None:
            codes["before"] = _code_at(before, Path(tmp) / "before")
        dbs = {name: Path(tmp) / f"{name}.db" for name in codes}
        for name, code in codes.items():  # creates the store and compiles the bytecode
            probe(code, dbs[name], to_exit=True)
        found: dict[str, list[tuple[float, float | None]]] = {name: [] for name in codes}
        for _ in range(runs):
            for name, code in codes.items():
                found[name].append(probe(code, dbs[name], to_exit=to_exit))
    out: dict[str, Any] = {"agent_start_runs": runs, "agent_start_before": before}
    for name, probes in found.items():
        suffix = "" if name == "now" else "_before"
        out[f"agent_start_s{suffix}"] = statistics.median(r for r, _ in probes)
        if to_exit:
            out[f"agent_exit_s{suffix}"] = statistics.median(e for _, e in probes if e is not None)
    if before is not None:
        out["agent_start_ratio"] = out["agent_start_s"] / out["agent_start_s_before"]
    return out


def run_probe(code: Path, script: str, args: list[str], cwd: Path, env: dict[str, str] | None = None) -> Any:
    """A fresh process of the flowmem at `code` running `script` with `args` (and FLOWMEM_*
    settings `env`): the JSON object its last line prints, without its `code` (where it
    imported `flowmem.agents` from, checked to be under `code`)."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        env={**_env(code), **(env or {})},
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the probe on {code} ended with {done.returncode}: {done.stderr[-2000:]}")
    found = json.loads(done.stdout.splitlines()[-1])
    if not str(found.pop("code")).startswith(str(code.resolve() / "flowmem")):
        raise RuntimeError(f"the probe on {code} ran another flowmem")
    return found


def emitted(found: dict[str, Any], out: Path | None, *, as_json: bool) -> bool:
    """A run's figures written to `out` (when given) as indented JSON, and printed as one line
    of JSON when `as_json`: whether they were printed (else the caller prints its table)."""
    if out is not None:
        out.write_text(json.dumps(found, indent=2) + "\n")
    if as_json:
        print(json.dumps(found))
    return as_json


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help="the revision to compare with ('none': no other)")
    parser.add_argument("--runs", type=int, default=10, help="probes of each revision (the median is kept)")
    parser.add_argument("--to-exit", action="store_true", help="also time each probe to its normal exit")
    parser.add_argument("--json", action="store_true", dest="as_json", help="print one JSON object")
    parser.add_argument("--out", type=Path, help="also write the JSON object to this file")
    args = parser.parse_args(argv)
    before = None if args.before == "none" else args.before
    found = agent_start(args.runs, before=before, to_exit=args.to_exit)
    if emitted(found, args.out, as_json=args.as_json):
        return 0
    head = f"| flowmem | agent start, median of {args.runs} (s) |"
    print(head + (" to exit (s) |" if args.to_exit else ""))
    print("|---|---:|" + ("---:|" if args.to_exit else ""))
    for name, suffix in (("this checkout", ""), (f"{before}", "_before")):
        if f"agent_start_s{suffix}" in found:
            exit_cell = f" {found[f'agent_exit_s{suffix}']:.3f} |" if args.to_exit else ""
            print(f"| {name} | {found[f'agent_start_s{suffix}']:.3f} |{exit_cell}")
    if "agent_start_ratio" in found:
        print(f"this checkout / {before}: {found['agent_start_ratio']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
