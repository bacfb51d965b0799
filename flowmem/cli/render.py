"""Rich renderings of trajectories, workflows, histories, diffs and runs for the CLI."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from flowmem.induction.render.diff import WorkflowDiff, pitfall_text
from flowmem.induction.render.render import where_from
from flowmem.models import InductionRun, Trajectory, Workflow, WorkflowStep

if TYPE_CHECKING:
    from flowmem.demo.loop import DemoReport

__all__ = [
    "Fitted",
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


def _counted(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else ""


def _id_column(table: Table, ids: Sequence[str], header: str = "id") -> None:
    """A column of ids that are never cut, folded or wrapped, at any terminal width: an id is
    what the next command takes (`trajectories show`, `workflows show`, `workflows rollback`),
    so it must copy whole; the other columns wrap around it."""
    table.add_column(header, no_wrap=True, min_width=max((len(i) for i in ids), default=len(header)))


class Fitted:
    """A table where its columns fit the terminal, else the same rows as stacked records (an
    id on a line of its own, then the rest): a long id never squeezes the others to "…"."""

    def __init__(self, table: Table, stacked: Callable[[], RenderableType]) -> None:
        self.table, self.stacked = table, stacked

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table if self._least(console, options) <= options.max_width else self.stacked()

    def _least(self, console: Console, options: ConsoleOptions) -> int:
        """The narrowest the table can be with no word of any cell cut: each column as wide as
        its header and longest word, plus padding and rules (3 a column, 1 at the end)."""
        widest = [
            max(
                len(str(c.header)),
                c.min_width or 0,
                *(Measurement.get(console, options, cell).minimum for cell in c.cells),
            )
            for c in self.table.columns
        ]
        return sum(widest) + 3 * len(widest) + 1


def trajectory_table(trajectories: Sequence[Trajectory]) -> Fitted:
    """One line per trajectory, ids whole (`_id_column`), or one record each where the
    columns do not fit."""
    table = Table(title="trajectories")
    _id_column(table, [t.id for t in trajectories])
    for name in ("agent", "task", "steps", "outcome", "created"):
        table.add_column(name)
    for t in trajectories:
        table.add_row(
            Text(t.id),
            t.agent,
            Text(_short(t.task, 70)),
            str(len(t.steps)),
            _outcome(t.success),
            _when(t.created_at),
        )
    return Fitted(table, lambda: _trajectory_records(trajectories))


def _trajectory_records(trajectories: Sequence[Trajectory]) -> Group:
    """The trajectories as records: the id alone on its line, then its facts and its task."""
    records: list[RenderableType] = [Text("trajectories", style="italic")]
    for t in trajectories:
        facts = Text.assemble(
            t.agent,
            " · ",
            _outcome(t.success),
            f" · {_counted(len(t.steps), 'step')} · {_when(t.created_at)}",
        )
        records += [
            Text(t.id, style="bold", no_wrap=True, overflow="ignore"),
            *_indented(facts, Text(_short(t.task, 150))),
        ]
    return Group(*records)


def _indented(*lines: Text) -> list[Padding]:
    """A record's lines under its id, indented, each as wide as itself (a line padded to the
    widest would end in spaces when piped), a long one wrapped under the same indent."""
    return [Padding(line, (0, 0, 0, 2), expand=False) for line in lines]


def trajectory_panel(t: Trajectory) -> Panel:
    """A trajectory with its steps: each action whole (the args and observations wrap beside
    it), an error column only when a step has an error."""
    errors = any(s.error for s in t.steps)
    steps = Table("#", box=None, expand=True)
    _id_column(steps, [s.action for s in t.steps], "action")
    steps.add_column("args")
    steps.add_column("observation")
    if errors:
        steps.add_column("error")
    for i, s in enumerate(t.steps, 1):
        cells: list[RenderableType] = [
            str(i),
            Text(s.action),
            Text(_short(json.dumps(s.args, ensure_ascii=False), 60)),
            Text(_short(s.observation, 60)),
        ]
        steps.add_row(*cells, *([Text(_short(s.error, 40), style="red")] if errors else []))
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


def workflow_table(workflows: Sequence[Workflow]) -> Fitted:
    """One line per workflow (its latest version; ids whole, `_id_column`), or one record each
    where the columns do not fit: a name is never folded into pieces or cut."""
    table = Table(title="workflows")
    _id_column(table, [w.id for w in workflows])
    for name in ("v", "name", "kind", "scope", "agent", "status", "steps", "served"):
        table.add_column(name, overflow="fold" if name == "name" else "ellipsis")
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
    return Fitted(table, lambda: _workflow_records(workflows))


def _workflow_records(workflows: Sequence[Workflow]) -> Group:
    """The workflows as records: the id alone on its line, then its name and its facts."""
    records: list[RenderableType] = [Text("workflows", style="italic")]
    for w in workflows:
        facts = Text(
            f"v{w.version} · {w.kind} · {w.scope}/{w.agent} · {w.status} · "
            f"{_counted(len(w.steps), 'step')} · served {w.stats.served}"
        )
        records += [
            Text(w.id, style="bold", no_wrap=True, overflow="ignore"),
            *_indented(Text(w.name), facts),
        ]
    return Group(*records)


def workflow_panel(w: Workflow) -> Panel:
    """A workflow version: when to use it, steps with placeholders, parameters, pitfalls."""
    parts: list[Any] = [Text.assemble((w.name, "bold"), f"  v{w.version}  {w.status}  {w.scope}/{w.agent}")]
    if w.description:
        parts.append(Text(w.description))
    parts += [Text.assemble(f"{i}. ", _step_text(s)) for i, s in enumerate(w.steps, 1)]
    if w.parameters:
        parts.append(Text("parameters:", style="bold"))
        parts += [
            Text.assemble("  ", _highlighted("{" + k + "}"), f": {where_from(v)}")
            for k, v in w.parameters.items()
        ]
    if w.pitfalls:
        parts.append(Text("pitfalls:", style="bold"))
        parts += [Text(f"  - {p}", style="yellow") for p in w.pitfalls]
    p = w.provenance
    parts.append(Text(f"inducer {p.inducer}, {p.mode}, run {p.run_id or '-'}", style="dim"))
    return Panel(Group(*parts), title=Text(w.id), subtitle=w.namespace)


def history_table(versions: Sequence[Workflow]) -> Fitted:
    """Every version of a workflow, oldest first, its run ids whole (what `workflows rollback`
    takes), or one record each where the columns do not fit."""
    table = Table("version", "parent", "status", "steps", "inducer", title=versions[0].id)
    _id_column(table, [w.provenance.run_id or "-" for w in versions], "run")
    table.add_column("created")
    for w in versions:
        table.add_row(
            str(w.version),
            str(w.parent_version or "-"),
            w.status,
            str(len(w.steps)),
            w.provenance.inducer,
            Text(w.provenance.run_id or "-"),
            _when(w.created_at),
        )
    return Fitted(table, lambda: _history_records(versions))


def _history_records(versions: Sequence[Workflow]) -> Group:
    """The versions as records: the version and its status, then how and when it was made."""
    records: list[RenderableType] = [Text(versions[0].id, style="italic")]
    for w in versions:
        parent = f" (from v{w.parent_version})" if w.parent_version else ""
        records += [
            Text(f"v{w.version}{parent} · {w.status} · {_counted(len(w.steps), 'step')}", style="bold"),
            *_indented(
                Text(f"{w.provenance.inducer} inducer · created {_when(w.created_at)}"),
                Text(f"run {w.provenance.run_id or '-'}", no_wrap=True, overflow="ignore"),
            ),
        ]
    return Group(*records)


_OPS = {"equal": (" ", ""), "changed": ("~", "yellow"), "added": ("+", "green"), "removed": ("-", "red")}


def _pitfall_lines(old: Any, new: Any) -> list[Text]:
    """Pitfalls removed and added, by the text an agent is told (JSON: a text, or a text with
    its condition); one whose text stayed but whose condition changed is marked `~`."""
    was = {str(pitfall_text(p)): p for p in old or []}
    now = {str(pitfall_text(p)): p for p in new or []}
    lines = [Text(f"  - {t}", style="red") for t in was if t not in now]
    lines += [Text(f"  ~ {t} (its condition)", style="yellow") for t in now if t in was and was[t] != now[t]]
    return lines + [Text(f"  + {t}", style="green") for t in now if t not in was]


def _parameter_lines(old: Any, new: Any) -> list[Text]:
    """Placeholders removed, changed and added, each with where its value comes from."""
    was, now = dict(old or {}), dict(new or {})
    lines = [Text(f"  - {{{k}}}: {where_from(v)}", style="red") for k, v in was.items() if k not in now]
    lines += [
        Text(f"  ~ {{{k}}}: {where_from(was[k])} → {where_from(v)}", style="yellow")
        for k, v in now.items()
        if k in was and was[k] != v
    ]
    return lines + [
        Text(f"  + {{{k}}}: {where_from(v)}", style="green") for k, v in now.items() if k not in was
    ]


_LISTED: dict[str, Callable[[Any, Any], list[Text]]] = {
    "pitfalls": _pitfall_lines,
    "parameters": _parameter_lines,
}
"""Fields shown item by item in a diff, rather than as two JSON values."""


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
        if f.field in _LISTED:
            lines += [Text(f"{f.field}:", style="yellow"), *_LISTED[f.field](f.old, f.new)]
            continue
        old, new = (json.dumps(v, ensure_ascii=False) for v in (f.old, f.new))
        lines.append(Text(f"{f.field}: {old} → {new}", style="yellow"))
    if d.unchanged:
        lines.append(Text("no changes", style="dim"))
    return Group(*lines)


def _run_counts(r: InductionRun) -> str:
    shown = ("trajectories", "clusters", "versions_created", "failed_clusters")
    return ", ".join(f"{k.split('_')[0]} {r.counts[k]}" for k in shown if k in r.counts)


def _run_note(r: InductionRun) -> str:
    return r.note or (f"undid {r.rolled_back_run}" if r.rolled_back_run else "")


def runs_table(runs: Sequence[InductionRun]) -> Fitted:
    """Runs and rollbacks, oldest first, ids whole (what `workflows rollback` takes), or one
    record each where the columns do not fit."""
    table = Table(title="runs")
    _id_column(table, [r.id for r in runs])
    for name in ("kind", "finished", "table version", "before", "counts", "note"):
        table.add_column(name)
    for r in runs:
        table.add_row(
            Text(r.id),
            r.kind,
            _when(r.finished_at),
            str(r.table_version),
            str(r.base_version),
            _run_counts(r),
            Text(_run_note(r)),
        )
    return Fitted(table, lambda: _run_records(runs))


def _run_records(runs: Sequence[InductionRun]) -> Group:
    """The runs as records: the id alone on its line, then what it was, its counts, its note."""
    records: list[RenderableType] = [Text("runs", style="italic")]
    for r in runs:
        lines = [
            Text(
                f"{r.kind} · finished {_when(r.finished_at)} · table version {r.table_version} "
                f"(before {r.base_version})"
            )
        ]
        lines += [Text(text) for text in (_run_counts(r), _run_note(r)) if text]
        records += [Text(r.id, style="bold", no_wrap=True, overflow="ignore"), *_indented(*lines)]
    return Group(*records)


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
        caption=(
            "calls: tool calls per task; followed: runs that followed a workflow;\n"
            "served: workflows served at the round's start"
        ),
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
