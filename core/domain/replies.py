"""A reply in progress: the message a chat adapter shows while an answer is written (Slack's
"Looking through the docs…", or the streaming message that replaced it), which the answer, or
an apology, must replace.

Kept in the platform state, not in memory, so that a process killed in the middle of an answer
(SIGKILL, the OOM killer, a host that dies, a container stopped past its timeout) leaves a
record that the next process can act on: otherwise the asker waits for ever for an answer that
will never come.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class PendingReply:
    """`id` is the answer's own (one record per answer, rewritten when its message changes);
    `channel` and `message` say where the message is (Slack: a channel id and a message ts);
    `thread` is the thread it sits in ("" for none); `streamed` says the message is a platform
    stream that must be stopped before it can be edited; `owner` names the process answering
    (see `PendingReplies.beat`); `created_at` is when the answer started (epoch seconds)."""

    id: str
    platform: str
    channel: str
    message: str
    owner: str
    thread: str = ""
    streamed: bool = False
    created_at: float = field(default_factory=time.time)
