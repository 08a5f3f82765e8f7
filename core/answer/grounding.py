"""Holding a model's free-text answer to its sources, sentence by sentence.

A model that can't call tools (search-then-answer) writes prose: markers where it likes, often
none, sometimes only markers, sometimes confident sentences no source says. Its answer gets the
tool path's contract anyway: every claim shown carries a citation whose quote is the passage
sentence that supports it, and a claim that no passage supports is not shown as an answer.

Support is lexical: most of the claim's content words (stemmed, stop words out) are in one
sentence of one passage, with the same numbers and the same polarity (a "not", "nobody" or
"unused" on one side only, or "with" against "without", is no support). That is not
entailment; it is a check a reader can audit, because the supporting sentence is shown as the
citation's quote, and it catches what weak models do most (unsupported yes/no answers,
invented steps, code and figures, a marker on the wrong source).
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from core.answer.citations import NumberedSource
from core.answer.tools import CitedSource
from core.config import GroundingSettings
from core.domain.text import (
    FENCE,
    FENCED,
    LINE_PREFIX,
    MARKER_NUMBER,
    WORD,
    abbreviation,
    clip,
    findall_outside_code,
    split_code,
    sub_outside_code,
    terms,
)

_PROMPT = re.compile(r"^\$\s+")  # a shell prompt before a command
_TRAILING_COMMENT = re.compile(r"(?<!\s)\s+(?:#|//) .*$")  # after code, a space and a space after
_NUMBERS = rf"{MARKER_NUMBER}(?:\s*,\s*{MARKER_NUMBER})*"  # a marker's: [1] or [1, 3]
_MARKERS = re.compile(rf"(?<!\s)\s*\[({_NUMBERS})\]")  # from a run's start: linear
# A sentence ends at . ! ? (closing quotes/brackets and markers may follow) before a space; each
# alternative starts only at the start of its run (of stops, of markers): linear.
_SENTENCE_END = re.compile(
    rf"(?<![.!?])[.!?]++[\"')\]’”]*(?:\s*\[{_NUMBERS}\])*(?=\s|$)"
    rf"|(?<![\s\]])(?:\s*\[{_NUMBERS}\])+$"
)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_LETTER = re.compile(r"[^\W\d_]")
# Words that turn what a sentence says into its opposite ("no one" is read by its "no").
_NEGATIONS = frozenset(
    {"not", "no", "never", "cannot", "none", "neither", "nor", "nobody", "noone", "nothing"}
    | {"nowhere"}
)
# Opposites that are not negations of the whole sentence: "skipped without being parsed"
# supports "documents are skipped", but "deploys happen with approval" is the opposite of
# "deploys happen without approval", as "enabled by default" is of "disabled by default". A
# claim that has a word of one side where its sentence has only words of the other differs in
# polarity. Each side is its words' forms; a form ending in "*" stands for every word it
# begins (enabl* for enable, enabled, enables, enabling).
_OPPOSITE_PAIRS = (
    ("with", "without"),
    ("enabl*", "disabl*"),
    ("requir*", "optional"),
    ("before", "after"),
    ("increas*", "decreas*"),
    ("most", "least"),
    ("maximum max", "minimum min"),
    ("more", "less fewer"),
    ("higher", "lower"),
    ("larger bigger", "smaller"),
    ("longer", "shorter"),
    ("faster", "slower"),
    ("earlier", "later"),
    ("newer newest", "older oldest"),
    ("first", "last"),
    ("above", "below"),
    ("includ*", "exclud*"),
    ("allow allows allowed", "deny denies denied"),
    ("accept accepts accepted", "reject rejects rejected"),
    ("add adds added", "remove removes removed"),
    ("show shows shown", "hide hides hidden"),
    ("visible", "hidden invisible"),
    ("start starts started", "stop stops stopped"),
    ("public", "private"),
    ("true", "false"),
    ("upload*", "download*"),
    ("input", "output"),
    ("online", "offline"),
    ("synchronous synchronously", "asynchronous asynchronously"),
    ("anyone everyone anybody everybody all", "only"),
    ("all", "some"),
    ("always", "rarely seldom sometimes"),
    ("better", "worse"),
)
# A sentence's clauses, which a claim must not mix ("admins can delete them; members can only
# view them" says nothing of members deleting): at a semicolon, or a comma before a
# conjunction.
# Read on text whose spacing is collapsed to single spaces (`_agrees`): linear then.
_CLAUSE_BREAK = re.compile(r";|, (?:and|but|or|while|whereas|so|yet) | (?:but|whereas) ")
# A claim's own clauses against a sentence of several: its "and" without a comma parts them too
# ("the default is 30 seconds and the maximum 300 seconds").
_CLAIM_BREAK = re.compile(rf"{_CLAUSE_BREAK.pattern}| and ")
# A figure and the word after it ("30 seconds", "10 MB"); possessive, so that a long run of
# digits with no word after it is given up at once.
_FIGURE = re.compile(r"(?<![\d.,])(\d++(?:[.,]\d++)*+)\s*+([^\W\d_]++)")
# Units a figure is compared by, each written as the docs write it, by the one it means: "30
# minutes" is not "30 seconds", "30 s" is. A word after a figure that is no unit here ("6 turns",
# "100 per minute", "443 and 80") is not compared.
_UNITS = {
    written: unit
    for unit, spellings in {
        "ms": "ms millisecond milliseconds",
        "s": "s sec secs second seconds",
        "min": "min mins minute minutes",
        "h": "h hr hrs hour hours",
        "day": "day days",
        "week": "week weeks",
        "month": "month months",
        "year": "year years",
        "b": "b byte bytes",
        "kb": "k kb kib kilobyte kilobytes",
        "mb": "m mb mib megabyte megabytes",
        "gb": "g gb gib gigabyte gigabytes",
        "tb": "tb tib terabyte terabytes",
    }.items()
    for written in spellings.split()
}
# Words that may stand for what another clause of the sentence names: a claim that names it
# instead ("ingest skips files" of "..., and it skips files") swaps nothing.
_PRONOUNS = frozenset({"it", "its", "they", "them", "their", "these", "those", "this", "ones"})
# How far apart, as a share of their sentences' lengths, a word and the pronoun it stands for
# may be: "ingest" first in "ingest skips files", "it" first in "it silently skips files".
_PRONOUN_REACH = 0.25
# The most words a pronoun stands for ("the clock process" for "it"): one more, and the verb
# next to them went too ("delete learned keywords" for "them").
_PRONOUN_WORDS = 2
# A "yes" answers the question: never mere framing, whatever else the sentence holds.
_AFFIRMATIVE = "yes"
# Words that say how an answer is laid out or where it comes from, not what it claims
# (stemmed, as `terms` gives them): a lead-in made of them and a few content words is still a
# label ("To re-ingest, follow these steps:", "The top search results, quoted as
# written:", the core's own lead-in to the passages it quotes after an answer).
_STRUCTURAL_TERMS = frozenset(
    {"follow", "step", "exampl", "option", "way", "summari", "note", "list", "point", "detail"}
    | {"quot", "written", "passag", "sourc", "search", "result", "command", "code", "snippet"}
    | {"like", "someth"}  # "Read it like this:", "Try something like:"
)
# Words a lead-in may open with before what it says: "First, delete the index:" tells the
# reader to do something as much as "Delete the index:" does.
_SEQUENCE_WORDS = frozenset(
    {"first", "then", "next", "now", "finally", "lastly", "also", "please", "afterwards"}
)
# Verbs that open an instruction in docs: what a reader would go and do to a system. A lead-in
# opening with any other word is read as a label ("Short answer:", "Supported formats:",
# "According to the docs:", "Keep in mind:", one in another language), as it was before: a
# review counted 29 of 39 such labels read as instructions by any-open-class-word rules.
_IMPERATIVES = frozenset(
    """
    add apply back call change clear close commit configure copy create delete deploy disable
    downgrade drop edit enable ensure erase execute export flush format grant import increase
    decrease install kill lower merge migrate mount move open point prune purge push raise
    rebuild reindex reingest re-ingest reinstall remove rename replace reset restart restore
    revoke rollback rotate run set skip start stop switch sync truncate turn uninstall unmount
    unset update upgrade upload wipe
    """.split()  # noqa: SIM905 (a word list reads better as text)
)
# Lines that start a block of their own (a list item, a heading, a table row, a block quote, a
# fence), and lines after which the next is a block of its own (a heading, a table row).
_STARTS_BLOCK = re.compile(r"[ \t]*(?:[-*+•][ \t]|\d{1,9}[.)][ \t]|#|\||>|```)")
_ENDS_BLOCK = re.compile(r"[ \t]*(?:#|\|)")
# "unused" says "not used": read as a negation against a side that has the bare word.
_NEGATING_PREFIX = "un"
_NEGATED_CONTRACTION = re.compile(r"\w+n['’]t\b", re.IGNORECASE)
# How a model says the sources don't answer; said alone, the answer is not_found.
_NOT_FOUND = re.compile(
    r"\b(?:(?:sources?|documentation|docs|context|passages?|knowledge base|provided (?:text|"
    r"information))\b[^.\n]{0,60}\b(?:do(?:es)? not|don't|doesn't|did not) (?:answer|cover|"
    r"mention|contain|say|include|provide|specify|address)|no (?:relevant )?information (?:about|"
    r"on|in)|not (?:mentioned|covered|specified|found) in|(?:i|we) (?:could not|couldn't|cannot|"
    r"can't|don't|do not) (?:find|know|answer))",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Unit:
    """One piece of an answer: a claim to check, or framing kept as written (a lead-in ending
    in a colon, a heading, a line of markup)."""

    text: str
    claim: bool
    body: str = ""  # the claim without its bullet and markers: what is checked
    code: bool = False
    line_end: bool = False  # a newline follows it in the answer
    markers: tuple[int, ...] = ()
    # A lead-in ending in a colon, with no yes or no in it, checked for its many content
    # words: left out when no passage says it, but not counted against the answer, since it is
    # most often the question restated ("To answer your question about streaming in Python:").
    lead_in: bool = False


@dataclass(slots=True)
class Grounded:
    """The answer cut down to its supported claims, each marked with the source that says it."""

    text: str
    citations: list[CitedSource] = field(default_factory=list)
    supported: int = 0
    unsupported: int = 0
    says_not_found: bool = False


def content_text(answer: str) -> str:
    """What an answer says beyond its citation markers and punctuation: empty for `[1] [2]`
    (a `[1]` in code is code, not a marker)."""
    return re.sub(r"[\W_]+", " ", sub_outside_code(_MARKERS, " ", answer)).strip()


def _words(text: str) -> frozenset[str]:
    return frozenset(m.group(0).lower() for m in WORD.finditer(text))


def _negated(text: str) -> bool:
    return bool(_words(text) & _NEGATIONS) or bool(_NEGATED_CONTRACTION.search(text))


def _prefix_negated(words: frozenset[str], other: frozenset[str]) -> bool:
    """Whether `words` negate with a prefix a word the `other` side says bare: "unused" where
    it says "used" ("nobody used", "were used"). Only against the other side: "until" or
    "unit" is no negation of anything."""
    said = terms(" ".join(other))
    return any(
        word.startswith(_NEGATING_PREFIX)
        and word not in other
        and terms(word.removeprefix(_NEGATING_PREFIX)) & said
        for word in words
    )


def _same_polarity(claim: str, sentence: str) -> bool:
    """Whether `claim` and `sentence` say it the same way round: both negated or neither (a
    negation word, a `n't`, or an "un-" word where the other says the word bare), and no word
    of an opposite pair on one side where the other has only its opposite ("with" and
    "without", "enabled" and "disabled", `_OPPOSITE_PAIRS`)."""
    claim_words, sentence_words = _words(claim), _words(sentence)
    claim_negated = _negated(claim) or _prefix_negated(claim_words, sentence_words)
    sentence_negated = _negated(sentence) or _prefix_negated(sentence_words, claim_words)
    if claim_negated != sentence_negated:
        return False
    return not any(
        _says(claim_words, said)
        and _says(sentence_words, opposite)
        and _turned(claim, said, sentence, opposite)
        and not _converse(claim, said, sentence, opposite)
        for one, other in _OPPOSITE_PAIRS
        for said, opposite in ((one, other), (other, one))
    )


def _turned(claim: str, said: str, sentence: str, opposite: str) -> bool:
    """Whether `claim` says `said` where `sentence` says `opposite`: the sentence has only the
    opposite, or, holding both, has the opposite more often than the claim and `said` less
    ("the number of output tokens sent" of "the number of input tokens sent ... and of output
    tokens generated")."""
    claimed, sentenced = _word_counts(claim), _word_counts(sentence)
    saying, opposing = _count(claimed, said), _count(sentenced, opposite)
    return _count(sentenced, said) < saying and _count(claimed, opposite) < opposing


def _word_counts(text: str) -> Counter[str]:
    return Counter(m.group(0).lower() for m in WORD.finditer(text))


def _count(words: Counter[str], forms: str) -> int:
    """How many of `words` are one of `forms` (`_says`)."""
    return sum(n for word, n in words.items() if _says(frozenset({word}), forms))


def _converse(claim: str, said: str, sentence: str, opposite: str) -> bool:
    """Whether `claim` says with `said` what `sentence` says with `opposite`, its sides turned
    round: "start the bot after the migration" of "run the migration before you start the
    bot", "vector search is slower than BM25" of "BM25 is faster than vector search". Words
    before the opposite on one side are then after it on the other, both ways round (words
    on both sides of either, "search" of "vector search ... BM25 search", tell nothing)."""
    before, after = _around(claim, said)
    was_before, was_after = _around(sentence, opposite)
    either = (before & after) | (was_before & was_after)
    return bool((before & was_after) - either) and bool((after & was_before) - either)


def _around(text: str, forms: str) -> tuple[set[str], set[str]]:
    """The content words of `text` before and after its first word of `forms` (`_says`)."""
    words = [m.group(0) for m in WORD.finditer(text)]
    at = next(i for i, w in enumerate(words) if _says(frozenset({w.lower()}), forms))
    return terms(" ".join(words[:at])), terms(" ".join(words[at + 1 :]))


def opposed(word: str, other: str) -> bool:
    """Whether the check reads `word` and `other` as opposites (`_OPPOSITE_PAIRS`)."""
    one, two = frozenset({word.lower()}), frozenset({other.lower()})
    return any(
        (_says(one, a) and _says(two, b)) or (_says(one, b) and _says(two, a))
        for a, b in _OPPOSITE_PAIRS
    )


def _says(words: frozenset[str], forms: str) -> bool:
    """Whether `words` hold one of `forms` (space-separated; "enabl*" begins a word)."""
    return any(
        any(w.startswith(form[:-1]) for w in words) if form.endswith("*") else form in words
        for form in forms.split()
    )


def _agrees(claim: str, sentence: str) -> bool:
    """Whether `claim` says what `sentence` says the same way round, clause by clause: each
    clause of the claim is said by one clause of the sentence (`_CLAUSE_BREAK`), sharing a
    word with it, with its figures, the same polarity, and not having swapped one of its words
    for a word of another clause. Checked against the whole sentence, a claim could take its
    subject from one clause and its verb from another ("members can delete learned keywords"
    of "admins can delete learned keywords; members can only view them"), its figure from
    another ("the default timeout is 300 seconds" of "the default is 30 seconds, and the
    maximum 300"), and a "never" or an "unchanged" in one clause turned the others round."""
    sentence, claim = " ".join(sentence.split()), " ".join(claim.split())
    clauses = [(c, terms(c)) for c in _CLAUSE_BREAK.split(sentence) if c.strip()]
    if len(clauses) < 2:
        return _same_polarity(claim, sentence) and _figures_agree(claim, sentence)
    # Its clauses as its commas part them, else also at its "and": "PDFs and images are not
    # indexed" is one clause (parted, "PDFs" would have lost its "not"), "the default is 30
    # seconds and the maximum 300 seconds" two.
    at_commas = _CLAUSE_BREAK.split(claim)
    if all(_clause_said(part, clauses) for part in at_commas):
        return True
    at_ands = _CLAIM_BREAK.split(claim)
    return at_ands != at_commas and all(_clause_said(part, clauses) for part in at_ands)


def _clause_said(part: str, clauses: list[tuple[str, set[str]]]) -> bool:
    """Whether one of the sentence's `clauses` says `part` (`_agrees`)."""
    wanted = terms(part)
    if not wanted:
        return True
    bare = sub_outside_code(_MARKERS, "", part)
    return any(
        wanted & have
        and not _swapped(part, wanted, clause, have, others)
        and _numbers(bare) <= _numbers(clause)
        and _figures_agree(bare, clause)
        and _same_polarity(part, clause)
        for clause, have in clauses
        for others in [set().union(*(t for c, t in clauses if c is not clause))]
    )


def _swapped(part: str, wanted: set[str], clause: str, have: set[str], others: set[str]) -> bool:
    """Whether a claim (`part`, its words `wanted`) takes a word from another clause of the
    sentence (`others`) in place of one of this clause's (`have`): "members" for "admins".
    A word of another clause where this one leaves it out ("the paid tier allows 1000
    [requests]") is no swap, nor the words that stand where this clause has a pronoun for
    them, at about the same place in its sentence (`_PRONOUN_REACH`): "the clock process" of
    "it prunes keywords", "sheets" of "visible ones" ("ones" stands for a noun alone, so
    "failed jobs" of "finished ones" still swaps "failed" in)."""
    borrowed = (wanted - have) & others
    if not borrowed or not have - wanted:
        return False
    said = [w.lower() for w in WORD.findall(clause)]
    words = WORD.findall(part)
    for at, pronoun in enumerate(said):
        if pronoun in _PRONOUNS and borrowed:
            borrowed -= _stood_for(words, at / len(said), borrowed, whole=pronoun != "ones")
    return bool(borrowed)


def _stood_for(words: list[str], where: float, borrowed: set[str], *, whole: bool) -> set[str]:
    """The borrowed words of a claim (`words`) a pronoun at `where` (a share of its clause)
    stands for: the one nearest its place, within `_PRONOUN_REACH`, with the borrowed words
    next to it (a noun and its modifier, `_PRONOUN_WORDS`) when it stands for a `whole` noun
    phrase."""
    places = [at for at, w in enumerate(words) if terms(w) and terms(w) <= borrowed]
    near = [at for at in places if abs(at / len(words) - where) <= _PRONOUN_REACH]
    if not near:
        return set()
    first = last = min(near, key=lambda at: abs(at / len(words) - where))
    while whole and last - first + 1 < _PRONOUN_WORDS and first - 1 in places:
        first -= 1
    while whole and last - first + 1 < _PRONOUN_WORDS and last + 1 in places:
        last += 1
    return set().union(*(terms(w) for w in words[first : last + 1]))


def _figures_agree(claim: str, sentence: str) -> bool:
    """Whether each figure of `claim` has the unit that the same figure has in `sentence`,
    where both give one (`_UNITS`): "30 minutes" is not "30 seconds"."""
    said: dict[str, set[str]] = {}
    for number, word in _FIGURE.findall(sentence):
        if unit := _UNITS.get(word.lower()):
            said.setdefault(number.replace(",", ""), set()).add(unit)
    return all(
        _UNITS[word.lower()] in said.get(number.replace(",", ""), {_UNITS[word.lower()]})
        for number, word in _FIGURE.findall(claim)
        if word.lower() in _UNITS
    )


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


def sentences(text: str) -> list[tuple[str, bool]]:
    """`text` cut into sentences, each with whether a line break follows it. Fenced code is
    one piece; a list item's bullet stays with its sentence."""
    pieces: list[tuple[str, bool]] = []
    position = 0
    for fence in FENCED.finditer(text):
        pieces += _prose_sentences(text[position : fence.start()])
        pieces.append((fence.group(0).rstrip("\n"), True))
        position = fence.end()
    return pieces + _prose_sentences(text[position:])


def _prose_sentences(text: str) -> list[tuple[str, bool]]:
    pieces: list[tuple[str, bool]] = []
    for whole in text.split("\n"):
        if not whole.strip():
            continue
        # A bullet or item number ("1. ") is not a sentence of its own: it goes with the first.
        bullet = LINE_PREFIX.match(whole)
        prefix, line = (whole[: bullet.end()], whole[bullet.end() :]) if bullet else ("", whole)
        start = 0
        found = []
        for end in _SENTENCE_END.finditer(line):
            before = line[start : end.start()].rsplit(None, 1)
            if before and end.group(0) == "." and abbreviation(before[-1], line[end.end() :]):
                continue
            found.append(line[start : end.end()])
            start = end.end()
        found.append(line[start:])
        kept = [s for s in (f.strip() for f in found) if s]
        if kept:
            kept[0] = prefix + kept[0]
        pieces += [(s, i == len(kept) - 1) for i, s in enumerate(kept)]
    return pieces


def _is_claim(sentence: str, body: str, settings: GroundingSettings) -> bool:
    """Whether a sentence of prose says something to check, rather than frame the answer.

    A bare "No." or "Not really." answers the question as much as any claim does: checked (and,
    saying nothing a passage can show, left out), not kept as framing. A heading or a lead-in
    ending in a colon is framing while it is a label ("Steps:", "## Setup", "To re-ingest,
    follow these steps:"); with more content words than `max_framing_terms` (words such as
    "step" or "follow" aside), or a yes or no, it states something and is checked like a claim:
    "## Prune also wipes the production database" is not a label."""
    said = terms(body)
    if _answers_yes_or_no(body):
        return True
    if _lead_in(body) or sentence.lstrip().startswith("#"):
        return len(said - _STRUCTURAL_TERMS) > settings.max_framing_terms
    # A figure is a claim however few words carry it: "- Up to 500." was kept unchecked. A
    # number alone ("**2." cut from a numbered heading) only counts a list's items.
    return len(said) >= settings.min_terms or bool(_numbers(body) and _LETTER.search(body))


def _answers_yes_or_no(body: str) -> bool:
    return _negated(body) or _AFFIRMATIVE in _words(body)


def _lead_in(body: str) -> bool:
    """A sentence ending in a colon: what follows it is what it introduces."""
    return body.rstrip("_* ").endswith(":")


def _instructs(body: str) -> bool:
    """Whether a lead-in tells the reader to do something ("Delete the index first:") rather
    than label what follows ("To re-ingest, follow these steps:", "Here is an example:", "Run
    this:", "Short answer:"). Shown unchecked, a short instruction passed for framing however
    wrong it was. An instruction opens (after "first", "then"...) with a verb of
    `_IMPERATIVES` and names something to act on."""
    words = [m.group(0).lower() for m in re.finditer(r"[\w'’-]+", body)]
    while words and words[0] in _SEQUENCE_WORDS:
        words.pop(0)
    if len(words) < 2 or words[0] not in _IMPERATIVES:
        return False
    acted_on = terms(" ".join(words[1:])) - _STRUCTURAL_TERMS - terms(words[0])
    return bool(acted_on)


def units(answer: str, settings: GroundingSettings) -> list[Unit]:
    result: list[Unit] = []
    for sentence, line_end in sentences(answer):
        # Markers are read from prose only: a fenced block or inline code keeps its `[0]`.
        markers = tuple(
            int(n)
            for group in findall_outside_code(_MARKERS, sentence)
            for n in re.split(r"\s*,\s*", group)
        )
        code = sentence.lstrip().startswith(FENCE)
        body = sub_outside_code(_MARKERS, "", LINE_PREFIX.sub("", sentence, count=1)).strip()
        # An instruction is a claim like any other: unsupported, it counts against the answer.
        instruction = not code and _lead_in(body) and _instructs(body)
        claim = code or instruction or (bool(body) and _is_claim(sentence, body, settings))
        if markers and not body and result and result[-1].code:
            # The marker line under a code block (how `ground` marks one) cites that block.
            result[-1] = replace(result[-1], markers=result[-1].markers + markers)
        lead_in = not code and _lead_in(body) and not _answers_yes_or_no(body) and not instruction
        result.append(
            Unit(sentence, claim, sentence if code else body, code, line_end, markers, lead_in)
        )
    return result


@dataclass(frozen=True, slots=True)
class _Passage:
    number: int
    text: str  # unescaped, as the reader sees it
    sentences: tuple[tuple[str, frozenset[str]], ...]
    code: frozenset[str]  # what a code line may be, whole (`_code_lines`)


def _passage(source: NumberedSource) -> _Passage:
    text = source.hit.chunk.text
    split = tuple(
        (s, frozenset(terms(s)))
        for piece, _ in sentences(_unwrapped(text))
        for s in piece.split("\n")
        if s
    )
    return _Passage(source.number, text, split, _code_lines(text))


def _code_lines(text: str) -> frozenset[str]:
    """What a line of an answer's code block may be: a whole line of the passage, or the whole
    of one of its inline code spans (a model may set `bot ingest docs` from a sentence as a
    block of its own), each read by `_code_line`."""
    spans = (piece.strip("`") for piece, code in split_code(text) if code)
    lines = text.split("\n")
    # A line may be copied without its trailing comment (`bot ingest docs/  # again`).
    bare = (_TRAILING_COMMENT.sub("", line) for line in lines)
    return frozenset(map(_code_line, (*lines, *bare, *spans))) - {""}


def _code_line(line: str) -> str:
    """A line of code as compared: its spacing collapsed, without a list's bullet or a shell's
    prompt (`$ `) in front, on either side."""
    return " ".join(_PROMPT.sub("", LINE_PREFIX.sub("", line, count=1)).split())


def _unwrapped(text: str) -> str:
    """`text` with the line breaks of hard-wrapped paragraphs (Markdown written at 100 columns)
    joined, outside fenced code: read line by line, "the answer is" and "not accepted until"
    on the next line were two sentences, and a claim leaving out the "not" was supported by
    the first. A line that starts a block (a list item, a heading, a table row, a quote) or
    follows a heading or a table row stays on its own."""
    pieces: list[str] = []
    position = 0
    for fence in FENCED.finditer(text):
        pieces += [_joined_lines(text[position : fence.start()]), fence.group(0)]
        position = fence.end()
    return "".join([*pieces, _joined_lines(text[position:])])


def _joined_lines(prose: str) -> str:
    lines: list[str] = []
    for line in prose.split("\n"):
        previous = lines[-1] if lines else ""
        if (
            previous.strip()
            and line.strip()
            and not _STARTS_BLOCK.match(line)
            and not _ENDS_BLOCK.match(previous)
        ):
            lines[-1] = f"{previous.rstrip()} {line.strip()}"
        else:
            lines.append(line)
    return "\n".join(lines)


def _support(claim: str, passage: _Passage, settings: GroundingSettings) -> tuple[float, str]:
    """How much of `claim` the best sentence of `passage` says (0 when none qualifies), and
    that sentence."""
    wanted = terms(claim)
    if not wanted:
        return 0.0, ""
    numbers = _numbers(sub_outside_code(_MARKERS, "", claim))
    best, quote = 0.0, ""
    for sentence, have in passage.sentences:
        overlap = len(wanted & have) / len(wanted)
        if overlap <= best or overlap < settings.min_overlap:
            continue
        if not numbers <= _numbers(sentence) or not _agrees(claim, sentence):
            continue
        best, quote = overlap, sentence
    return best, quote


def _code_support(block: str, passage: _Passage, settings: GroundingSettings) -> tuple[float, str]:
    """A code block is supported when its lines (`code_line_share` of them: all, by default)
    are lines of the passage, each whole (`_code_lines`): a command that is in the passage
    with a flag more (`bot keywords prune` of `bot keywords prune --dry-run`) is not in it,
    and one line slipped in among copied ones (`rm -rf ~/.local/share/bot`) is code someone
    runs. Lines without a letter or digit (`-`, `}`) count for nothing either way: padded with
    them, an invented line passed the share."""
    lines = [" ".join(line.split()) for line in block.split("\n")[1:] if line.strip()]
    lines = [line.removesuffix(FENCE).strip() for line in lines if not line.startswith(FENCE)]
    lines = [line for line in lines if WORD.search(line)]
    if not lines:
        return 0.0, ""
    found = [line for line in lines if _code_line(line) in passage.code]
    share = len(found) / len(lines)
    return (share, found[0]) if share >= settings.code_line_share else (0.0, "")


def _quote(sentence: str, passage: _Passage, limit: int) -> str:
    """The supporting sentence as it stands in the passage (so the quote check verifies it),
    without its bullet, cut to `limit` at a word boundary."""
    bare = LINE_PREFIX.sub("", sentence, count=1).strip()
    return (
        clip(bare, limit, ellipsis="")
        if " ".join(bare.split()) in " ".join(passage.text.split())
        else clip(sentence, limit, ellipsis="")
    )


def ground(answer: str, sources: Sequence[NumberedSource], settings: GroundingSettings) -> Grounded:
    """Every claim of `answer` checked against `sources`: kept with a marker to the source that
    supports it (the model's own marker first), or left out. Framing is kept only when some
    claim is; a claim said twice is said once."""
    passages = {s.number: _passage(s) for s in sources}
    kept: list[tuple[Unit, str]] = []

    def leave_out(unit: Unit) -> None:
        """A left-out sentence that ended its line leaves the line break to the one before."""
        if unit.line_end and kept and not kept[-1][0].line_end:
            previous, text = kept[-1]
            kept[-1] = (replace(previous, line_end=True), text)

    quotes: dict[int, list[str]] = {}
    result = Grounded("", says_not_found=bool(_NOT_FOUND.search(answer)))
    seen: set[str] = set()
    for unit in units(html.unescape(answer), settings):
        if not unit.claim:
            kept.append((unit, _unmarked(unit)))
            continue
        said = terms(unit.body) | _numbers(unit.body)  # claims differing in a number differ
        key = " ".join(unit.body.split()) if unit.code else " ".join(sorted(said))
        if key in seen:
            leave_out(unit)
            continue
        seen.add(key)
        number, quote = _best_source(unit, passages, settings)
        if number is None:
            result.unsupported += not unit.lead_in
            leave_out(unit)
            continue
        result.supported += 1
        quotes.setdefault(number, []).append(quote)
        kept.append((unit, _marked(_unmarked(unit), number, code=unit.code)))
    if result.supported:
        result.text = _joined(kept)
        result.citations = [
            CitedSource(source=n, quote=_covering(q, passages[n], settings.max_quote_chars))
            for n, q in quotes.items()
        ]
    return result


def _covering(quotes: list[str], passage: _Passage, limit: int) -> str:
    """The one quote a citation shows for every claim citing its passage: the stretch of the
    passage from the first of their supporting sentences to the last, when it fits in `limit`.
    The first claim's sentence alone was shown under a marker that other claims carry too, as
    if it were their evidence. A stretch too long: the first claim's sentence still."""
    flat = " ".join(passage.text.split())
    spans = []
    for quote in dict.fromkeys(" ".join(q.split()) for q in quotes):
        if (start := flat.find(quote)) < 0:
            return quotes[0]
        spans.append((start, start + len(quote)))
    start, end = min(s for s, _ in spans), max(e for _, e in spans)
    return flat[start:end] if end - start <= limit else quotes[0]


def _unmarked(unit: Unit) -> str:
    """The unit's text without the model's markers (`ground` writes its own): a code block
    verbatim, and the code spans of a sentence too."""
    return unit.text if unit.code else sub_outside_code(_MARKERS, "", unit.text)


def _best_source(
    unit: Unit, passages: dict[int, _Passage], settings: GroundingSettings
) -> tuple[int | None, str]:
    """The source that supports the claim best: among the ones the model marked when any of
    them does, else among all (a marker on the wrong passage is moved, not trusted)."""
    check = _code_support if unit.code else _support
    for candidates in ([n for n in unit.markers if n in passages], list(passages)):
        scored = [(check(unit.body, passages[n], settings), n) for n in candidates]
        (score, sentence), number = max(scored, default=((0.0, ""), 0), key=lambda s: s[0][0])
        if score > 0:
            return number, _quote(sentence, passages[number], settings.max_quote_chars)
    return None, ""


def _marked(body: str, number: int, *, code: bool) -> str:
    """The claim with its one marker: after a code block, else before its final punctuation
    (a checked lead-in's colon too)."""
    stripped = body.rstrip()
    if code:
        return f"{stripped}\n[{number}]"
    end = len(stripped.rstrip(".!?;:"))
    return f"{stripped[:end]} [{number}]{stripped[end:]}"


def _joined(kept: list[tuple[Unit, str]]) -> str:
    """The kept pieces with their line structure, trailing framing (a lead-in whose list was
    all left out) dropped."""
    while kept and not kept[-1][0].claim:
        kept.pop()
    out = ""
    for unit, text in kept:
        out += text + ("\n" if unit.line_end else " ")
    return out.strip()
