"""Is this chat message a question the docs could answer? A local, instant check (no model call)
for channels where the bot answers without being mentioned.

Precision matters more than recall: answering "how was your weekend?" in a busy channel costs
the bot its welcome, while a missed question can still @mention it. So a message counts only
when it reads as a question (a question mark, or an interrogative opening of some length), is
not addressed to a person, and is not small talk. The rules are measured on a labelled set of
realistic messages (`tests/data/chat_messages.jsonl`).

Rules cannot tell "is the staging env down again?" from "is the staging env refreshed nightly?":
both read as questions, only one is for the docs. A classifier over the message's embedding
(`QuestionModel`, trained by `bot eval questions`) makes that call after the rules let a message
through; see `core/answer/question_gate.py`.
"""

from __future__ import annotations

import re

# Platform markup that says nothing about the question: mentions, channels, links, code, emoji.
_MARKUP = re.compile(
    r"<[@#!][^<>]*>|<https?://[^<>]*>|https?://\S+|`[^`]*`|:[a-z0-9_+-]+:|[\U0001F000-\U0001FAFF☀-➿]"
)
# A message addressed to someone: a user mention or an @name first.
_ADDRESSED = re.compile(r"^\s*(?:<@[UW]?[A-Z0-9]+(?:\|[^>]*)?>|<@!?\d+>|@\w)")
# How a question may open before it starts ("hey team,", "quick question -", "help:").
_OPENER = re.compile(
    r"^(?:(?:hi|hey|hello|hiya|ok|so|quick question|question|help|sorry[^,:.!?-]*?\bbut|"
    r"team|all|folks|everyone|y'?all)\b[\s,:;.!-]*)+",
    re.IGNORECASE,
)
_WH = frozenset(
    [
        "how",
        "what",
        "what's",
        "whats",
        "where",
        "where's",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "when",
    ]
)
_AUXILIARIES = frozenset(
    [
        "is",
        "are",
        "am",
        "was",
        "were",
        "can",
        "could",
        "do",
        "does",
        "did",
        "should",
        "would",
        "will",
        "has",
        "have",
    ]
)
# Openings that ask even without a "?" ("does X support Y"); "will update the ticket" doesn't.
_ASKING = frozenset(["is", "are", "does", "do", "can", "could", "should", "did"])
_INTERROGATIVES = _WH | _AUXILIARIES | {"anyone", "anybody"}
# Words that make a question about knowledge rather than a favour or a plan.
_KNOWLEDGE = re.compile(
    r"\b(?:how|what|where|which|why|when|tell me|know|explain|idea|documented|documentation)\b",
    re.IGNORECASE,
)
_FAVOUR = re.compile(r"^(?:can|could|would) (?:someone|somebody|anyone|anybody)\b", re.IGNORECASE)
# Small talk and questions meant for people, not for the docs.
_SOCIAL = re.compile(
    r"\b(?:how are (?:you|u|things)|how'?s (?:everyone|everybody|it going|your|the new)|"
    r"how (?:was|did) (?:your|the|it)\b|what'?s up|sup\b|you all|y'?all|"
    r"(?:anyone|anybody|who)(?:'?s| is)? (?:up for|want|wanna|watching|coming|joining|in the)|"
    r"who (?:wants|took|broke|ate)|are you (?:free|around|joining|coming|there)|do you want|"
    r"wanna|shall we|can we (?:move|meet|do|grab|skip|push)|could you (?:send|share|review)|"
    r"can you (?:review|send|share|believe|check my)|did (?:you see|someone|anyone see)|"
    r"is it just me|anyone else|why is it always|(?:is|are|'s|where'?s) (?:everyone|everybody)|"
    r"everyone so|lunch|coffee|pizza|sushi|(?<!-)party|dinner|weekend|vacation|holiday plans|"
    r"birthday|new baby|game last night|keynote|think of the|still on|tonight|"
    r"when you'?re back|later today)\b",
    re.IGNORECASE,
)
# About someone's things or about now: "your adapter", "today", "did anyone record it".
_PERSONAL_OR_NOW = re.compile(
    r"\b(?:your|yours|yourself|today|tonight|tomorrow|yet)\b|"
    r"\bdid (?:anyone|anybody|someone|somebody)\b",
    re.IGNORECASE,
)
# A question to the person reading ("can you ping me", "do you guys want..."), unless it asks
# what they know ("do you know where ...", "can you explain how ...").
_TO_YOU = re.compile(
    r"^(?:can|could|would|will|do|did|are|have) (?:you|u|ya)\b(?! (?:know|explain|tell))",
    re.IGNORECASE,
)
MIN_WORDS = 3  # "what?", "why not?", "any updates?" are conversation, not questions
MIN_OPEN_QUESTION_WORDS = 4  # an interrogative opening without "?": "what does E1042 mean"
LONG_QUESTION_WORDS = 6  # a "?" sentence this long need not open with an interrogative


def plain_text(text: str) -> str:
    """The words of a message without its platform markup: what both the rules and the
    classifier read, so that a link or an emoji neither makes nor breaks a question."""
    return " ".join(_MARKUP.sub(" ", text).split())


def reads_as_question(text: str) -> bool:
    """The rules alone: shaped like a question, not addressed to a person, not small talk."""
    if _ADDRESSED.match(text):
        return False
    plain = plain_text(text)
    body = _OPENER.sub("", plain)
    words = re.findall(r"[\w'’]+", body.lower())
    if len(words) < MIN_WORDS or _SOCIAL.search(plain) or _PERSONAL_OR_NOW.search(plain):
        return False
    if _TO_YOU.match(body):
        return False
    if _FAVOUR.match(body) and not _KNOWLEDGE.search(body[len("could someone") :]):
        return False
    opens = words[0] in _INTERROGATIVES
    if plain.rstrip(" .!").endswith("?"):
        return opens or bool(_KNOWLEDGE.search(body)) or len(words) >= LONG_QUESTION_WORDS
    asks = words[0] in _ASKING or bool(_KNOWLEDGE.search(body))
    return opens and len(words) >= MIN_OPEN_QUESTION_WORDS and asks


# A word of a follow-up: it starts with a letter ("e1042" is one, "+1" is not).
_FOLLOW_UP_WORD = re.compile(r"[^\W\d_][\w'’-]*")
# What a thread message that only acknowledges an answer is made of.
_ACKNOWLEDGEMENTS = frozenset(
    [
        "thanks",
        "thank",
        "thx",
        "ty",
        "tysm",
        "you",
        "u",
        "ok",
        "okay",
        "k",
        "kk",
        "got",
        "it",
        "great",
        "cool",
        "perfect",
        "awesome",
        "nice",
        "good",
        "fine",
        "works",
        "worked",
        "working",
        "that",
        "this",
        "that's",
        "it's",
        "thats",
        "its",
        "sure",
        "yes",
        "yep",
        "yeah",
        "yup",
        "alright",
        "cheers",
        "much",
        "lots",
        "so",
        "very",
        "really",
        "appreciated",
        "appreciate",
        "helpful",
        "helps",
        "helped",
        "noted",
        "np",
        "will",
        "do",
        "sounds",
        "makes",
        "sense",
        "lol",
        "haha",
        "all",
        "right",
        "the",
        "a",
        "oh",
        "ah",
        "wow",
        "amazing",
        "excellent",
        "now",
    ]
)


def reads_as_follow_up(text: str) -> bool:
    """A message in a thread the bot answers in, read as one more thing for it to answer.

    Everything is, but an acknowledgement ("thanks, that worked!", "ok", 👍: every word one
    of `_ACKNOWLEDGEMENTS`, or no word at all) and a message addressed to a person. The thread
    is already a conversation with the bot, so a short "and --prune?" means the bot, and so
    does a report with no question in it ("still getting 403 from the confluence connector"):
    leaving that unanswered would be the bot going silent mid-conversation."""
    if _ADDRESSED.match(text):
        return False
    plain = plain_text(text)
    if plain.rstrip(" .!").endswith("?"):
        return True
    words = _FOLLOW_UP_WORD.findall(_OPENER.sub("", plain).lower())
    return any(word not in _ACKNOWLEDGEMENTS for word in words)
