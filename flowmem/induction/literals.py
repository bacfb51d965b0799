"""Example-specific literals: the values an abstract workflow must never carry.

A value is example-specific when it is specific to a few examples: an argument value used by
fewer than `max_share` of the trajectories of the namespace, or a value that appears in the
task text of the runs it came from (then it is a parameter of the task). The de-specification
check finds such literals in any text an inducer produced.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from flowmem.models import Trajectory

__all__ = [
    "LiteralIndex",
    "LiteralSet",
    "canonical",
    "find_literals",
    "in_task",
    "literal_spans",
    "mask",
    "scalar_text",
    "scalars",
]

MIN_CHARS = 3
"""Shorter values (ids like "1", "no") are too common as substrings to be checked."""

MAX_CHOICES = 5
"""An argument that takes at most this many distinct values over the whole corpus draws them
from a small, closed set (a cabin class, a plot type, a status): a set an agent reads at a
glance and picks from. Names, ids, dates and free text take ever more values as tasks come."""
MIN_TASKS = 3
"""A value of such an argument is categorical once runs of this many distinct tasks used it
(the default minimum cluster size: a kind of task, not one example)."""


def scalar_text(value: Any) -> str | None:
    """A scalar argument value rendered as text (None for containers and nulls)."""
    if value is None or isinstance(value, dict | list):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def scalars(value: Any) -> Iterator[str]:
    """Every scalar inside a (nested) argument value, as text."""
    if isinstance(value, dict):
        for item in value.values():
            yield from scalars(item)
    elif isinstance(value, list):
        for item in value:
            yield from scalars(item)
    else:
        text = scalar_text(value)
        if text is not None:
            yield text


@functools.lru_cache(maxsize=65536)
def _pattern(literal: str) -> re.Pattern[str]:
    # Whole words, case-insensitive: "olga" is found in "Olga's" and "olga@x.com", "line" is
    # not found in "online", nor "users_count" in the dotted name "analytics.users_count".
    return re.compile(r"(?<!\w)(?<!\w\.)" + re.escape(literal) + r"(?!\w)(?!\.\w)", re.IGNORECASE)


def mask(text: str, literals: Iterable[str], replacement: str = "{…}") -> str:
    """Replace every occurrence of the literals in a text (as `find_literals` finds them)."""
    for lit in find_literals(text, literals):
        text = _pattern(lit).sub(replacement, text)
    return text


def find_literals(text: str, literals: Iterable[str]) -> list[str]:
    """The literals that occur in `text` (word-bounded, case-insensitive), longest first (then
    alphabetically). A `LiteralSet` finds them through its index."""
    if isinstance(literals, LiteralSet):
        return literals.find(text)
    low = text.lower()
    candidates = {lit for lit in literals if lit and lit.lower() in low}
    return [lit for lit in sorted(candidates, key=_longest_first) if _pattern(lit).search(text)]


def literal_spans(text: str, literals: Iterable[str]) -> list[tuple[int, int, str]]:
    """Where the literals occur in `text` (as `find_literals` finds them): (start, end,
    literal), a longer literal first where two overlap, in text order."""
    spans: list[tuple[int, int, str]] = []
    for lit in find_literals(text, literals):
        for m in _pattern(lit).finditer(text):
            if all(m.end() <= a or m.start() >= b for a, b, _ in spans):
                spans.append((m.start(), m.end(), lit))
    return sorted(spans)


def _longest_first(literal: str) -> tuple[int, str]:
    return -len(literal), literal


_WORD = re.compile(r"\w+")
_LETTERS = re.compile(r"[^\W\d_]+")


class LiteralSet(AbstractSet[str]):
    """Literals to look for in many texts: `find_literals` then looks up, in a dict of them,
    only the slices of the text that could be one (`_index`), instead of reading every
    literal.
    With `base` (another LiteralSet), it holds the base's literals too without copying them:
    membership, iteration and the index go to the base for those, so a set made
    from a few literals over a large shared base costs its own literals only, and the base's
    index is built once however many sets share it."""

    def __init__(self, literals: Iterable[str] = (), base: LiteralSet | None = None) -> None:
        own = frozenset(literals)
        self._own = own if base is None else frozenset(v for v in own if v not in base)
        self._base = base

    def __contains__(self, value: object) -> bool:
        return value in self._own or (self._base is not None and value in self._base)

    def __iter__(self) -> Iterator[str]:
        yield from self._own
        if self._base is not None:
            yield from self._base

    def __len__(self) -> int:
        return len(self._own) + (len(self._base) if self._base is not None else 0)

    def __repr__(self) -> str:
        return f"LiteralSet({len(self)} literals)"

    @functools.cached_property
    def _index(self) -> _Index:
        """These literals by their lower-cased text, and for each first word of one, where
        that word starts in it and how long it is. A literal found whole-word starts its first
        word where the text starts a word, equal to it: so a text's literals are among the
        slices of its lower-cased text that start, at such an offset, before one of its words
        and have such a length (a dict lookup each), whatever words they share with other
        literals (a task text used as an argument shares all of its own but a name)."""
        by_text: dict[str, list[str]] = {}
        starts: dict[str, set[tuple[int, int]]] = {}
        wordless: list[tuple[str, str]] = []
        for lit in self._own:
            if not lit:
                continue
            low = lit.lower()
            first = _WORD.search(low)
            if first is None:
                wordless.append((lit, low))
                continue
            by_text.setdefault(low, []).append(lit)
            starts.setdefault(first.group(), set()).add((first.start(), len(low)))
        return _Index(by_text, {w: tuple(sorted(s)) for w, s in starts.items()}, wordless)

    def find(self, text: str) -> list[str]:
        """The literals that occur in `text`, as `find_literals` finds them (remembered for
        the last `_FOUND` texts: induction asks again for each variant of a cluster)."""
        found = self._found.get(text)
        if found is None:
            found = self._find(text)
            if len(self._found) >= _FOUND:
                self._found.clear()
            self._found[text] = found
        return list(found)

    @functools.cached_property
    def _found(self) -> dict[str, tuple[str, ...]]:
        return {}

    def _find(self, text: str) -> tuple[str, ...]:
        low = text.lower()
        words = [(m.start(), m.group()) for m in _WORD.finditer(low)]
        candidates: set[str] = set()
        index: LiteralSet | None = self
        while index is not None:
            by_text, starts, wordless = index._index
            for at, word in words:
                for offset, length in starts.get(word, ()):
                    if offset <= at:
                        candidates.update(by_text.get(low[at - offset : at - offset + length], ()))
            candidates.update(lit for lit, lw in wordless if lw in low)
            index = index._base
        return tuple(lit for lit in sorted(candidates, key=_longest_first) if _pattern(lit).search(text))


class _Index(NamedTuple):
    """A `LiteralSet`'s literals, as its `find` looks them up."""

    by_text: dict[str, list[str]]
    """Lower-cased text -> the literals that lower-case to it."""
    starts: dict[str, tuple[tuple[int, int], ...]]
    """First word (lower case) -> (where it starts, length) of each literal text it begins."""
    wordless: list[tuple[str, str]]
    """Literals without a word, with their lower-cased text: looked for in every text."""


_FOUND = 65_536
"""Texts a `LiteralSet` remembers what it found in."""

_FOUND = 65_536
"""Texts a `LiteralSet` remembers what it found in."""

_Key = str | tuple[str, str]
"""What `LiteralSet` files a literal under: its one word, or a pair of its adjacent words."""


def _keys(words: list[str]) -> list[_Key]:
    """A literal's possible keys: its word when it has one, else its adjacent pairs."""
    if len(words) == 1:
        return [words[0]]
    return list(zip(words, words[1:], strict=False))


@dataclass
class LiteralIndex:
    """How many trajectories of a corpus use each argument value."""

    total: int = 0
    """Trajectories counted."""
    counts: Counter[str] = field(default_factory=Counter)
    """Lower-cased scalar argument value -> trajectories using it."""
    max_share: float = 0.1
    """A value used by fewer than this share of trajectories is example-specific."""
    _rare: set[str] | None = field(default=None, repr=False)
    _rare_set: LiteralSet | None = field(default=None, repr=False)

    vocabulary: set[str] = field(default_factory=set)
    """Vocabulary of the corpus: agent roles, action names, their dotted parts, argument keys.
    A value equal to one of these (a field name passed as an argument, say) names the schema,
    not an example, so it is never example-specific."""
    categorical: set[str] = field(default_factory=set)
    """Lower-cased values of arguments that take at most `MAX_CHOICES` values over the corpus,
    each used in runs of at least `MIN_TASKS` distinct tasks: never example-specific."""
    task_words: Counter[str] = field(default_factory=Counter)
    """Word (lower case, letters only) of the corpus's task texts -> distinct texts holding it."""
    task_texts: int = 0
    """Distinct task texts counted."""
    short: Counter[str] = field(default_factory=Counter)
    """Lower-cased scalar argument value shorter than `MIN_CHARS` (a state's code, a short
    name, a small number) -> trajectories using it: too short to look for in a text, but an
    argument passed as exactly that value is counted like any other (`is_rare`)."""

    @classmethod
    def build(cls, trajectories: Iterable[Trajectory], *, max_share: float = 0.1) -> LiteralIndex:
        """Count argument values over a corpus."""
        index = cls(max_share=max_share)
        slots: dict[tuple[str, str], dict[str, set[str]]] = {}  # (action, key) -> value -> tasks
        vocabulary, actions = index.vocabulary, set()
        tasks: set[str] = set()
        for t in trajectories:
            index.total += 1
            if t.task not in tasks:
                tasks.add(t.task)
                index.task_words.update(set(_LETTERS.findall(t.task.lower())))
            vocabulary.add(t.agent.lower())
            used: set[str] = set()  # the run's values, counted once each
            short: set[str] = set()
            for s in t.steps:
                action = s.action.lower()
                if action not in actions:
                    actions.add(action)
                    vocabulary.update([action, *action.split(".")])
                for key, value in s.args.items():
                    low_key = key.lower()
                    vocabulary.add(low_key)
                    texts = [value] if type(value) is str else scalars(value)
                    values = [v.lower() for v in texts if len(v) >= MIN_CHARS]
                    used.update(values)
                    short.update(v.lower() for v in texts if 0 < len(v) < MIN_CHARS)
                    slot = slots.setdefault((action, low_key), {})
                    if len(slot) <= MAX_CHOICES:  # past that it is open: no need to keep counting
                        for v in values:
                            slot.setdefault(v, set()).add(t.task)
            index.counts.update(used)
            index.short.update(short)
        for slot in slots.values():
            if len(slot) <= MAX_CHOICES:
                index.categorical.update(v for v, seen in slot.items() if len(seen) >= MIN_TASKS)
        index.task_texts = len(tasks)
        return index

    def example_word(self, word: str) -> bool:
        """True for a task word (lower case) that fewer than `MIN_TASKS` distinct task texts
        of the corpus hold (all of them, in a corpus of fewer): one example's word (the item
        a customer returns, a meeting's title), not a kind of task's, as a value is
        `categorical` once that many tasks use it."""
        return self.task_words.get(word, 0) < min(MIN_TASKS, self.task_texts)

    def rare_values(self) -> set[str]:
        """Every example-specific argument value of the corpus (lower-cased): the rare ones
        that are not `categorical`."""
        if self._rare is None:
            self._rare = {v for v in self.counts if self.is_rare(v) and v not in self.categorical}
        return self._rare

    def is_rare(self, value: str) -> bool:
        """True for a value used as an argument by fewer than `max_share` of the trajectories
        (abstraction makes it a placeholder; a `categorical` one is still no example's value,
        so a workflow that shows it is not refused), a short one too (`short`: "TX" passed as
        a state by a few runs is an example's as "Texas" would be)."""
        low = value.lower()
        n = (self.counts if len(low) >= MIN_CHARS else self.short).get(low, 0)
        return 0 < n < self.max_share * self.total and low not in self.vocabulary and not self.task_word(low)

    def task_word(self, value: str) -> bool:
        """True for a value (lower case) that is one word the tasks are worded with, not a
        parameter of theirs: at least `max_share` of the corpus's distinct task texts hold it
        (and `MIN_TASKS` of them), and fewer runs pass it as an argument than there are texts
        holding it ("meeting", which one run searched its calendar for). A task's parameter is
        passed by the runs of the tasks that name it, at least one a text ("olga", however
        many tasks name her); `metrics.slot_literals` holds a slot value that many tasks carry
        to be the template's alike."""
        held = self.task_words.get(value, 0)
        return held >= max(MIN_TASKS, self.max_share * self.task_texts) and self.counts.get(value, 0) < held

    def choices(self, values: Iterable[Any]) -> list[str] | None:
        """The observed values of a placeholder as choices (sorted), when there are 2 to
        `MAX_CHOICES` of them and each is `categorical` (a cabin class, a plot type, a
        status); else None: the placeholder stands for an example's value."""
        texts: dict[str, str] = {}
        for value in values:
            text = scalar_text(value)
            if text is None or text.lower() not in self.categorical:
                return None
            texts.setdefault(text.lower(), text)
        if not 2 <= len(texts) <= MAX_CHOICES:
            return None
        return sorted(texts.values(), key=str.lower)

    def example_literals(self, trajectories: Sequence[Trajectory]) -> LiteralSet:
        """What a workflow induced from these trajectories must not contain: every rare
        argument value of the corpus, and their argument values that appear in their own
        task text (parameters of the task, however common, unless `categorical`: one of a
        few values that many tasks share is no example's)."""
        if self._rare_set is None:
            self._rare_set = LiteralSet(self.rare_values())
        found: set[str] = set()  # the runs' own values: the rare ones are the base's
        for t in trajectories:
            for s in t.steps:
                for v in scalars(s.args):
                    if (
                        len(v) >= MIN_CHARS
                        and v.lower() not in self.categorical
                        and not self.task_word(v.lower())
                        and _pattern(v).search(t.task)
                    ):
                        found.add(v.lower())
        return LiteralSet(found, base=self._rare_set)


def in_task(value: Any, task: str) -> bool:
    """True when a scalar value (≥ 3 characters) appears in a task text."""
    text = scalar_text(value)
    return text is not None and len(text) >= MIN_CHARS and _pattern(text).search(task) is not None


def canonical(value: Any) -> str:
    """A stable text key for any argument value (to compare values across runs)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
