"""A Slack thread read back from Slack, turned into history (`adapters.slack.threads`)."""

from __future__ import annotations

from adapters.slack.threads import Thread, answered_turns, discussion
from core.domain.conversation import NEWEST_UNREAD, Turn

BOT = "UBOT"
PLACEHOLDER = "_Looking through the docs…_"


def _message(ts: int, user: str, text: str) -> dict[str, str]:
    return {"ts": f"1700000000.{ts:06d}", "user": user, "text": text}


def test_a_thread_read_short_says_its_newest_messages_were_not_read() -> None:
    """Stopped at its page limit, the reading's last messages are the thread's middle: the
    model is told the newest are missing, not handed the middle as the latest."""
    first = _message(0, "U1", "Deploys fail with E1042")
    middle = tuple(_message(n, "U2", f"tried fix {n}") for n in range(1, 4))
    cut = discussion(
        Thread(first, middle, left_out=10, cut_short=True),
        BOT,
        leave_out=None,
        message_chars=200,
        max_chars=2_000,
    )
    whole = discussion(
        Thread(first, middle, left_out=10), BOT, leave_out=None, message_chars=200, max_chars=2_000
    )
    assert cut is not None
    assert whole is not None
    assert cut.question.endswith(f"U2: tried fix 3\n… {NEWEST_UNREAD}")
    assert NEWEST_UNREAD not in whole.question


def test_an_answer_still_being_written_is_no_turn() -> None:
    """Two follow-ups close together: the first one's placeholder stands in the thread when
    the second reads it back, and is not an answer to pair with the first."""
    thread = Thread(
        _message(0, "U1", "How do I re-ingest?"),
        (
            _message(1, BOT, "Run bot ingest [1]."),
            _message(2, "U1", "and --prune?"),
            _message(3, BOT, PLACEHOLDER),
        ),
        left_out=0,
    )
    assert answered_turns(thread, BOT, 500, PLACEHOLDER) == [
        Turn("How do I re-ingest?", "Run bot ingest [1].")
    ]
