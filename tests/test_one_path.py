"""`flowmem eval` and `flowmem induce` induce through one path (`jobs.induce.run_induction`): past
the clustering sample too, the workflows eval scores are the ones `flowmem induce` stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

from typer.testing import CliRunner

from flowmem.cli import app
from flowmem.demo import simulate
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.jobs import evaluate as evaluating
from flowmem.jobs import induce as induce_job
from flowmem.jobs.factories import store_from
from flowmem.settings import Settings

SAMPLE = 30
"""Task texts each agent's clusters are fitted on (`cluster_sample`): fewer than the agents have."""


def _content(w: Any) -> tuple[Any, ...]:
    return (w.id, w.name, w.description, w.kind, w.steps, w.pitfalls, w.parameters, w.source_trajectory_ids)


def test_eval_scores_the_workflows_flowmem_induce_stores_past_the_clustering_sample(tmp_path: Path) -> None:
    runs = simulate(250, seed=3)
    train, test = runs[:330], runs[330:]
    assert max(len({t.task for t in train if t.agent == a}) for a in {t.agent for t in train}) > SAMPLE
    settings = Settings(db=str(tmp_path / "unused"), cluster_sample=SAMPLE, namespace="default")

    reports: list[Any] = []
    real = induce_job.run_induction

    def recording(*args: Any, **kwargs: Any) -> Any:
        reports.append(real(*args, **kwargs))
        return reports[-1]

    with mock.patch.object(evaluating, "run_induction", recording):
        figures = evaluating.evaluate(train, test, RuleInducer(), settings=settings, k=3)
    (report,) = reports
    fitted = [len(c.texts) for c in report.plan.clusters.clusterings.values()]
    assert SAMPLE in fitted and max(fitted) == SAMPLE  # fitted on a sample, the other texts placed
    assert figures.flowmem.memories == len(report.versions) > 10

    data = tmp_path / "train.jsonl"
    data.write_text("".join(t.model_dump_json() + "\n" for t in train), encoding="utf-8")
    db = tmp_path / "db"
    env = {"FLOWMEM_DB": str(db), "FLOWMEM_NAMESPACE": "default", "FLOWMEM_CLUSTER_SAMPLE": str(SAMPLE)}
    for args in (["ingest", str(data)], ["induce"]):
        done = CliRunner().invoke(app, args, env=env)
        assert done.exit_code == 0, done.output
    stored = store_from(Settings(db=str(db), namespace="default")).list_workflows(namespace="default")
    assert sorted(map(_content, stored)) == sorted(map(_content, report.versions))
