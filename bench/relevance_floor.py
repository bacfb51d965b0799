"""Can a relevance condition give a task from no known domain nothing, at no cost in-domain?

Builds four memories as `flowmem eval` and `flowmem demo` do (rule inducer, the embedder the
settings select: FLOWMEM_EMBEDDER, the offline hashing one by default, or `static` with
FLOWMEM_EMBEDDER_PATH): the three shared sets' training splits (bench/eval_sets.py) and the demo's store
after its 8 rounds (`run_loop`, direct cycle). Each memory's keys are its workflows' source
task texts, chosen as `jobs.induce.key_vectors` chooses them (<= 32, evenly spread).

For every candidate condition it prints, per memory: of `OFF_DOMAIN` (25 requests from no
domain these memories know), how many still get a memory; and of the in-domain test tasks
(each set's test split; for the demo, 200 new tasks of its families with their subtasks), how
many lose *every* memory search serves them today (gap and ratio as the settings say) and how
many served memories are dropped. A condition keeps or drops each served memory.

Then, with that embedder, per memory: the best score of the most similar off-domain request
and how many in-domain test tasks score no higher (a floor on the best score cannot give the
former nothing without giving the latter nothing too), the lowest in-domain best score; and one
floor for all four memories, just above every off-domain best score, with the in-domain tasks
it empties, against the floor at the lowest in-domain best score, with the off-domain requests
it still serves.

Last, per size of the hashing embedder (384, the default, and larger: fewer hash collisions),
the same separation (`--no-sizes` skips it).

Usage: python bench/relevance_floor.py [DATA_DIR] [--no-sizes]
"""

from __future__ import annotations

import math
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from flowmem.agents.served_index import ServedIndex
from flowmem.demo import World, make_tasks
from flowmem.demo.loop import run_loop
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.interchange import Rejection, read_trajectories
from flowmem.jobs.cycle import cycle
from flowmem.jobs.evaluate import induced_store
from flowmem.jobs.factories import embedder_from, store_from
from flowmem.models import Trajectory
from flowmem.retrieval.embed import Embedder, HashingEmbedder
from flowmem.retrieval.nearest import ExampleIndex
from flowmem.retrieval.serving import CANDIDATES, within_gap
from flowmem.settings import Settings

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import eval_sets
from bench.paths import SHARED_DATA

OFF_DOMAIN = [
    "what is the weather in Paris tomorrow",
    "write a poem about the sea",
    "how do I reset my password",
    "book a flight from London to Tokyo next Friday",
    "give me a recipe for vegetarian lasagna",
    "what is the integral of x squared",
    "translate 'good morning' into Spanish",
    "who won the football world cup in 2018",
    "recommend a good science fiction novel",
    "how many calories are in a banana",
    "explain quantum entanglement to a child",
    "what time is it in Sydney right now",
    "tell me a joke about cats",
    "convert 100 dollars to euros",
    "find a hotel near the Eiffel Tower",
    "what are the symptoms of the flu",
    "plan a three day trip to Rome",
    "solve 3x + 5 = 20 for x",
    "what is the capital of Australia",
    "suggest exercises for lower back pain",
    "how do I bake sourdough bread",
    "summarize the plot of Hamlet",
    "play some jazz music",
    "what was the score of the Lakers game last night",
    "how tall is Mount Everest",
]
"""Requests from no domain of the four memories: weather, poems, travel, cooking, maths,
translation, sports, health, music, trivia."""

_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # the hashing embedder's words


def words(text: str) -> frozenset[str]:
    """Lower-cased words of two or more characters, without digits (values, not words)."""
    return frozenset(w for w in _TOKEN.findall(text.lower()) if not any(c.isdigit() for c in w))


@dataclass
class Memory:
    """One namespace's keys: texts, their owner (workflow), share; and test tasks."""

    name: str
    texts: list[str]
    owners: list[int]
    shares: list[float]
    tests: list[str]
    tools: dict[int, frozenset[str]] | None = None
    """Per owner: the words of its workflow's action names and argument keys."""
    served_nothing: tuple[int, int] | None = None
    """With the settings' floor, end to end (`ServedIndex.serving` on the store): the off-domain
    requests and the in-domain test tasks served nothing (the demo's store only)."""


def tool_words(actions: list[str], keys: list[str]) -> frozenset[str]:
    """Words of action names and argument keys (`mail.search_emails`, `email_id`), singular."""
    out = set()
    for name in [*actions, *keys]:
        for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", name):
            out.add(_singular(w.lower()))
    return frozenset(w for w in out if len(w) >= 3)


def _singular(w: str) -> str:
    return w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w


@dataclass(frozen=True)
class Candidate:
    """A served memory for one task, with what the conditions look at."""

    cosine: float
    """Its score: nearest-key cosine less the share penalty."""
    distinctive: int
    """Words the task shares with its keys that fewer than half the namespace's keys hold."""
    lifted: int
    """Shared words at least twice as frequent among its keys as among the namespace's."""
    known: bool
    """IDF mass of the shared words >= IDF mass of the task's words no key holds."""
    tool: int = 0
    """Words the task shares with its workflow's action names and argument keys."""


def _chosen(tasks: set[str] | dict[str, float], limit: int = 32) -> list[str]:
    distinct = sorted(tasks)
    return distinct[:: max(1, -(-len(distinct) // limit))][:limit]


def set_memories(data: Path, settings: Settings) -> Iterator[Memory]:
    """The three shared sets' memories, induced from their training splits."""
    splits: list[tuple[str, list[Trajectory], list[Trajectory]]] = []
    for name, (file, is_train) in eval_sets.SPLITS.items():
        runs = [t for t in read_trajectories(data / file, settings) if not isinstance(t, Rejection)]
        splits.append((name, [t for t in runs if is_train(t)], [t for t in runs if not is_train(t)]))
    agents = eval_sets.agent_split(data, settings)
    if agents is not None:
        splits.append(("tau2_agents", *agents))
    for name, train, test in splits:
        with induced_store(train, RuleInducer(), settings=settings) as (_, induced):
            result = induced.result
        shares = result.key_shares()
        memory = Memory(name, [], [], [], [t.task for t in test], {})
        for i, w in enumerate(result.workflows):
            assert memory.tools is not None
            memory.tools[i] = tool_words(w.actions, [k for s in w.steps for k in s.args])
            for task in _chosen(shares[w.id]):
                memory.texts.append(task)
                memory.owners.append(i)
                memory.shares.append(shares[w.id][task])
        yield memory


def demo_memory() -> Memory:
    """The demo's store after its 8 rounds; tests: 200 new tasks of its families."""
    with tempfile.TemporaryDirectory(prefix="flowmem-floor-") as tmp:
        settings = Settings(db=str(Path(tmp) / "db"))
        run_loop(settings, cycle=cycle)
        store = store_from(settings)
        task_of = {t.id: t.task for t in store.list_trajectories(limit=None)}
        memory = Memory("demo", [], [], [], [], {})
        for i, w in enumerate(store.served_workflows()):
            assert memory.tools is not None
            memory.tools[i] = tool_words(w.actions, [k for s in w.steps for k in s.args])
            for task in _chosen({task_of[r] for r in w.source_trajectory_ids if r in task_of}):
                memory.texts.append(task)
                memory.owners.append(i)
                memory.shares.append(1.0)
        for made in make_tasks(World.generate(0), 200, seed=777):
            memory.tests += [made.text] + [s.text for s in made.subtasks]
        index = ServedIndex.serving(store, settings.namespace, settings)
        off, tests = ([t for t in texts if not index.search(t)] for texts in (OFF_DOMAIN, memory.tests))
        memory.served_nothing = (len(off), len(tests))
    return memory


def _served(memory: Memory, settings: Settings, embedder: Embedder) -> Callable[[str], list[Candidate]]:
    """What search serves a task today, each memory with the conditions' inputs."""
    n = len(memory.texts)
    key_words = [words(t) for t in memory.texts]
    df: dict[str, int] = {}
    for kw in key_words:
        for w in kw:
            df[w] = df.get(w, 0) + 1
    held: dict[int, dict[str, int]] = {}
    count: dict[int, int] = {}
    for kw, o in zip(key_words, memory.owners, strict=True):
        count[o] = count.get(o, 0) + 1
        for w in kw:
            held.setdefault(o, {})[w] = held.setdefault(o, {}).get(w, 0) + 1
    index = ExampleIndex(embedder.embed(memory.texts), memory.owners, max(memory.owners) + 1, memory.shares)

    def idf(w: str) -> float:
        return math.log((n + 1) / (df.get(w, 0) + 1))

    def served(task: str) -> list[Candidate]:
        near = index.search(embedder.embed([task])[0], CANDIDATES)
        near = near[: within_gap([s for _, s in near], settings.relevance_gap, settings.relevance_ratio)]
        qw = words(task)
        unknown = sum(idf(w) for w in qw if w not in df)
        out = []
        for i, s in near:
            shared = [w for w in qw if w in held[i]]
            out.append(
                Candidate(
                    cosine=s,
                    distinctive=sum(df[w] * 2 < n for w in shared),
                    lifted=sum(held[i][w] / count[i] >= 2 * df[w] / n for w in shared),
                    known=sum(idf(w) for w in shared) >= unknown,
                    tool=len({_singular(w) for w in qw} & (memory.tools or {}).get(i, frozenset())),
                )
            )
        return out

    return served


CONDITIONS: dict[str, Callable[[Candidate], bool]] = {
    "cosine >= 0.32": lambda c: c.cosine >= 0.32,
    "cosine >= 0.40": lambda c: c.cosine >= 0.40,
    ">= 1 distinctive word": lambda c: c.distinctive >= 1,
    ">= 2 distinctive words": lambda c: c.distinctive >= 2,
    ">= 1 distinctive word and cosine >= 0.32": lambda c: c.distinctive >= 1 and c.cosine >= 0.32,
    ">= 2 words twice as frequent in its keys": lambda c: c.lifted >= 2,
    "shared IDF >= unknown IDF": lambda c: c.known,
    "shared IDF >= unknown IDF, or cosine >= 0.40": lambda c: c.known or c.cosine >= 0.40,
    ">= 1 word of its tools' names": lambda c: c.tool >= 1,
    ">= 1 word of its tools' names or cosine >= 0.40": lambda c: c.tool >= 1 or c.cosine >= 0.40,
    ">= 1 word of its tools' names and >= 1 distinctive word": lambda c: c.tool >= 1 and c.distinctive >= 1,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = [a for a in argv if not a.startswith("--")]
    data = Path(args[0]) if args else SHARED_DATA
    settings = Settings()
    embedder = embedder_from(settings)
    memories = [demo_memory(), *set_memories(data, settings)]
    print(f"embedder: {embedder.name}\n")
    print("| condition | " + " | ".join(m.name for m in memories) + " |")
    print("|---|" + "---|" * len(memories))
    served = {m.name: _served(m, settings, embedder) for m in memories}
    found = {
        m.name: ([served[m.name](t) for t in m.tests], [served[m.name](t) for t in OFF_DOMAIN])
        for m in memories
    }
    for label, keep in CONDITIONS.items():
        cells = [cell(keep, *found[m.name]) for m in memories]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print()
    print_floor(memories, embedder)
    demo = memories[0].served_nothing or (0, 0)
    print(
        f"\nthe demo's store, `ServedIndex.serving` with floor {settings.floor}: {demo[0]}/{len(OFF_DOMAIN)}"
        f" off-domain requests and {demo[1]}/{len(memories[0].tests)} in-domain tasks served nothing"
    )
    if "--no-sizes" not in argv:
        print()
        print("| hashing embedder size | " + " | ".join(m.name for m in memories) + " |")
        print("|---|" + "---|" * len(memories))
        for dim in DIMS:
            cells = [separation(m, HashingEmbedder(dim)) for m in memories]
            print(f"| {dim} | " + " | ".join(cells) + " |")
    return 0


DIMS = (384, 1024, 4096, 16384)
"""Sizes of the hashing embedder compared: the default and three larger ones."""


def best_scores(memory: Memory, embedder: Embedder) -> tuple[list[float], list[float]]:
    """Each off-domain request's and each in-domain test task's best score on a memory."""
    index = ExampleIndex(embedder.embed(memory.texts), memory.owners, max(memory.owners) + 1, memory.shares)

    def best(texts: list[str]) -> list[float]:
        return [next(iter(index.search(v, 1)), (0, 0.0))[1] for v in embedder.embed(texts)]

    return best(OFF_DOMAIN), best(memory.tests)


def separation(memory: Memory, embedder: Embedder) -> str:
    """The most similar off-domain request's best score, and the in-domain test tasks whose
    best score is no higher."""
    off, tests = best_scores(memory, embedder)
    below = sum(s <= max(off) for s in tests)
    return f"off-domain max {max(off):.3f}; {below}/{len(tests)} in-domain at or below"


def print_floor(memories: list[Memory], embedder: Embedder) -> None:
    """Per memory, the off-domain requests' and the in-domain tasks' best scores; then one floor
    for all memories that serves no off-domain request, against one that empties no test task."""
    scores = {m.name: best_scores(m, embedder) for m in memories}
    print(f"| {embedder.name} | off-domain max (request) | in-domain at or below | in-domain min |")
    print("|---|---|---|---|")
    for name, (off, tests) in scores.items():
        worst = OFF_DOMAIN[off.index(max(off))]
        below = sum(s <= max(off) for s in tests)
        print(f"| {name} | {max(off):.3f} ({worst}) | {below}/{len(tests)} | {min(tests):.3f} |")
    strict = max(max(off) for off, _ in scores.values()) + 0.001
    loose = min(min(tests) for _, tests in scores.values())
    emptied = ", ".join(f"{n} {sum(s < strict for s in t)}/{len(t)}" for n, (_, t) in scores.items())
    served = ", ".join(f"{n} {sum(s >= loose for s in o)}/{len(o)}" for n, (o, _) in scores.items())
    print(f"\nfloor {strict:.3f} (no off-domain request served anywhere) empties in-domain tasks: {emptied}")
    print(f"floor {loose:.3f} (no in-domain task emptied anywhere) serves off-domain requests: {served}")


def cell(keep: Callable[[Candidate], bool], tests: list[list[Candidate]], off: list[list[Candidate]]) -> str:
    """One condition on one memory: off-domain tasks that still get a memory, test tasks that
    lose all theirs, and the memories dropped from test tasks."""
    lost = sum(1 for c in tests if c and not any(keep(x) for x in c))
    dropped = sum(1 for c in tests for x in c if not keep(x))
    passing = sum(1 for c in off if any(keep(x) for x in c))
    return f"{passing}/{len(off)} off; {lost}/{len(tests)} lose all, {dropped} dropped"


if __name__ == "__main__":
    raise SystemExit(main())
