"""The `auto` channel bench, small: the same code as `python -m bench.auto_channel`, for two
seconds at 20 messages a second, so CI keeps it running."""

from __future__ import annotations

from pathlib import Path

from bench.auto_channel import one_run

ACK_P99_MS = 100


async def test_an_auto_channel_acks_everything_and_answers_only_questions(tmp_path: Path) -> None:
    figures = await one_run(tmp_path, rate=20, seconds=2, question_share=0.1, model_seconds=0.2)
    assert figures["messages"] == 40
    assert figures["statuses"] == [200]
    assert figures["ack_ms_p99"] <= ACK_P99_MS
    assert figures["questions"] == 4
    # Three of the four are about the bundled docs; the fourth (a VPN password) is not, and
    # the relevance floor keeps it from the model: held back, not posted.
    assert figures["grounded_questions_answered"] == figures["grounded_questions"] == 3
    assert figures["other_questions_answered"] == 0
    assert figures["held_back"] == 1
    assert figures["non_questions_answered"] == 0
