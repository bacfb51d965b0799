"""Report a run's outcome after the fact: the one place an outcome is set."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from flowmem.policy.scrub import ScrubKind, scrub_text
from flowmem.policy.usage import outcome_change

if TYPE_CHECKING:  # imported when first used: an agent's writer builds its store apart
    from flowmem.storage import Store

__all__ = ["report_outcome"]


def report_outcome(
    store: Store,
    run_id: str,
    *,
    success: bool,
    namespace: str,
    scrub: Collection[ScrubKind],
    feedback: str | None = None,
) -> None:
    """Set a stored run's outcome (its feedback scrubbed like every stored text) and move the
    stats of the versions it was served by the difference (the learn job recomputes them
    exactly later).

    Raises:
        NotFoundError: if the namespace has no such run.
    """
    if feedback is not None and scrub:
        feedback = scrub_text(feedback, scrub)
    before = store.set_outcome(run_id, success=success, feedback=feedback, namespace=namespace)
    if not before.workflows_used or before.success is success:
        return
    change = outcome_change(before.success, success)
    store.add_usage({(r.id, r.version): change for r in before.workflows_used}, namespace=namespace)
