"""Placeholders a killed process left behind, turned into an apology by the next one.

SIGTERM is drained (`SlackBot.drain`): every answer cut short replaces its placeholder with an
apology. A hard kill (SIGKILL, the OOM killer, a host that dies, Docker past its stop timeout)
runs no code at all, so the asker's "Looking through the docs…" would stay for ever. Hence:

- while an answer is written, its message (the placeholder, or the streaming message that
  replaced it) is recorded in the platform state (`PendingMessages`), and the record is
  dropped once the answer or an apology replaced it;
- every Slack process beats in the same store while it runs (`LeftoverSweeper.beat`), so the
  others can tell it is alive; each beat, and the stop, also retry the drops that failed;
- at start, and then every `sweep_interval_s`, a process takes the records no live process
  will replace (their owner silent for `owner_silent_s`, or older than `max_answer_s`), claims
  each (exactly one process wins it) and edits its message into `LEFTOVER_APOLOGY`, once.

Why heartbeats rather than a host and a pid: processes sharing Elasticsearch run on other
machines, and in containers of their own every process is pid 1; a pid can't tell whether its
process is gone there, a heartbeat can. The price is the wait: a placeholder is apologised for
`owner_silent_s` after its process stopped beating at the soonest, which a process starting
right after a crash may not have waited yet, hence the later looks.

A failure here never costs an answer: a record that could not be written is logged and the
answer goes on (it is then only unprotected against a hard kill), and a failed look is logged
and tried again at the next one. Nor does it overwrite one: a record left after its answer was
delivered would, once its process stopped beating, be claimed by the next process and the
answer edited into the apology. So a drop that fails is remembered and tried again at every
beat while the process is alive (a live owner's record is nobody else's to take) and once more
when it stops. What remains: a hard kill between the answer's last edit and its record's
drop (one store write), or after a failed drop and before a retry went through (at most a
`heartbeat_s`, with the store failing), or a store that fails from the drop until the process
stops; each apologises, late, for an answer the asker already has.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid

import structlog
from aiohttp import ClientError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.progress import slack_error
from core.config import LeftoverSettings
from core.domain.replies import PendingReply
from core.ports import PendingReplies

log = structlog.get_logger(__name__)

PLATFORM = "slack"
LEFTOVER_APOLOGY = (
    "Sorry, the bot stopped before this answer was finished. Please ask your question again."
)
# Slack's errors that mean "not now" rather than "never": the record is put back for the next
# look. Any other error (the message or channel is gone, the bot was removed from it) is final.
_FOR_NOW = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
_OWNER_RUN_CHARS = 8  # of a uuid: tells two runs of one pid on one host apart (pid 1, restarted)


def process_owner() -> str:
    """This process's name in the records, `host:pid:run`: the host and pid for the person
    reading them, the run because a restarted container's process has the same host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:_OWNER_RUN_CHARS]}"


class PendingMessages:
    """The records of one process's replies in progress. Never raises: a store that fails
    costs the protection against a hard kill, never the answer."""

    def __init__(self, state: PendingReplies, owner: str) -> None:
        self._state = state
        self.owner = owner
        # Replies answered whose record could not be dropped: to drop at the next beat.
        self._undropped: set[str] = set()

    async def hold(
        self,
        reply_id: str,
        channel: str,
        message: str,
        thread: str | None,
        *,
        started: float,
        streamed: bool = False,
    ) -> None:
        reply = PendingReply(
            reply_id,
            PLATFORM,
            channel,
            message,
            self.owner,
            thread=thread or "",
            streamed=streamed,
            created_at=started,
        )
        try:
            await self._state.hold_reply(reply)
        except Exception:  # the answer goes on, unprotected against a hard kill
            log.warning("reply_not_recorded", platform=PLATFORM, exc_info=True)

    async def drop(self, reply_id: str) -> None:
        """Forget the reply: its message now shows the answer (or an apology). A failure is
        remembered for `retry_drops`: a record left there would have the next process edit
        the delivered answer into an apology once this one stopped beating."""
        try:
            await self._state.drop_reply(reply_id)
        except Exception:
            self._undropped.add(reply_id)
            log.warning("reply_record_not_dropped", platform=PLATFORM, exc_info=True)

    async def retry_drops(self) -> None:
        """The drops that failed, tried again (at each beat, and when the process stops);
        those that fail again are kept for the next try."""
        for reply_id in list(self._undropped):
            try:
                await self._state.drop_reply(reply_id)
            except Exception:
                log.warning("reply_record_not_dropped", platform=PLATFORM, exc_info=True)
                continue
            self._undropped.discard(reply_id)
            log.info("reply_record_dropped_late", platform=PLATFORM)


class LeftoverSweeper:
    """Beats for this process and apologises for the placeholders of processes that are gone."""

    def __init__(
        self,
        state: PendingReplies,
        client: AsyncWebClient,
        settings: LeftoverSettings,
        owner: str,
        pending: PendingMessages | None = None,
    ) -> None:
        """`pending`: this process's records (same `owner`), whose failed drops each beat
        retries."""
        self._state = state
        self._client = client
        self._settings = settings
        self._owner = owner
        self._pending = pending

    async def run(self) -> None:
        """Beat, look once (the start's look), then beat every `heartbeat_s` and look every
        `sweep_interval_s`, until cancelled (the process stopping, its answers drained): the
        failed drops are tried a last time then, as nothing will beat for them after."""
        s = self._settings
        try:
            await self.beat()
            await self.sweep()
            next_sweep = time.monotonic() + s.sweep_interval_s
            while True:
                await asyncio.sleep(s.heartbeat_s)
                await self.beat()
                if s.sweep_interval_s and time.monotonic() >= next_sweep:
                    await self.sweep()
                    next_sweep = time.monotonic() + s.sweep_interval_s
        finally:
            if self._pending:
                await self._pending.retry_drops()

    async def beat(self) -> None:
        """This process is alive; and the records of answers it delivered but could not drop
        are dropped now, while it still beats (`PendingMessages.retry_drops`)."""
        try:
            await self._state.beat(self._owner, forget_after_s=self._settings.max_answer_s)
        except Exception:  # the next beat tries again
            log.warning("slack_heartbeat_failed", exc_info=True)
        if self._pending:
            await self._pending.retry_drops()

    async def sweep(self) -> int:
        """Apologise for at most `limit` abandoned placeholders, oldest first; returns how many
        were replaced. Never raises: a failure is logged, and the next look tries again."""
        s = self._settings
        try:
            found = await self._state.abandoned_replies(
                PLATFORM, silent_s=s.owner_silent_s, older_than_s=s.max_answer_s, limit=s.limit
            )
        except Exception:  # never the reason the process can't start
            log.warning("slack_leftovers_unreadable", exc_info=True)
            return 0
        replaced = 0
        for reply in found:
            if reply.owner == self._owner:
                continue  # ours, and we are alive: past max_answer_s, yet still being answered
            try:
                outcome = await self._apologise(reply)
            except Exception:  # the store failed: the others may still go
                log.warning("slack_leftover_failed", exc_info=True)
                continue
            if outcome is None:
                break  # Slack can't take edits now: the rest wait for the next look
            replaced += outcome
        if found:
            log.info("slack_leftovers_apologised", found=len(found), replaced=replaced)
        return replaced

    async def _apologise(self, reply: PendingReply) -> bool | None:
        """True when this process replaced the placeholder; False when another process had
        claimed it, or the message is gone for good; None when Slack can't take it now (the
        record is put back for the next look)."""
        if not await self._state.claim_reply(reply.id):
            return False
        try:
            if reply.streamed:  # a stream must end before its message can be edited
                await self._stop_stream(reply)
            await self._client.chat_update(
                channel=reply.channel, ts=reply.message, text=LEFTOVER_APOLOGY, blocks=[]
            )
        except SlackApiError as exc:
            error = slack_error(exc)
            if error not in _FOR_NOW:
                log.info("slack_leftover_gone", error=error)
                return False
            log.warning("slack_leftover_not_now", error=error)
            await self._state.hold_reply(reply)
            return None
        except (ClientError, TimeoutError, OSError) as exc:
            log.warning("slack_leftover_not_now", error=type(exc).__name__)
            await self._state.hold_reply(reply)
            return None
        return True

    async def _stop_stream(self, reply: PendingReply) -> None:
        """Slack ends a stream nobody appends to after a while by itself: stopping one it
        already ended is refused, and nothing to worry about."""
        try:
            await self._client.chat_stopStream(channel=reply.channel, ts=reply.message)
        except SlackApiError as exc:
            log.debug("slack_leftover_stream_not_stopped", error=slack_error(exc))
