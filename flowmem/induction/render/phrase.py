"""What a cluster's tasks ask, as a short verb phrase without their example values (pure).

A workflow is named and described by what its tasks ask ("delete emails from {query}",
"deploy {version} to {environment}"), not by the actions it takes: `task_phrase` reads the
task texts of the runs a workflow was induced from.

- Example values leave the texts first: each value a run passed to a step that the workflow
  fills with a placeholder becomes that placeholder where the run's task names it ("deploy
  v2.4.1 to staging" -> "deploy {version} to {environment}"); any other value the run
  passed that its task names (a plot type, a list's name) or a value of the few an argument
  takes in the namespace (`LiteralIndex.categorical`: a cabin class), any other example value
  (`literals.find_literals` against the cluster's example values), a token with a digit or
  a sign (an id, an address, a version), and the name of a month or a weekday (a date's
  words) are dropped.
- A word is the tasks' when at least half of the distinct task texts hold it
  (`MIN_SHARE`): the words the tasks share, not those of one example.
- The verb is a shared word that reads as one: the verb of the workflow's goal or another
  of its steps (`delete` for `delete_email`, whatever form the task gives it: "deleted"), a
  verb tool names start with (`describe.VERBS`), or the first word of a request clause
  ("Move all...", "I need to reassign...", "Can you make..."): the first word that is not
  a function word (`STOP_WORDS`). Clauses of a condition ("if...", "when...") ask for
  nothing, so their words are not taken for the verb.
- The object is what follows the verb in the tasks' clauses: shared words and placeholders,
  each kept when at least half of the clauses hold it, joined by the prepositions the
  tasks put before them ("emails from {query}").

Where no shared word reads as a verb (long narratives whose requests differ, one boilerplate
for every task), there is no phrase and the caller falls back to the goal's action.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from flowmem.induction.literals import (
    MIN_CHARS,
    MIN_TASKS,
    LiteralIndex,
    find_literals,
    literal_spans,
    scalar_text,
    scalars,
)
from flowmem.models import PLACEHOLDER, Trajectory, WorkflowStep

__all__ = [
    "CLAUSE_WORDS",
    "CONDITION_WORDS",
    "COUNTING_WORDS",
    "DATE_WORDS",
    "MIN_SHARE",
    "PREPOSITIONS",
    "STOP_WORDS",
    "Phrase",
    "Verbs",
    "inflected",
    "task_phrase",
]

MIN_SHARE = 0.5
"""A word is the tasks' when at least this share of the distinct task texts (or of the
clauses after the verb) holds it: most of them, so no single example's word, and a word of
half of a cluster's phrasings still counts."""

PREPOSITIONS = frozenset(
    {
        "about", "above", "across", "after", "against", "along", "among", "around", "at",
        "before", "behind", "below", "between", "by", "during", "for", "from", "in", "into",
        "of", "off", "on", "onto", "out", "over", "per", "since", "through", "to", "toward",
        "towards", "under", "until", "up", "upon", "via", "with", "within", "without",
    }
)  # fmt: skip
"""English prepositions: the words that join an object to what it is about ("from {sender}")."""

CLAUSE_WORDS = frozenset({"and", "or", "but", "then", "also", "so", "yet", "nor", "plus"})
"""Conjunctions that start a new clause (a new request) within a sentence."""

CONDITION_WORDS = frozenset(
    {"if", "when", "whenever", "unless", "whether", "because", "since", "while", "although", "though", "once"}
)
"""Subordinating conjunctions: the clause they open states a condition or a reason, not a
request, so no verb is taken from it."""

STOP_WORDS = (
    PREPOSITIONS
    | CLAUSE_WORDS
    | CONDITION_WORDS
    | frozenset(
        {
            # articles, determiners and quantifiers
            "a", "an", "the", "this", "that", "these", "those", "all", "any", "some", "each",
            "every", "both", "either", "neither", "no", "not", "other", "another", "such",
            "same", "own", "more", "most", "less", "least", "few", "much", "many", "several",
            "very", "too", "only", "just", "even", "still", "already", "again", "ever", "never",
            "also", "as", "than", "there", "here", "now", "how", "what", "which", "who", "whom",
            "whose", "where", "why", "whatever", "whichever", "whoever",
            # pronouns
            "i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves", "you",
            "your", "yours", "yourself", "yourselves", "he", "him", "his", "himself", "she",
            "her", "hers", "herself", "it", "its", "itself", "they", "them", "their", "theirs",
            "themselves", "one", "someone", "something", "anyone", "anything", "everyone",
            "everything", "nothing",
            # auxiliary and modal verbs
            "am", "is", "are", "was", "were", "be", "been", "being", "do", "does", "did", "done",
            "doing", "have", "has", "had", "having", "can", "could", "may", "might", "must",
            "shall", "should", "will", "would", "ought", "cannot", "let", "lets",
            # the words a request is framed with ("I want to...", "please...", "can you help")
            "please", "kindly", "want", "wants", "wanted", "need", "needs", "needed", "like",
            "wish", "wishes", "help", "try", "trying", "able", "sure", "okay", "ok", "hi",
            "hello", "thanks", "thank", "yes",
            # contractions, split at the apostrophe
            "s", "t", "re", "ve", "ll", "d", "m", "don", "doesn", "didn", "isn", "aren", "won",
            "can't", "don't", "i'm", "i've", "i'd", "i'll", "you're", "you've", "it's", "let's",
        }
    )
)  # fmt: skip
"""English function words (closed classes: articles, determiners, pronouns, prepositions,
conjunctions, auxiliaries and modals) and the words a request is framed with: words any
English task text uses whatever it asks, so they name nothing the task is about."""

COUNTING_WORDS = frozenset(
    {
        "once", "twice", "thrice", "times", "zero", "one", "two", "three", "four", "five", "six",
        "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen",
        "sixteen", "seventeen", "eighteen", "nineteen", "twenty", "thirty", "forty", "fifty",
        "sixty", "seventy", "eighty", "ninety", "hundred", "thousand", "million", "first",
        "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
        "eleventh", "twelfth", "single", "double", "triple",
    }
)  # fmt: skip
"""English number words: how many times or which one is an example's count, never what a
kind of task is (a name carries none)."""

DATE_WORDS = frozenset(
    {
        "january", "february", "march", "april", "may", "june", "july", "august", "september",
        "october", "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
        "sep", "sept", "oct", "nov", "dec", "monday", "tuesday", "wednesday", "thursday",
        "friday", "saturday", "sunday",
    }
)  # fmt: skip
"""Months and weekdays: the words of a date, which is an example's value."""

_NOUN_ENDINGS = ("tion", "sion", "ment", "ness", "ity", "ture", "able", "ible")
"""Word endings that make English nouns and adjectives (conversion, payment, temperature,
variable); `-age` too in words of seven letters or more (average, percentage, not manage)."""


def inflected(word: str) -> bool:
    """Whether a word has a form no imperative takes: a past participle or -ing form
    (`engaged`, `upcoming`), a plural (`users`, not `access`, `status`, `analysis`) or a
    noun's or adjective's ending (`_NOUN_ENDINGS`)."""
    if len(word) >= 5 and word.endswith(("ed", "ing", *_NOUN_ENDINGS)):
        return True
    if len(word) >= 7 and word.endswith("age"):
        return True
    return len(word) >= 4 and word.endswith("s") and not word.endswith(("ss", "us", "is"))


_TOKEN = re.compile(r"\x01(\d+)\x02|\w+(?:['’.@/:+-]\w+)*|[.!?;:,()\[\]{}\"*#|\n]")
_BOUNDARY = frozenset('.!?;:,()[]{}"*#|\n')
_RELATIVE = frozenset({"that", "which", "who", "whom", "whose", "where"})
_SUFFIXES = ("ing", "ed", "es", "s", "d")
_FRAME = frozenset({"to", "please", "kindly", "let's"})
"""What comes right before a requested verb: an infinitive's "to", a politeness word."""
_MODALS = frozenset({"can", "could", "would", "will", "shall"})
"""A question that asks for something: "can you move..."."""
_PASSIVE = frozenset({"be", "been", "being", "get", "gets", "got"})
"""What comes right before a passive verb: "need to be deleted"."""
_MAX_OBJECT = 6


def _participle(word: str) -> bool:
    """A word that introduces what follows it as a value ("titled {subject}", "saying
    {body}"): a past participle or an -ing form."""
    return len(word) > 4 and word.endswith(("ed", "ing"))


@dataclass(frozen=True)
class Phrase:
    """What the tasks ask: a verb, then its object's words and placeholders in order."""

    verb: str
    """The verb, in its base form (`delete`)."""
    object: tuple[tuple[str, str], ...] = ()
    """What it acts on, in order: (the preposition or participle before it, if any; a word or
    a `{placeholder}`): ("", "emails"), ("from", "{query}")."""
    checks: bool = False
    """True where the workflow only looks up what decides whether to do what the tasks ask
    (it makes no change of its own): "check whether to send email ...", named
    `check_before_send_email`."""

    def text(self) -> str:
        """The phrase in words, placeholders in braces: "delete emails from {query}"."""
        text = " ".join(w for pair in [("", self.verb), *self.object] for w in pair if w)
        return f"check whether to {text}" if self.checks else text

    def words(self) -> list[str]:
        """The phrase as name words: the verb and its object's words with the prepositions
        before them; placeholders (as their names' words) only when the object has no word of
        its own ("deploy version to environment", but "delete emails", not "delete emails from
        query"): a placeholder's name is its argument's key, which reads as a noun only where
        nothing else names the object."""
        own = [
            (c, w)
            for i, (c, w) in enumerate(self.object)
            if not w.startswith("{") and not self._introduces(i)
        ]
        items = own or [(c, w.strip("{}").replace("_", " ")) for c, w in self.object]
        out = [self.verb]
        for connector, item in items:
            words = [x for x in item.split() if x not in out]
            if words:
                out += [connector, *words] if connector in PREPOSITIONS else words
        while len(out) > 1 and out[-1] in PREPOSITIONS:
            out.pop()
        return ["check", "before", *out] if self.checks else out

    def _introduces(self, i: int) -> bool:
        """Whether the object's i-th word is no thing of its own: a past participle ("called",
        "titled"), or an -ing form right before another word or a placeholder ("saying
        {body}", "pending order"); last, or before a preposition, an -ing word names the
        thing ("meeting at the earliest time", "schedule a meeting")."""
        word = self.object[i][1]
        if not _participle(word):
            return False
        if not word.endswith("ing"):
            return True  # a past participle
        after = self.object[i + 1] if i + 1 < len(self.object) else None
        return after is not None and not after[0]


@dataclass(frozen=True)
class _Token:
    kind: str
    """`word`, `stop`, `value` (dropped), `slot` (a placeholder) or `break` (ends a clause;
    `cond` for one that opens a condition's clause)."""
    text: str = ""
    """The word (lower case), or the placeholder's name in braces."""


def _value_slots(steps: Sequence[WorkflowStep], runs: Iterable[Trajectory]) -> dict[str, dict[str, str]]:
    """Per run id: each value the run passed -> the placeholder the workflow has there (by
    action and argument key), or "" (a value of the run's own, dropped where its task names
    it: a plot type the task asks for is still an example's value)."""
    holes: dict[tuple[str, str], str] = {}
    for s in steps:
        for key, value in s.args.items():
            names = PLACEHOLDER.findall(value) if isinstance(value, str) else []
            if len(names) == 1 and value == "{" + names[0] + "}":
                holes.setdefault((s.action, key), names[0])
    out: dict[str, dict[str, str]] = {}
    for run in runs:
        found = out.setdefault(run.id, {})
        values = [(holes.get((step.action, k), ""), v) for step in run.steps for k, v in step.args.items()]
        for name, value in sorted(values, key=lambda nv: not nv[0]):  # a placeholder's first
            for text in scalars(value) if not name else [scalar_text(value) or ""]:
                if len(text) >= MIN_CHARS:
                    found.setdefault(text, name)
    return out


def _tokens(
    task: str, slots: Mapping[str, str], forbidden: Collection[str], index: LiteralIndex | None
) -> list[_Token]:
    """A task text as tokens, its example values marked (see the module's doc)."""
    spans = literal_spans(task, slots)
    taken = [(a, b) for a, b, _ in spans]
    others = [*literal_spans(task, forbidden), *literal_spans(task, index.categorical if index else ())]
    for a, b, _ in sorted(others, key=lambda span: span[0] - span[1]):  # the longest first
        if all(b <= x or a >= y for x, y in taken):
            spans.append((a, b, ""))
            taken.append((a, b))
    names: list[str] = []
    text = task
    for a, b, lit in sorted(spans, reverse=True):
        names.append(slots.get(lit, "") if lit else "")
        text = text[:a] + f" \x01{len(names) - 1}\x02 " + text[b:]
    out: list[_Token] = []
    for m in _TOKEN.finditer(text):
        if m.group(1) is not None:
            name = re.sub(r"_\d+$", "", names[int(m.group(1))])
            out.append(_Token("slot", "{" + name + "}") if name else _Token("value"))
        else:
            t = _classify(m.group(0).lower().replace("’", "'"), out[-1] if out else None)
            rare = t.kind == "word" and index is not None and index.example_word(t.text)
            out.append(_Token("value", t.text) if rare else t)
    return _units(out)


def _classify(word: str, before: _Token | None) -> _Token:
    if word in _BOUNDARY or word in CLAUSE_WORDS:
        return _Token("break", word)
    if word in CONDITION_WORDS or (
        word in _RELATIVE and before is not None and before.kind in {"word", "slot", "value"}
    ):
        return _Token("cond")
    if "'" in word:  # a possessive is its noun; any other contraction is a function word
        return _classify(word[:-2], before) if word.endswith("'s") else _Token("stop", word)
    if word in STOP_WORDS:
        return _Token("stop", word)
    if not word.isalpha() or word in DATE_WORDS or word in COUNTING_WORDS:
        return _Token("value", word)
    return _Token("word", word)


def _units(tokens: list[_Token]) -> list[_Token]:
    """A word next to a number is part of its value: its unit ("2 days") or what it
    counts from ("the last 3 days")."""
    numeric = [t.kind == "value" and any(c.isdigit() for c in t.text) for t in tokens]
    out = list(tokens)
    for i, t in enumerate(tokens):
        near = (i > 0 and numeric[i - 1]) or (i + 1 < len(tokens) and numeric[i + 1])
        if t.kind == "word" and near:
            out[i] = _Token("value", t.text)
    return out


def _clauses(tokens: Sequence[_Token]) -> list[tuple[bool, list[_Token]]]:
    """The tokens cut at clause breaks, each clause with whether it asks for something (a
    clause a condition word or a relative pronoun opens does not)."""
    out: list[tuple[bool, list[_Token]]] = []
    current: list[_Token] = []
    asks = True
    for t in [*tokens, _Token("break")]:
        if t.kind not in {"break", "cond"}:
            current.append(t)
            continue
        if current:  # a label ("Your goal:", "Address: ...") asks for nothing
            out.append((asks and t.text != ":", current))
        current, asks = [], t.kind == "break"
    return out


@dataclass(frozen=True)
class Verbs:
    """The verbs a task word may be a form of."""

    goal: str
    """The verb of the workflow's goal step."""
    steps: frozenset[str]
    """The verbs of all its steps."""
    known: frozenset[str]
    """The verbs tool names start with (`describe.VERBS`)."""

    def base(self, word: str) -> str:
        """The word's base form, where it is a form of a known verb ("deleted" -> delete)."""
        known = self.steps | self.known
        if word in known:
            return word
        for suffix in _SUFFIXES:
            if not word.endswith(suffix):
                continue
            stem = word[: -len(suffix)]
            for form in (stem, stem + "e", stem[:-1] if len(stem) > 3 and stem[-1] == stem[-2] else ""):
                if len(form) > 2 and form in known:
                    return form
        return word


Texts = Sequence[list[tuple[bool, list[_Token]]]]
"""Per distinct task text, its clauses (see `_clauses`)."""


def _nounlike(word: str, verbs: Verbs) -> bool:
    """A word no imperative takes the form of (`inflected`: "conversation", "replacements"),
    unless it is a form of a known verb."""
    return inflected(word) and verbs.base(word) == word


def _lead(clause: Sequence[_Token], verbs: Verbs) -> tuple[str, bool] | None:
    """A request clause's first word and whether only a request's frame comes before it
    ("please move", "I need to move", "can you move": True; "Move...": False); None when
    something else does ("your character", "I met"), or it has a form no imperative takes."""
    lead = next((i for i, t in enumerate(clause) if t.kind != "stop"), None)
    if lead is None or clause[lead].kind != "word" or _nounlike(clause[lead].text, verbs):
        return None
    before = [t.text for t in clause[:lead]]
    if not before:
        return verbs.base(clause[lead].text), False
    framed = before[-1] in _FRAME or (len(before) > 1 and before[-1] == "you" and before[-2] in _MODALS)
    return (verbs.base(clause[lead].text), True) if framed else None


def _requested(
    clauses: Sequence[tuple[bool, list[_Token]]], verbs: Verbs, opening: Collection[str]
) -> Iterable[tuple[str, int]]:
    """The verbs a text's request clauses ask for: a clause's first word after a request's
    frame, or with nothing before it where it is a known verb (`Verbs`) or opens a task text
    ("Deploy..."; a heading or a label elsewhere in a text is no request), as 2; a known
    verb's participle after "be" ("need to be deleted"), as 1."""
    for asks, clause in clauses:
        if not asks:
            continue
        lead = _lead(clause, verbs)
        if lead is not None and (lead[1] or lead[0] in verbs.steps | verbs.known or lead[0] in opening):
            yield lead[0], 2
        for i, t in enumerate(clause[1:], 1):
            base = verbs.base(t.text) if t.kind == "word" else ""
            if base and base != t.text and clause[i - 1].text in _PASSIVE:
                yield base, 1


def _candidates(texts: Texts, verbs: Verbs) -> dict[str, list[int]]:
    """Verb -> per task text, how it asks for it (`_requested`; 0 where it does not)."""
    opening = set()
    for clauses in texts:
        first = _lead(clauses[0][1], verbs) if clauses and clauses[0][0] else None
        if first is not None:
            opening.add(first[0])
    found: dict[str, list[int]] = {}
    for i, clauses in enumerate(texts):
        for verb, how in _requested(clauses, verbs, opening):
            marks = found.setdefault(verb, [0] * len(texts))
            marks[i] = max(marks[i], how)
    return found


def _verb(texts: Texts, verbs: Verbs) -> str | None:
    """The tasks' verb: the goal's verb where any text asks for it (the tool does what they
    ask, however the others word it); else a verb held by at least `MIN_SHARE` of the texts,
    another step's first, then the one most texts open a request with, then the most held."""
    n = len(texts)
    best: tuple[tuple[bool, bool, int, int], str] | None = None
    for verb, marks in sorted(_candidates(texts, verbs).items()):
        held = sum(m > 0 for m in marks)
        if verb == verbs.goal:
            return verb
        if held < MIN_SHARE * n:
            continue
        key = (verb == verbs.goal, verb in verbs.steps, sum(m == 2 for m in marks), held)
        if best is None or key > best[0]:
            best = (key, verb)
    return best[1] if best else None


def _items(
    clause: Sequence[_Token], verb: str, verbs: Verbs, shared: Collection[str]
) -> list[tuple[str, str]] | None:
    """The clause's words the tasks share and its placeholders, each with the preposition or
    participle right before it, the verb left out; None when the verb is not in it. A
    preposition or participle right before an example value introduces the value, and
    goes with it ("titled 'Q3 report'")."""
    if not any(t.kind == "word" and verbs.base(t.text) == verb for t in clause):
        return None
    items: list[tuple[str, str]] = []
    connector, last = "", ""  # last: the word just before, when it was kept
    for t in clause:
        own = t.kind == "word" and verbs.base(t.text) == verb
        kept = t.kind == "word" and t.text in shared and not own
        introduces = bool(last) and not connector and not items[-1][0] and _participle(last)
        connector = "" if own else _add(items, t, connector, kept=kept, introduces=introduces)
        last = t.text if kept else ""
    return list(dict.fromkeys(items))


_PRONOUN_OBJECTS = frozenset(
    {"me", "us", "you", "him", "her", "it", "them", "myself", "yourself", "themselves"}
)
"""Pronouns that end the phrase a preposition opens ("with them"): no later word is its object."""


def _add(items: list[tuple[str, str]], t: _Token, connector: str, *, kept: bool, introduces: bool) -> str:
    """Take a token into the items (see `_items`); returns the connector for the next one."""
    if t.kind == "stop" and t.text in PREPOSITIONS:
        return t.text
    if t.kind == "stop" and t.text in _PRONOUN_OBJECTS:
        return ""  # "a meeting with them called ...": "called" is not "with" anything
    if kept:
        items.append((connector, t.text))
        return ""
    if t.kind not in {"slot", "value"}:
        return connector
    if introduces:  # "titled {subject}": the participle introduces the value, and goes with it
        participle = items.pop()[1]
        if t.kind == "slot":
            items.append((participle, t.text))
    elif t.kind == "slot":
        items.append((connector, t.text))
    return ""


def _object(texts: Texts, verb: str, verbs: Verbs, shared: Collection[str]) -> tuple[tuple[str, str], ...]:
    """What the verb acts on (see the module's doc): per text, its first request clause with
    the verb; words and placeholders at least `MIN_SHARE` of those clauses hold, in their
    usual order, each after the connector most often before it."""
    found = (
        next((x for asks, c in t if asks and (x := _items(c, verb, verbs, shared)) is not None), None)
        for t in texts
    )
    tails = [t for t in found if t is not None]
    if not tails:
        return ()
    held = Counter(item for tail in tails for item in {i for _, i in tail})
    kept = {i for i, n in held.items() if n >= MIN_SHARE * len(tails)}
    place: dict[str, list[int]] = {}
    before: dict[str, Counter[str]] = {}
    for tail in tails:
        for pos, (connector, item) in enumerate(x for x in tail if x[1] in kept):
            place.setdefault(item, []).append(pos)
            before.setdefault(item, Counter())[connector] += 1
    order = sorted(kept, key=lambda i: (sorted(place[i])[len(place[i]) // 2], -held[i], i))[:_MAX_OBJECT]
    return tuple((before[i].most_common(1)[0][0], i) for i in order)


def _shared(texts: Texts) -> set[str]:
    """The words at least `MIN_SHARE` of the texts hold; none from fewer distinct texts than
    `literals.MIN_TASKS` (a kind of task, not one example): one or two phrasings cannot tell
    their own words (the item they name, its colour) from their kind's, and a workflow named
    by its verb and placeholders says what its tasks ask all the same."""
    if len(texts) < MIN_TASKS:
        return set()
    held = Counter(
        w for clauses in texts for w in {t.text for _, c in clauses for t in c if t.kind == "word"}
    )
    return {w for w, n in held.items() if n >= MIN_SHARE * len(texts)}


def _texts(
    steps: Sequence[WorkflowStep],
    runs: Sequence[Trajectory],
    forbidden: Collection[str],
    index: LiteralIndex | None,
) -> list[list[tuple[bool, list[_Token]]]]:
    """Each distinct task text's clauses (`_tokens`, `_clauses`)."""
    slots = _value_slots(steps, runs)
    by_task: dict[str, dict[str, str]] = {}
    for run in runs:
        by_task.setdefault(run.task, {}).update(slots.get(run.id, {}))
    return [_clauses(_tokens(task, by_task[task], forbidden, index)) for task in sorted(by_task)]


def task_phrase(
    steps: Sequence[WorkflowStep],
    runs: Sequence[Trajectory],
    verbs: Verbs,
    forbidden: Collection[str] = (),
    cluster: Sequence[Trajectory] = (),
    index: LiteralIndex | None = None,
) -> Phrase | None:
    """The verb phrase of the runs' task texts with their example values removed (see the
    module's doc); None when the tasks share no verb. A word of the object must be shared by
    the texts of the `cluster`'s runs too (default: the runs'): a variant made of one run
    still says what its cluster's tasks ask, not what its own example names. With the
    namespace's `index`, a word fewer than `MIN_TASKS` of its task texts hold is an example's
    (`LiteralIndex.example_word`)."""
    if not runs or not steps:
        return None
    texts = _texts(steps, runs, forbidden, index)
    verb = _verb(texts, verbs)
    if verb is None:
        return None
    shared = _shared(texts)
    if cluster:
        shared &= _shared(_texts(steps, cluster, forbidden, index))
    phrase = Phrase(verb, _object(texts, verb, verbs, shared))
    if find_literals(phrase.text(), forbidden) or any(find_literals(w, forbidden) for w in phrase.words()):
        return None
    return phrase
