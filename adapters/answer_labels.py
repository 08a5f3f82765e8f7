"""What every chat platform says about an answer besides the answer: how it was produced, how
complete it is, where its sources came from. One wording; each platform brings its own icons."""

from __future__ import annotations

from collections.abc import Mapping

from core.answer.citations import check_links
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, SourceKind
from core.domain.text import clip

STATUS_TEXT = {
    AnswerStatus.PARTIAL: "Partial answer: the docs cover only part of this.",
    AnswerStatus.NOT_FOUND: "Not found in the docs.",
}
MODE_TEXT = {
    AnswerMode.EXTRACTIVE: "Quoted passages (no language model answered).",
    AnswerMode.SEARCH_THEN_ANSWER: "Answered from the top search results.",
}
FROM_WEB = "from_web"
FROM_WEB_TEXT = "Draws on knowledge found on the web."
KIND_MARKS = {SourceKind.LEARNED: " (learned from the web)", SourceKind.WEB: " (web)"}
EMPTY_ANSWER = "The answer came back empty. Please try asking again."
STILL_NEED_HELP = "🙋 Still need help?"
ASK_ABOUT_THIS = "Ask the docs about this"
SOLVED = "✅ It's solved"
MARKED_SOLVED = "Marked as solved."
NO_SOLVED_TAG = "Marked as solved, but this forum has no tag named {tag} to apply."
ONLY_ASKER = "Only the person who posted this, or a moderator, can mark it solved."
NOT_MARKED_SOLVED = (
    "Discord refused to mark this post solved: the bot needs the Manage Threads permission "
    "here to tag or lock it."
)
NOT_HERE = "I don't answer in this channel; its settings turn me off here."
NOTHING_TO_ASK = "That message has no text to ask about."
# A direct message of a file or a sticker alone: said, not left unanswered (in a channel or a
# thread such a message is not for the bot, and a reply would be noise).
TEXT_ONLY = "I can only read text: please write your question in words."
SHARE = "📣 Share with the channel"
NO_LONGER_KNOWN = "That answer is no longer known."
ALREADY_SHARED = "That answer has already been shared."
# Posted when someone asks for a person: the configured targets, and nothing from the answer.
ESCALATION = "{targets}: someone here still needs help with this question."
SOURCES = "Sources"
# Passages the answer was written from without citing them: listed so they can be checked,
# and not "quote not verified", since they carry no quote to verify.
CONSULTED = "Sources consulted"
# A source's title as listed under an answer: a document's or web page's title can be a
# paragraph, and ten of them must fit in the room a platform gives the sources.
SOURCE_TITLE_CHARS = 100


def answer_labels(answer: Answer, icons: Mapping[str, str]) -> str:
    """The labels that apply, each behind its icon (`icons` is keyed by the mode's or status's
    value, or FROM_WEB), joined by spaces; empty when the answer needs none."""
    labels: list[tuple[str, str]] = []
    if answer.mode in MODE_TEXT:
        labels.append((answer.mode.value, MODE_TEXT[answer.mode]))
    if answer.status in STATUS_TEXT:
        labels.append((answer.status.value, STATUS_TEXT[answer.status]))
    if any(c.source_kind in (SourceKind.WEB, SourceKind.LEARNED) for c in answer.citations):
        labels.append((FROM_WEB, FROM_WEB_TEXT))
    return " ".join(f"{icons[key]} {text}" for key, text in labels)


def source_title(title: str, allowed: set[str]) -> str:
    """A source's title on one line, at most `SOURCE_TITLE_CHARS` (cut at a word), showing no
    URL but the answer's sources. Checked whole, then again after the cut: a cut can turn a
    source's URL into one that isn't, or leave half a link."""
    return check_links(clip(check_links(title, allowed), SOURCE_TITLE_CHARS), allowed)
