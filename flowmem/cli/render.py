"""Rich renderings of trajectories, workflows, histories, diffs and runs for the CLI."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from flowmem.induction.diff import WorkflowDiff
from flowmem.models import InductionRun, Trajectory, Workflow, WorkflowStep

if TYPE_CHECKING:
    from flowmem.demo.loop import DemoReport

__all__ = [
    "diff_text",
    "history_table",
    "runs_table",
    "trajectory_panel",
    "trajectory_table",
    "workflow_panel",
    "workflow_table",
]

_PLACEHOLDER = re.compile(r"(\{[A-Za-z_][A-Za-z0-9_]*\})")


def _short(text: str | None, n: int = 80) -> str:
    if text is None:
        return ""
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _outcome(success: bool | None) -> Text:
    if success is None:
        return Text("?", style="dim")
    return Text("ok", style="green") if success else Text("fail", style="red")


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else ""


def trajectory_table(trajectories: Sequence[Trajectory]) -> Table:
    """One line per trajectory."""
    table = Table("id", "agent", "task", "steps", "outcome", "created", title="trajectories")
    for t in trajectories:
        table.add_row(
            Text(t.id),
            t.agent,
            Text(_short(t.task, 70)),
            str(len(t.steps)),
            _outcome(t.success),
            _when(t.created_at),
        )
    return table


def trajectory_panel(t: Trajectory) -> Panel:
    """A trajectory with its steps."""
    steps = Table("#", "action", "args", "observation", "error", box=None, expand=True)
    for i, s in enumerate(t.steps, 1):
        steps.add_row(
            str(i),
            Text(s.action),
            Text(_short(json.dumps(s.args, ensure_ascii=False), 60)),
            Text(_short(s.observation, 60)),
            Text(_short(s.error, 40), style="red"),
        )
    head = Text.assemble(
        ("task: ", "bold"),
        t.task,
        "\n",
        ("agent: ", "bold"),
        t.agent,
        ("  parent: ", "bold"),
        t.parent_id or "-",
        ("  outcome: ", "bold"),
        _outcome(t.success),
    )
    if t.final_answer:
        head.append_text(Text.assemble("\n", ("answer: ", "bold"), _short(t.final_answer, 200)))
    if t.feedback:
        head.append_text(Text.assemble("\n", ("feedback: ", "bold"), _short(t.feedback, 200)))
    return Panel(Group(head, steps), title=Text(t.id), subtitle=t.namespace)


def _highlighted(text: str) -> Text:
    out = Text()
    for part in _PLACEHOLDER.split(text):
        out.append(part, style="bold magenta" if _PLACEHOLDER.fullmatch(part) else "")
    return out


def _step_text(step: WorkflowStep) -> Text:
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in step.args.items())
    text = Text.assemble((step.agent + ": " if step.agent else "", "cyan"), (step.action, "bold"), "(")
    text.append_text(_highlighted(args))
    text.append(")")
    if step.note:
        text.append(f"  # {step.note}", style="dim")
    return text


def workflow_table(workflows: Sequence[Workflow]) -> Table:
    """One line per workflow (its latest version)."""
    table = Table("id", "v", "name", "kind", "scope", "agent", "status", "steps", "served", title="workflows")
    for column in table.columns[:3]:
        column.overflow = "fold"
    for w in workflows:
        table.add_row(
            Text(w.id),
            str(w.version),
            Text(w.name),
            w.kind,
            w.scope,
            w.agent,
            w.status,
            str(len(w.steps)),
            str(w.stats.served),
        )
    return table


def workflow_panel(w: Workflow) -> Panel:
    """A workflow version: when to use it, steps with placeholders, parameters, pitfalls."""
    parts: list[Any] = [Text.assemble((w.name, "bold"), f"  v{w.version}  {w.status}  {w.scope}/{w.agent}")]
    if w.description:
        parts.append(Text(w.description))
    parts += [Text.assemble(f"{i}. ", _step_text(s)) for i, s in enumerate(w.steps, 1)]
    if w.parameters:
        parts.append(Text("parameters:", style="bold"))
        parts += [Text.assemble("  ", _highlighted("{" + k + "}"), f": {v}") for k, v in w.parameters.items()]
    if w.pitfalls:
        parts.append(Text("pitfalls:", style="bold"))
        parts += [Text(f"  - {p}", style="yellow") for p in w.pitfalls]
    p = w.provenance
    parts.append(Text(f"inducer {p.inducer}, {p.mode}, run {p.run_id or '-'}", style="dim"))
    return Panel(Group(*parts), title=Text(w.id), subtitle=w.namespace)


def history_table(versions: Sequence[Workflow]) -> Table:
    """Every version of a workflow, oldest first."""
    table = Table("version", "parent", "status", "steps", "inducer", "run", "created", title=versions[0].id)
    for w in versions:
        table.add_row(
            str(w.version),
            str(w.parent_version or "-"),
            w.status,
            str(len(w.steps)),
            w.provenance.inducer,
            w.provenance.run_id or "-",
            _when(w.created_at),
        )
    return table


_OPS = {"equal": (" ", ""), "changed": ("~", "yellow"), "added": ("+", "green"), "removed": ("-", "red")}


def diff_text(d: WorkflowDiff) -> Group:
    """A unified-style step diff plus the other fields that changed."""
    lines: list[Text] = [Text(f"{d.id}: v{d.old_version} → v{d.new_version}", style="bold")]
    for c in d.steps:
        mark, style = _OPS[c.op]
        if c.op == "changed" and c.old is not None and c.new is not None:
            lines.append(Text.assemble(("- ", "red"), _step_text(c.old)))
            lines.append(Text.assemble(("+ ", "green"), _step_text(c.new)))
            continue
        step = c.new if c.new is not None else c.old
        if step is not None:
            lines.append(Text.assemble((mark + " ", style), _step_text(step)))
    for f in d.fields:
        old, new = (json.dumps(v, ensure_ascii=False) for v in (f.old, f.new))
        lines.append(Text(f"{f.field}: {old} → {new}", style="yellow"))
    if d.unchanged:
        lines.append(Text("no changes", style="dim"))
    return Group(*lines)


def runs_table(runs: Sequence[InductionRun]) -> Table:
    """Runs and rollbacks, oldest first."""
    table = Table(title="runs")
    # The id is what `workflows rollback` takes: never cut, so it gets a column of its own width.
    table.add_column("id", no_wrap=True, min_width=max((len(r.id) for r in runs), default=2))
    for name in ("kind", "finished", "table version", "before", "counts", "note"):
        table.add_column(name)
    for r in runs:
        shown = ("trajectories", "clusters", "versions_created", "failed_clusters")
        counts = ", ".join(f"{k.split('_')[0]} {r.counts[k]}" for k in shown if k in r.counts)
        note = r.note or (f"undid {r.rolled_back_run}" if r.rolled_back_run else "")
        table.add_row(
            Text(r.id),
            r.kind,
            _when(r.finished_at),
            str(r.table_version),
            str(r.base_version),
            counts,
            Text(note),
        )
    return table


def demo_table(report: DemoReport) -> Table:
    """The demo's rounds: success rate and mean tool calls with memory and without."""
    table = Table(
        "round",
        "success: memory",
        "none",
        "calls: memory",
        "none",
        "followed",
        "served",
        title="flowmem demo: the same tasks with workflow memory and with none",
        caption="calls: tool calls per task; followed: runs that followed a workflow; served: workflows",
    )
    for r in report.rounds:
        gain = r.with_memory.success_rate - r.without_memory.success_rate
        table.add_row(
            str(r.round),
            f"{r.with_memory.success_rate:.0%}",
            f"{r.without_memory.success_rate:.0%}",
            f"{r.with_memory.mean_steps:.2f}",
            f"{r.without_memory.mean_steps:.2f}",
            f"{r.followed:.0%}",
            str(r.workflows),
            style="green" if gain >= 0.2 else None,
        )
    return table
