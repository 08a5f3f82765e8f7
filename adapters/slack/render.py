"""An `Answer` as Slack messages: mrkdwn, linked citation markers, sources, status, feedback.

Everything we did not write (model output, document titles, user text) is escaped, so `<`, `>`
and `&` can't form Slack control sequences (`<!channel>`, `<@U123>`, `<url|label>`), and goes
through `check_links` once more here, whatever built the `Answer`: the only URLs a message can
show, as a link or as text, are its citations' (and only http(s) ones without userinfo). Long
answers are split at paragraph or code-fence boundaries into as many messages as Slack's limits
need; nothing is ever cut off.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from adapters.answer_labels import (
    CONSULTED,
    EMPTY_ANSWER,
    ESCALATION,
    FROM_WEB,
    KIND_MARKS,
    SHARE,
    SOURCES,
    STILL_NEED_HELP,
    answer_labels,
    source_title,
)
from core.answer.citations import allowed_urls, check_links
from core.domain.conversation import Answer, AnswerStatus, Citation
from core.domain.feedback import FEEDBACK_REASONS, MAX_FEEDBACK_NOTE_CHARS
from core.domain.text import CODE_FENCE, link_markers
from core.domain.urls import is_linkable

FEEDBACK_UP = "feedback_up"
FEEDBACK_DOWN = "feedback_down"
ESCALATE = "still_need_help"
FEEDBACK = "feedback"  # Slack's own feedback buttons: the value says up or down, and which answer
SHARE_ANSWER = "share_answer"
FEEDBACK_REASON = "feedback_reason"  # the 👎 form's callback id

# A Markdown link; its URL may hold one level of balanced parentheses, as `_TARGET` in
# core/answer/citations.py reads it (https://en.wikipedia.org/wiki/Mercury_(planet)).
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://(?:[^()\s]|\([^()\s]*\))+)\)")
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")
_HEADING = re.compile(r"^#{1,6}\s+(.*)$")
_ICONS = {
    "partial": ":warning:",
    "not_found": ":mag:",
    "extractive": ":page_facing_up:",
    "search_then_answer": ":robot_face:",
    FROM_WEB: ":globe_with_meridians:",
}
_EMPTY = f"_({EMPTY_ANSWER})_"
# Slack's limit on one text object (a section's text, a context element's): one over it and the
# whole message is refused (invalid_blocks).
TEXT_OBJECT_CHARS = 3_000
_BETWEEN_SOURCES = " · "
# A URL inside `<url|label>`: `>` would end the link, `|` start its label, `<` open another
# control sequence, so they are percent-encoded (the same address to a browser). `&` starts an
# entity Slack reads back, so it is written as one, as Slack's formatting guide asks:
# percent-encoding it would change the address (`?a=1&b=2` is two parameters, `?a=1%26b=2` one).
_URL_IN_LINK = str.maketrans({"<": "%3C", ">": "%3E", "|": "%7C", "&": "&amp;"})


@dataclass(slots=True)
class SlackMessage:
    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _unescape(text: str) -> str:
    """What `escape` was given (`&amp;` last, so an escaped `&lt;` comes back as `&lt;`)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _link(url: str, label: str) -> str:
    """`<url|label>`, or just the label when the URL must not be a link (not http(s), userinfo,
    characters no URL holds). `url` as the source has it, unescaped: it is made safe here."""
    if not is_linkable(url):
        return label
    return f"<{url.translate(_URL_IN_LINK)}|{label}>"


def to_mrkdwn(markdown: str, citations: list[Citation]) -> str:
    """Markdown from the core, checked, escaped, in Slack's dialect; [n] markers outside code
    link to their source."""
    markdown = check_links(markdown, allowed_urls(c.url for c in citations))
    out: list[str] = []
    in_fence = False
    for line in escape(markdown).splitlines():
        if CODE_FENCE.match(line):
            in_fence = not in_fence
            out.append(line)
            continue
        if in_fence:
            out.append(line)
            continue
        if heading := _HEADING.match(line):
            line = f"*{heading.group(1).strip()}*"
        line = _BOLD.sub(lambda m: f"*{m.group(1) or m.group(2)}*", line)
        # The line is escaped already: its URL goes back to the source's own for `_link`.
        line = _LINK.sub(lambda m: _link(_unescape(m.group(2)), m.group(1)), line)
        out.append(line)
    return link_markers("\n".join(out), {c.number: c.link for c in citations}, _link)


def split_text(text: str, limit: int) -> list[str]:
    """Pieces of at most `limit` characters, cut between paragraphs and never inside a code
    block unless the block alone is too long (then between its lines, re-fenced)."""
    blocks: list[str] = []
    current: list[str] = []
    in_fence = False
    for line in text.split("\n"):
        if CODE_FENCE.match(line):
            in_fence = not in_fence
        current.append(line)
        if not in_fence and (not line.strip() or CODE_FENCE.match(line)):
            blocks.append("\n".join(current))
            current = []
    if current:
        blocks.append("\n".join(current))
    pieces: list[str] = []
    buffer = ""
    for block in blocks:
        for part in _cut(block, limit):
            joined = f"{buffer}\n{part}" if buffer else part
            if len(joined) <= limit:
                buffer = joined
            else:
                pieces.append(buffer)
                buffer = part
    if buffer.strip():
        pieces.append(buffer)
    return [p.strip("\n") for p in pieces if p.strip()]


def _cut(block: str, limit: int) -> list[str]:
    if len(block) <= limit:
        return [block]
    fenced = CODE_FENCE.match(block) is not None
    inner = block.strip("\n").split("\n")
    if fenced:
        inner = inner[1:-1] if len(inner) > 1 and CODE_FENCE.match(inner[-1]) else inner[1:]
    room = limit - (8 if fenced else 0)
    parts: list[str] = []
    current = ""
    for line in inner:
        while len(line) > room:
            if current:
                parts.append(current)
            current = ""
            cut = room if fenced else _safe_cut(line, room)
            parts.append(line[:cut].rstrip())
            line = line[cut:].lstrip()
        if current and len(current) + 1 + len(line) > room:
            parts.append(current)
            current = line
        else:
            current = f"{current}\n{line}" if current else line
    if current:
        parts.append(current)
    return [f"```\n{p}\n```" if fenced else p for p in parts]


def _safe_cut(line: str, room: int) -> int:
    """Where to cut an over-long line: the last space before `room` that is outside a
    `<url|label>` link (a link cut in two renders as garbage); else at `room`."""
    depth_at = 0
    best = 0
    for i, char in enumerate(line[:room]):
        if char == "<":
            depth_at += 1
        elif char == ">":
            depth_at = max(0, depth_at - 1)
        elif char == " " and depth_at == 0:
            best = i
    return best if best > room // 2 else room


def _source_links(citations: list[Citation], limit: int, heading: str) -> list[str]:
    """Each source (deduplicated, at most `limit`) as a link with its number, title and kind;
    uncited ones (`CONSULTED`) without the quote note. A URL too long for any text object
    leaves its source listed unlinked: a link can't be cut."""
    seen: dict[str, Citation] = {}
    for c in citations:
        seen.setdefault(c.url, c)
    allowed = allowed_urls(seen)
    room = TEXT_OBJECT_CHARS - len(_sources_heading(heading))
    parts = []
    for c in list(seen.values())[:limit]:
        label = escape(
            f"[{c.number}] {source_title(c.title, allowed)}{KIND_MARKS.get(c.source_kind, '')}"
        )
        unverified = " _(quote not verified)_" if not c.verified and heading == SOURCES else ""
        linked = _link(c.url, label) + unverified  # the section: markers link the quote
        parts.append(linked if len(linked) <= room else label + unverified)
    return parts


def _sources_heading(heading: str) -> str:
    return f"*{heading}:* "


def sources_line(citations: list[Citation], limit: int, *, heading: str = SOURCES) -> str:
    """The sources as one line of links, for text of any length (the plain fallback)."""
    return _sources_heading(heading) + _BETWEEN_SOURCES.join(
        _source_links(citations, limit, heading)
    )


def sources_blocks(
    citations: list[Citation], limit: int, *, heading: str = SOURCES
) -> list[dict[str, Any]]:
    """The sources as context blocks, as many as it takes for each text to stay within
    `TEXT_OBJECT_CHARS`: ten long titles and URLs make more than one holds, and Slack refuses
    the whole message for one text over it. Blocks break between links, never inside one."""
    texts = [_sources_heading(heading)]
    for n, part in enumerate(_source_links(citations, limit, heading)):
        joined = f"{texts[-1]}{_BETWEEN_SOURCES if n else ''}{part}"
        if len(joined) <= TEXT_OBJECT_CHARS:
            texts[-1] = joined
        else:
            texts.append(part)
    return [context_block(text) for text in texts]


def answer_messages(
    answer: Answer,
    answer_id: str | None,
    *,
    section_chars: int,
    message_chars: int,
    max_blocks: int,
    max_sources: int,
    escalate: bool = False,
    share: bool = False,
    native_feedback: bool = False,
) -> list[SlackMessage]:
    """The answer as one or more messages; the last carries sources, status and feedback (and
    "Still need help?" when the channel has people to escalate to)."""
    body = to_mrkdwn(answer.text, answer.citations)
    sections = split_text(body, section_chars) or [_EMPTY]
    footer: list[dict[str, Any]] = []
    labels = _labels(answer)
    if labels:
        footer.append(context_block(labels))
    if answer.citations:
        footer += sources_blocks(answer.citations, max_sources)
    if answer.consulted:
        footer += sources_blocks(answer.consulted, max_sources, heading=CONSULTED)
    if answer_id and answer.status is not AnswerStatus.ERROR:
        footer += _feedback(answer_id, escalate=escalate, share=share, native=native_feedback)
    messages: list[SlackMessage] = []
    current = SlackMessage(text="")
    for section in sections:
        too_long = len(current.text) + len(section) > message_chars
        if current.blocks and (too_long or len(current.blocks) + 1 > max_blocks - len(footer)):
            messages.append(current)
            current = SlackMessage(text="")
        current.blocks.append({"type": "section", "text": _mrkdwn(section)})
        current.text = f"{current.text}\n\n{section}" if current.text else section
    current.blocks.extend(footer)
    messages.append(current)
    return messages


def plain_messages(answer: Answer, limit: int) -> list[str]:
    """The fallback when Slack refuses blocks: the same content, labels and both lists of
    sources included, as text."""
    text = to_mrkdwn(answer.text, answer.citations) or _EMPTY
    if labels := _labels(answer):
        text = f"{labels}\n\n{text}"
    if answer.citations:
        text += "\n\n" + sources_line(answer.citations, len(answer.citations))
    if answer.consulted:
        text += "\n\n" + sources_line(answer.consulted, len(answer.consulted), heading=CONSULTED)
    return split_text(text, limit) or [_EMPTY]


def _labels(answer: Answer) -> str:
    return answer_labels(answer, _ICONS)


def _mrkdwn(text: str) -> dict[str, Any]:
    # verbatim: Slack must not turn bare domains into links or parse mentions in our text.
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def context_block(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [_mrkdwn(text)]}


def reason_modal(answer_id: str) -> dict[str, Any]:
    """The form a 👎 opens: what was wrong, and a note in the asker's own words."""
    options = [
        {"text": {"type": "plain_text", "text": label}, "value": value}
        for value, label in FEEDBACK_REASONS.items()
    ]
    return {
        "type": "modal",
        "callback_id": FEEDBACK_REASON,
        "private_metadata": answer_id,
        "title": {"type": "plain_text", "text": "What was wrong?"},
        "submit": {"type": "plain_text", "text": "Send"},
        "close": {"type": "plain_text", "text": "Skip"},
        "blocks": [
            {
                "type": "input",
                "block_id": "reason",
                "label": {"type": "plain_text", "text": "The answer…"},
                "element": {"type": "radio_buttons", "action_id": "reason", "options": options},
            },
            {
                "type": "input",
                "block_id": "note",
                "optional": True,
                "label": {"type": "plain_text", "text": "Anything to add?"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": "note",
                    "multiline": True,
                    "max_length": MAX_FEEDBACK_NOTE_CHARS,
                },
            },
        ],
    }


def escalation_text(targets: Sequence[str]) -> str:
    """The configured targets as Slack mentions (`<@U…>` people, `<!subteam^S…>` groups): the
    only mentions the bot ever writes, checked as ids when the settings load."""
    mentions = " ".join(f"<!subteam^{t}>" if t.startswith("S") else f"<@{t}>" for t in targets)
    return ESCALATION.format(targets=mentions)


def _button(action_id: str, value: str, text: str) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": action_id,
        "value": value,
        "text": {"type": "plain_text", "text": text},
    }


def _feedback(answer_id: str, *, escalate: bool, share: bool, native: bool) -> list[dict[str, Any]]:
    """The answer's buttons. `native`: Slack's own 👍/👎 (`feedback_buttons` in a
    `context_actions` block, which the client shows toggled), the others in an `actions`
    block; otherwise every button is a plain one."""
    others = [
        *([_button(ESCALATE, answer_id, STILL_NEED_HELP)] if escalate else []),
        *([_button(SHARE_ANSWER, answer_id, SHARE)] if share else []),
    ]
    if not native:
        votes = [
            _button(FEEDBACK_UP, answer_id, "👍 Helpful"),
            _button(FEEDBACK_DOWN, answer_id, "👎 Not helpful"),
        ]
        return [
            {"type": "actions", "block_id": f"feedback:{answer_id}", "elements": votes + others}
        ]
    feedback = {
        "type": "context_actions",
        "block_id": f"feedback:{answer_id}",
        "elements": [
            {
                "type": "feedback_buttons",
                "action_id": FEEDBACK,
                "positive_button": {
                    "text": {"type": "plain_text", "text": "Helpful"},
                    "accessibility_label": "This answer was helpful",
                    "value": f"up:{answer_id}",
                },
                "negative_button": {
                    "text": {"type": "plain_text", "text": "Not helpful"},
                    "accessibility_label": "This answer was not helpful",
                    "value": f"down:{answer_id}",
                },
            }
        ],
    }
    actions = {"type": "actions", "block_id": f"actions:{answer_id}", "elements": others}
    return [feedback, *([actions] if others else [])]
