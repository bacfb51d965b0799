"""What to serve together, with the nearest past runs as evidence of what a task needs (pure).

A task's nearest successful stored runs (by task similarity: `nearest`) show which actions a
task like it took. Among the best-ranked memories, `cover` chooses greedily the ones that most
raise, over those runs, their mean joint coverage (the share of a run's steps that the chosen
memories hold, in order) plus `COVER_WEIGHT` times their joint precision (the share of the
chosen memories' steps that the run took), and stops when no memory raises it (at most k).
Both figures are the ones `flowmem eval` scores (docs/metrics.md), computed on past runs
instead of the task's own, which has not run yet.

Why it helps where the relevance gap alone does not: raw memory serves a recurring task's own
earlier runs, and three real runs cover more of a new run than the one workflow the gap
leaves; the choice here serves the workflows that hold what those runs did, and leaves out
one that adds nothing they did. Measured in docs/metrics.md ("Serving chosen by the nearest
runs").
"""

from __future__ import annotations

import functools
import itertools
import re
import weakref
from collections import Counter
from collections.abc import Callable, Collection, KeysView, Sequence
from dataclasses import InitVar, dataclass, field

import numpy as np
import numpy.typing as npt

from flowmem.models import Workflow
from flowmem.retrieval.align import Pattern, flat_pattern, pattern_pairs
from flowmem.retrieval.ann import AnnSlot, KeyANN
from flowmem.retrieval.blas import product
from flowmem.retrieval.keys_seen import Prints, all_among
from flowmem.retrieval.nearest import snap_cosines
from flowmem.retrieval.serving import above_floor, compose, within_gap
from flowmem.retrieval.unique import sorted_unique

__all__ = [
    "COVER_WEIGHT",
    "EVIDENCE",
    "FAMILIAR_EF",
    "FAMILIAR_KEYS",
    "RECUR_KEYS",
    "Evidence",
    "Lookup",
    "choose",
    "cover",
    "nearest",
    "task_template",
]

COVER_WEIGHT = 0.35
"""What a step shown that the run did not take costs, against a step of the run that no
memory shows: a quarter. An agent given a needless step reads past it; an agent missing one
has to find it. The weight does not depend on the data set, only on the two figures being
shares in [0, 1]; 0.2 and 0.3 are measured beside it in docs/metrics.md."""

_WORD = re.compile(r"\w+")

FAMILIAR_KEYS = 16
"""How many of the nearest stored tasks an index of them is asked for (`Evidence.familiar`):
one that clears the floor is enough, a few more make up for the index's misses."""

FAMILIAR_EF = 64
"""The breadth of that search: half the ranking's at 100k keys (`ann.EF_100K`), a quarter of
it at 1M, as any one task above the floor will do, not the nearest ones in order (`python -m
bench search` measures how often the answer is the exact one's: `familiar_agreement`)."""

RECUR_KEYS = 32
"""How many of the stored tasks nearest a task an index of them is asked for (`Evidence.runs_for`),
their runs scored beside those of the task's template: the nearest runs are among them
unless the index misses them."""

EVIDENCE = 3
"""How many nearest runs are evidence (and any tied with the last): raw memory's k."""


def nearest(scores: npt.NDArray[np.floating], k: int = EVIDENCE) -> list[int]:
    """Positions of the k best scores, best first (ties by position), and of any tied with
    the k-th."""
    scores = np.asarray(scores)
    if not len(scores):
        return []
    cut = len(scores) - min(k, len(scores))
    tie = np.partition(scores, cut)[cut]  # the k-th best, without sorting them all
    found = np.flatnonzero(scores >= tie)
    return [int(i) for i in found[np.lexsort((found, -scores[found]))]]


Match = tuple[frozenset[int], int]
"""What a memory matches of a run: the run's steps (a loop's body as often as the run repeats
it), and how many of the memory's own steps."""

MATCHES = 8192
"""Matches of a memory's actions with a run's kept (`_match`, ~0.5 KB each): a recurring
task's nearest runs and the best-ranked memories recur across its searches, and a run's
actions often repeat another's."""


@functools.lru_cache(maxsize=MATCHES)
def _match(run: tuple[str, ...], pattern: tuple[str | tuple[str, ...], ...]) -> Match:
    """What `pattern` matches of `run` (`pattern_pairs`): a pure function of the two action
    sequences, kept for the next search that pairs them (`MATCHES`)."""
    pairs = pattern_pairs(run, pattern)
    return frozenset(i for i, _ in pairs), len({j for _, j in pairs})


class _Choice:
    """Memories chosen so far, with what they match of each evidence run."""

    def __init__(self, runs: Sequence[Sequence[str]], weight: float) -> None:
        self.runs, self.weight = runs, weight
        self.covered: list[set[int]] = [set() for _ in runs]
        self.hits = [0] * len(runs)
        self.shown = 0

    def value(self, found: Sequence[Match] = (), size: int = 0) -> float:
        """Mean coverage + weight × precision over the runs, with one more memory (`found`:
        per run, the run's steps it matches and how many of its own steps match; `size`: its
        steps) or as it is."""
        shown = self.shown + size
        total = 0.0
        for r, run in enumerate(self.runs):
            extra, used = found[r] if found else (set(), 0)
            precision = (self.hits[r] + used) / shown if shown else 0.0
            total += len(self.covered[r] | extra) / len(run) + self.weight * precision
        return total / len(self.runs)

    def add(self, found: Sequence[Match], size: int) -> None:
        for r, (steps, used) in enumerate(found):
            self.covered[r] |= steps
            self.hits[r] += used
        self.shown += size


def cover(
    candidates: Sequence[Pattern],
    evidence: Sequence[Sequence[str]],
    k: int,
    weight: float = COVER_WEIGHT,
    *,
    keep: Sequence[int] = (),
) -> list[int]:
    """Positions of the at most k candidates (action sequences, best-ranked first) that
    together most raise coverage + weight × precision of the `evidence` runs, chosen greedily
    after those in `keep` (served whatever they add); ties go to the better-ranked."""
    runs = [tuple(e) for e in evidence if e]
    if not runs:
        return list(keep)
    patterns = [tuple(c) for c in candidates]
    matches: dict[tuple[str | tuple[str, ...], ...], list[Match]] = {}  # per distinct candidate, per run
    for c in patterns:
        if c not in matches:
            matches[c] = [_match(run, c) for run in runs]
    sizes = [len(flat_pattern(c)) for c in patterns]
    # A memory matching no step of any run adds no coverage and lowers the precision: never
    # chosen, so never valued.
    matching = [i for i, c in enumerate(patterns) if c and any(used for _, used in matches[c])]
    choice = _Choice(runs, weight)
    chosen = list(keep)
    for p in chosen:
        choice.add(matches[patterns[p]], sizes[p])
    best = choice.value() if chosen else 0.0
    while len(chosen) < k:
        values = [(choice.value(matches[patterns[i]], sizes[i]), -i) for i in matching if i not in chosen]
        value, minus = max(values, default=(best, 0))
        if value <= best:
            break
        chosen.append(-minus)
        choice.add(matches[patterns[-minus]], sizes[-minus])
        best = value
    return chosen


def choose(
    ranked: Sequence[Workflow],
    scores: Sequence[float],
    evidence: Sequence[Sequence[str]],
    k: int,
    *,
    gap: float | None,
    ratio: float | None,
    weight: float | None = COVER_WEIGHT,
) -> list[int]:
    """Positions, among memories ranked best first (with their scores), of those to serve
    together: `cover`ed by the evidence runs when there are some (and `weight` is not None);
    without, those within the relevance gap and ratio of the first, `compose`d."""
    if weight is not None and any(evidence):
        return cover([w.pattern for w in ranked], evidence, k, weight, keep=[0] if ranked else [])
    return compose(ranked[: within_gap(scores, gap, ratio)], k)


def task_template(task: str, words: Collection[str]) -> str:
    """A task text with each word not among `words` (an example value: a name, a date, an
    id) written `_`, case and spacing left out."""
    return " ".join(w if w in words else "_" for w in _WORD.findall(task.casefold()))


def _shapes(
    texts: Sequence[str], numbers: Sequence[int], share: float
) -> tuple[frozenset[str], tuple[str, ...]]:
    """The words at least `share` of the distinct `texts` hold, and the `task_template` of each
    run (run i's text is `texts[numbers[i]]`). Each distinct text's words are found once (a
    task done many times is one text); what follows by C-level passes (`map`, `chain`), not a
    generator a word: ~2x faster at 100k runs."""
    said = [_WORD.findall(t.casefold()) for t in texts]
    distinct = dict(zip(map(" ".join, said), said, strict=True))  # texts told apart by their words
    counts = Counter(itertools.chain.from_iterable(map(set, distinct.values())))
    cut = share * len(distinct)
    words = frozenset(w for w, n in counts.items() if n >= cut)
    shown = {w: w if n >= cut else "_" for w, n in counts.items()}  # a word as `task_template` writes it
    shapes = [" ".join(map(shown.__getitem__, found)) for found in said]
    return words, tuple(map(shapes.__getitem__, numbers))


@dataclass(frozen=True)
class Evidence:
    """Successful stored runs of a namespace, as evidence of what a recurring task needs:
    their task texts, actions and task vectors (unit rows), newest first.

    A task recurs when a run among its most similar is of the same task up to its example
    values: the same `task_template`, where a word counts as an example value when fewer than
    `share` of the distinct task texts hold it — the rule that keeps example values out of
    workflows (`Settings.literal_share`), applied to task words."""

    tasks: Sequence[str]
    actions: Sequence[Sequence[str]]
    vectors: npt.NDArray[np.float32]
    share: float = 0.1
    """`Settings.literal_share`."""
    others: npt.NDArray[np.float32] | None = field(default=None, repr=False, compare=False)
    """Unit task vectors of the other distinct tasks the namespace has stored runs of (failed,
    or of no known outcome), none of them a task of `tasks`; None: none."""
    words: frozenset[str] = field(init=False)
    """The words at least `share` of the distinct task texts hold."""
    templates: tuple[str, ...] = field(init=False)
    """Each run's `task_template`."""
    seen_vectors: npt.NDArray[np.float32] = field(init=False, repr=False, compare=False)
    """The unit task vectors of the distinct tasks the namespace has stored runs of, whatever
    their outcome (`familiar`): first the runs' own (`distinct`), then `others`."""
    distinct: _Groups = field(init=False, repr=False, compare=False)
    """The runs of each distinct task of `tasks`, in order of first appearance: the distinct
    task d is `seen_vectors[d]`."""
    by_template: _Groups = field(init=False, repr=False, compare=False)
    """The runs of each template (`codes` numbers them)."""
    codes: dict[str, int] = field(init=False, repr=False, compare=False)
    """Every run's template -> its group in `by_template` (`known`)."""
    _prints: Prints | None = field(default=None, init=False, repr=False, compare=False)
    """The fingerprints of `seen_vectors` (`keys_among`), made once."""
    _among: tuple[weakref.ref[npt.NDArray[np.float32]], bool | None] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """`keys_among`'s answer for one key matrix (None: being worked out)."""
    index: AnnSlot = field(default_factory=AnnSlot, repr=False, compare=False)
    """An ANN of `seen_vectors` once built (`agents.served_index` builds one in the background
    past `ANN_MIN` of them): `familiar` and `runs_for` then ask it for the nearest tasks instead
    of scoring every one."""
    shapes: InitVar[tuple[frozenset[str], Sequence[str]] | None] = None
    """`words` and `templates` when the caller has worked them out from `tasks` as this class
    does (the evidence read, by Arrow's kernels: `storage.task_shapes`); None: worked out here."""

    def __post_init__(self, shapes: tuple[frozenset[str], Sequence[str]] | None) -> None:
        texts: dict[str, int] = {}
        numbers = [texts.setdefault(t, len(texts)) for t in self.tasks]
        if shapes is None:
            words, templates = _shapes(list(texts), numbers, self.share)
        elif len(shapes[1]) != len(self.tasks):
            raise ValueError(f"{len(shapes[1])} templates for {len(self.tasks)} runs")
        else:
            words, templates = shapes[0], tuple(shapes[1])
        object.__setattr__(self, "words", words)
        object.__setattr__(self, "templates", templates)
        codes: dict[str, int] = {}
        object.__setattr__(
            self, "by_template", _Groups.of([codes.setdefault(t, len(codes)) for t in templates])
        )
        object.__setattr__(self, "codes", codes)
        groups = _Groups.of(numbers)
        object.__setattr__(self, "distinct", groups)
        first = groups.order[groups.starts[:-1]]  # each distinct task's first run (a stable sort)
        own = self.vectors if len(first) == len(self.vectors) else self.vectors[first]
        others = self.others if self.others is not None else own[:0]
        object.__setattr__(self, "seen_vectors", np.concatenate([own, others]) if len(others) else own)

    @property
    def known(self) -> KeysView[str]:
        """Every run's template: a task whose template is not here is looked up without a product."""
        return self.codes.keys()

    def familiar(self, query: npt.NDArray[np.float32], floor: float) -> bool:
        """Whether the namespace has stored a run of a task at least `floor` similar to the
        task embedded as `query` (cosine): a task of a domain it knows, even when no memory of
        its kind was induced (its runs failed, or were of another agent). With an `index`, of
        the `FAMILIAR_KEYS` tasks it finds nearest (exactly scored): a yes is exact, a no
        misses a task at least that similar only where the index missed every one."""
        return self.nearest_seen(query) >= floor

    def nearest_seen(self, query: npt.NDArray[np.float32], ef: int = FAMILIAR_EF) -> float:
        """The similarity of the stored task nearest the task embedded as `query` (-inf: none);
        with an `index`, of the `FAMILIAR_KEYS` it finds nearest at breadth `ef` (`familiar`)."""
        seen, ann = self.seen_vectors, self.index.ann
        if ann is None:
            products = product(seen, query)
        else:  # the rows found scored in place: no copy of them, no BLAS thread setting
            products = ann.products(seen, query, ann.search(query, FAMILIAR_KEYS, ef))
        return float(snap_cosines(products).max()) if len(products) else -np.inf

    def floor_keeps(
        self,
        query: npt.NDArray[np.float32],
        floor: float | None,
        similarity: Sequence[float],
        by_example: Sequence[bool],
        *,
        recurs: bool,
        familiar: bool | None = None,
    ) -> list[bool]:
        """The relevance floor, the one rule `memory.search`, `memory.context`,
        `search_workflow` and `flowmem eval` apply (`search.floor_keeps`): which of the
        memories a task (embedded as `query`) may be served, given each one's similarity to it
        and whether it is keyed by example tasks. All of them when there is no floor, the task
        `recurs` (`runs_for` found its runs) or is `familiar`; otherwise those that
        `retrieval.serving.above_floor` keeps. The stored runs are looked at only when the
        nearest memory keyed by example tasks is below the floor (`above_floor` keeps all
        otherwise, whatever they hold). `familiar`: the answer `familiar` gives, when the caller
        has it (`lookup`)."""
        if not floor or recurs:
            return [True] * len(similarity)
        kept = above_floor(similarity, by_example, floor)
        if all(kept):
            return [True] * len(similarity)
        known = self.familiar(query, floor) if familiar is None else familiar
        return [True] * len(similarity) if known else kept

    def lookup(self, task: str, query: npt.NDArray[np.float32], floor: float | None, *, runs: bool) -> Lookup:
        """What a search asks of the stored runs besides ranking, in one go (a search hands it
        to a helper thread while it ranks: `retrieval.beside`): the runs `runs_for` gives
        (`runs`: when the search chooses by them), and, for a task whose template no run has
        (it cannot recur) when there is a `floor`, whether it is `familiar`, which `floor_keeps`
        asks when no memory keyed by example tasks clears the floor (a task of no known domain).
        Other tasks rarely need it: `floor_keeps` asks it of them itself when it does."""
        found = self.runs_for(task, query) if runs else []
        unknown = self._template(task) is None  # then `found` is empty
        return Lookup(found, self.familiar(query, floor) if floor and unknown else None)

    def keys_among(
        self, keys: npt.NDArray[np.float32], later: Callable[[Callable[[], object]], bool]
    ) -> bool:
        """Whether every row of `keys` (the served keys) is one of `seen_vectors`, bit for bit
        (`retrieval.keys_seen`): then a task that is not `familiar` is `floor` similar to no key
        either. Worked out once per key matrix by `later` (a helper thread: ~0.1 s at 100k
        keys and stored tasks), and False until it has been."""
        found = self._among
        if found is not None and found[0]() is keys:
            return found[1] is True
        object.__setattr__(self, "_among", (weakref.ref(keys), None))
        if not later(functools.partial(self.work_out_keys, keys)):
            object.__setattr__(self, "_among", None)  # not handed: asked again by the next search
        return False

    def work_out_keys(self, keys: npt.NDArray[np.float32]) -> None:
        """`keys_among`'s answer for `keys`, worked out here (~0.15 s at 100k keys and stored
        tasks): the served index does it in its HNSW build's thread once the stored tasks'
        HNSW is built, a search in the helper for keys it meets first."""
        if self._prints is None:
            object.__setattr__(self, "_prints", Prints(self.seen_vectors))
        assert self._prints is not None
        answer = all_among(keys, self._prints)
        found = self._among
        if found is None or found[0]() is keys:  # not asked of other keys meanwhile
            object.__setattr__(self, "_among", (weakref.ref(keys), answer))

    def knows(self, task: str) -> bool:
        """Whether a stored run has the task's template (one with a word that is not an example
        value): whether it may recur."""
        return self._template(task) is not None

    def _template(self, task: str) -> str | None:
        """The task's `task_template` when a stored run has it and it holds a word that is not
        an example value; else None (the task cannot recur). None at once when no run is
        stored (a store of workflows alone): no template to work out."""
        if not self.known:
            return None
        template = task_template(task, self.words)
        if template not in self.known or set(template.split()) <= {"_"}:
            return None
        return template

    def runs_for(self, task: str, query: npt.NDArray[np.float32]) -> list[Sequence[str]]:
        """The actions of the runs `cover` chooses with for `task` (embedded as `query`): the
        `nearest` runs when the task recurs, i.e. when one of the most similar is of the same
        task up to its example values; otherwise none, and the relevance gap decides. A task
        seen before is served what covers what worked for it; a new one, what resembles it.

        With an `index`, the runs scored (exactly) are those of the task's template and those
        of the `RECUR_KEYS` distinct tasks the index finds nearest, not every run: the answer
        differs from scoring every run only where the index misses a task of another template
        nearer than the runs it returns (`python bench/recurring.py` measures how often)."""
        template = self._template(task)
        if template is None:  # unknown, or of example values only: says nothing of the task
            return []
        ann = self.index.ann
        if ann is None:  # every run scored
            runs, scores = None, snap_cosines(product(self.vectors, query))
        else:
            runs = self._near(ann, query, template)
            scores = snap_cosines(ann.products(self.vectors, query, runs))
        found = nearest(scores)  # positions in `runs`, which is sorted: ties by run as above
        chosen = found if runs is None else runs[found].tolist()
        top = scores[found[0]]
        if not any(
            self.templates[r] == template for r, f in zip(chosen, found, strict=True) if scores[f] >= top
        ):
            return []
        return [self.actions[r] for r in chosen]

    def _near(self, ann: KeyANN, query: npt.NDArray[np.float32], template: str) -> npt.NDArray[np.int64]:
        """The runs `runs_for` scores with an index: every run of `template`, and every run of
        the distinct tasks among the `RECUR_KEYS` stored tasks the index finds nearest (those of
        `others` have none), in order."""
        rows = ann.search(query, RECUR_KEYS)
        groups = self.distinct
        near = [groups.members(int(d)) for d in rows[rows < groups.count].tolist()]
        return sorted_unique(np.concatenate([self.by_template.members(self.codes[template]), *near]))


@dataclass(frozen=True)
class Lookup:
    """What `Evidence.lookup` found for one task."""

    runs: list[Sequence[str]]
    """The actions of the runs `runs_for` chose (none: the task does not recur, or was not
    asked)."""
    familiar: bool | None
    """`Evidence.familiar`'s answer; None: not asked."""


@dataclass(frozen=True)
class _Groups:
    """Positions grouped by a number per position (0, 1, …: a group per number), each group's
    in order: `order[starts[g]:starts[g + 1]]`."""

    order: npt.NDArray[np.int64]
    starts: npt.NDArray[np.int64]

    @classmethod
    def of(cls, numbers: Sequence[int]) -> _Groups:
        """The groups of positions by `numbers[position]`."""
        found = np.asarray(numbers, dtype=np.int64)
        sizes = np.bincount(found, minlength=int(found.max(initial=-1)) + 1)
        return cls(np.argsort(found, kind="stable"), np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))

    @property
    def count(self) -> int:
        """How many groups."""
        return len(self.starts) - 1

    def members(self, group: int) -> npt.NDArray[np.int64]:
        """The positions of one group, in order."""
        return self.order[self.starts[group] : self.starts[group + 1]]
