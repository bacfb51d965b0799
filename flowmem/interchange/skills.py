"""Workflows as agent skills: one folder per workflow holding a `SKILL.md`.

A skill folder is what agents and frameworks that load skills read: YAML front matter with a
`name` (lowercase letters, digits and hyphens, at most 64 characters) and a `description` (what
it does and when to use it, at most 1,024 characters), then a Markdown body. flowmem writes one
per served workflow: when to use it, its steps with `{placeholders}` and where each comes from,
its parameters, pitfalls, version and provenance.

Re-exporting rewrites only the folders whose text changed and removes the folders of
workflows no longer served (deprecated); a manifest (`.flowmem-skills.json`) lists the
folders flowmem wrote, so folders it did not write are never touched.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from flowmem.induction.render.render import loop_heads, render_call, where_from
from flowmem.models import Workflow

__all__ = ["MANIFEST", "ExportReport", "export_skills", "skill_markdown", "skill_names"]

MANIFEST = ".flowmem-skills.json"
"""The file, in the export directory, that lists the skill folders flowmem wrote."""

_MAX_NAME = 64
_MAX_DESCRIPTION = 1024


@dataclass
class ExportReport:
    """What an export changed, by skill folder name."""

    written: list[str] = field(default_factory=list)
    """New or changed folders."""
    unchanged: list[str] = field(default_factory=list)
    """Folders whose text was already what it would be."""
    removed: list[str] = field(default_factory=list)
    """Folders of workflows no longer served."""

    def summary(self) -> str:
        """One line."""
        return f"{len(self.written)} written, {len(self.unchanged)} unchanged, {len(self.removed)} removed"


def _slug(text: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", text.lower())).strip("-")


def skill_names(workflows: Sequence[Workflow]) -> dict[str, str]:
    """Workflow id -> its skill name: its name, hyphenated (`induction.render.naming.distinct` keeps
    one agent's names apart). Where workflows of several agents or namespaces still share
    one, each takes what sets it apart — its agent, else its namespace, else the first words
    of its description that the others' lack — never an id; the result does not depend on
    the workflows' order."""
    base = {w.id: _slug(w.name)[:_MAX_NAME].rstrip("-") or "workflow" for w in workflows}
    groups: dict[str, list[Workflow]] = defaultdict(list)
    for w in workflows:
        groups[base[w.id]].append(w)
    names = dict(base)
    for name, group in groups.items():
        if len(group) > 1:
            for w in group:
                names[w.id] = _apart(name, w, [o for o in group if o.id != w.id])
    return names


def _apart(name: str, w: Workflow, others: Sequence[Workflow]) -> str:
    """`name` with what sets `w` apart from `others` (which share it) appended."""
    for own, theirs in ((w.agent, {o.agent for o in others}), (w.namespace, {o.namespace for o in others})):
        if own not in theirs:
            return _joined(name, _slug(own))
    words = [x for x in _slug(w.description).split("-") if x]
    seen = {x for o in others for x in _slug(o.description).split("-")}
    extra = [x for x in dict.fromkeys(words) if x not in seen][:3]
    if not extra:  # the same description too: the first words where it differs
        extra = [x for x in words if x not in _slug(w.name).split("-")][:3]
    return _joined(name, "-".join(extra) or "alike")


def _joined(name: str, suffix: str) -> str:
    """`name-suffix` in at most `_MAX_NAME` characters, the suffix kept whole."""
    suffix = suffix[: _MAX_NAME // 2].strip("-")
    return f"{name[: _MAX_NAME - len(suffix) - 1].rstrip('-')}-{suffix}"


def _call(action: str, args: Mapping[str, object]) -> str:
    """A step as `render_call` writes it, in code quotes when it is a call."""
    text = render_call(action, args)
    return text if text == action else f"`{text}`"  # prose stays prose


def skill_markdown(w: Workflow, name: str) -> str:
    """The `SKILL.md` of one workflow version."""
    description = " ".join(w.description.split())[:_MAX_DESCRIPTION] or f"Steps of {w.name}."
    lines = [
        "---",
        f"name: {name}",
        f"description: {json.dumps(description, ensure_ascii=False)}",
        "---",
        "",
        f"# {w.name}",
        "",
        "## When to use",
        "",
        description,
        "",
        "## Steps",
        "",
    ]
    heads, n = loop_heads(w), 0
    for j, s in enumerate(w.steps):
        who = f"[{s.agent}] " if s.agent else ""
        note = f" — {s.note}" if s.note else ""
        if j in heads:
            n += 1
            lines.append(f"{n}. {heads[j]}:")
        if s.repeat is not None:  # a step of a loop's body, under its head
            lines.append(f"   - {who}{_call(s.action, s.args)}{note}")
            continue
        n += 1
        lines.append(f"{n}. {who}{_call(s.action, s.args)}{note}")
    if w.parameters:
        lines += ["", "## Parameters", ""]
        lines += [f"- `{{{k}}}`: {where_from(v)}" for k, v in sorted(w.parameters.items())]
    if w.pitfalls:
        lines += ["", "## Pitfalls", ""]
        lines += [f"- {p}" for p in w.pitfalls]
    p = w.provenance
    parent = f", revises version {w.parent_version}" if w.parent_version else ""
    made = f"induced {p.mode} by the {p.inducer} inducer" + (f" ({p.model})" if p.model else "")
    lines += [
        "",
        "## Version",
        "",
        f"flowmem workflow `{w.id}` version {w.version} ({w.status}, {w.kind}){parent}; {made}"
        + (f" in run `{p.run_id}`" if p.run_id else "")
        + f"; from {len(w.source_trajectory_ids)} run{'s' if len(w.source_trajectory_ids) != 1 else ''}.",
        "",
    ]
    return "\n".join(lines)


def _manifest(root: Path) -> dict[str, str]:
    try:
        data = json.loads((root / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.get("skills", {}).items()} if isinstance(data, dict) else {}


def export_skills(workflows: Sequence[Workflow], root: Path) -> ExportReport:
    """Write each workflow (one version each: the served one) as `root/<skill name>/SKILL.md`;
    remove the folders an earlier export wrote for workflows not among them."""
    root.mkdir(parents=True, exist_ok=True)
    report = ExportReport()
    names = skill_names(workflows)
    before = _manifest(root)
    for w in sorted(workflows, key=lambda w: names[w.id]):
        name = names[w.id]
        path = root / name / "SKILL.md"
        text = skill_markdown(w, name)
        if path.is_file() and path.read_text() == text:
            report.unchanged.append(name)
            continue
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
        report.written.append(name)
    kept = set(names.values())
    for name in sorted(set(before) - kept):
        folder = root / name
        if folder.is_dir() and folder.resolve().parent == root.resolve():
            shutil.rmtree(folder)
        report.removed.append(name)
    manifest = {"skills": {names[w.id]: w.id for w in sorted(workflows, key=lambda w: names[w.id])}}
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return report
