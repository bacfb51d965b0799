"""Set a workflow's status by hand (promote, deprecate, retire), recorded with who and why."""

from __future__ import annotations

from typing import Literal

from flowmem.policy.lifecycle import NOT_SERVED, Status, Transition
from flowmem.storage import Store, StoreError

__all__ = ["Verb", "set_status"]

Verb = Literal["promote", "deprecate", "retire"]
"""What a person may do to a workflow version."""

_NEW: dict[str, Status] = {"promote": "active", "deprecate": "deprecated", "retire": "retired"}


def set_status(
    store: Store,
    workflow_id: str,
    verb: Verb,
    *,
    namespace: str,
    why: str,
    by: str,
    version: int | None = None,
) -> list[Transition]:
    """Apply `verb` and log it (cause `manual`, reason "`why` (by `by`)"); returns the
    transitions made, none when the version already has that status.

    - promote: the version (default: the latest) becomes active, and an active version it
      replaces is deprecated (superseded);
    - deprecate: the version (default: the latest) is no longer served;
    - retire: with a version, that one; without, every served version of the workflow.

    Raises:
        NotFoundError: no such workflow or version.
        StoreError: `why` is empty.
    """
    if not why.strip():
        raise StoreError("say why (--why): a manual status change is recorded with its reason")
    history = store.history(workflow_id, namespace=namespace)
    reason = f"{why.strip()} (by {by})"
    new = _NEW[verb]
    if version is None and verb == "retire":
        chosen = [w for w in history if w.status not in NOT_SERVED]
    else:
        target = version if version is not None else history[-1].version
        chosen = [w for w in history if w.version == target]
        if not chosen:
            known = ", ".join(str(w.version) for w in history)
            raise StoreError(f"workflow {workflow_id!r} has no version {target} (versions: {known})")
    out = [Transition(w.id, w.version, w.status, new, reason, "manual") for w in chosen if w.status != new]
    if verb == "promote" and out:
        winner = chosen[0].version
        out += [
            Transition(
                w.id, w.version, w.status, "deprecated", f"superseded by v{winner}: {reason}", "manual"
            )
            for w in history
            if w.status == "active" and w.version != winner
        ]
    store.record_transitions(out, namespace=namespace)
    return out
