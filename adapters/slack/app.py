"""Slack events -> core questions; core answers -> threaded Slack messages.

Bolt's `AsyncApp` acknowledges each event at once and runs these listeners in the background,
so a slow answer never makes Slack retry. Slack still retries now and then (and a mention in a
thread arrives twice: as `app_mention` and as `message`), so every delivery is claimed in the
store by event id and by message id before any work: one message, one answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

import structlog
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.answer_labels import (
    ALREADY_SHARED,
    NO_LONGER_KNOWN,
    NOT_HERE,
    NOTHING_TO_ASK,
    TEXT_ONLY,
)
from adapters.draining import InFlight
from adapters.slack.feedback import FeedbackListeners
from adapters.slack.leftovers import PendingMessages
from adapters.slack.payloads import (
    drop_malformed_events,
    id_of,
    is_direct_message,
    team_of,
    viewed_channel,
)
from adapters.slack.progress import AnswerProgressMessage, slack_error
from adapters.slack.render import (
    ESCALATE,
    FEEDBACK,
    FEEDBACK_DOWN,
    FEEDBACK_REASON,
    FEEDBACK_UP,
    SHARE_ANSWER,
    SlackMessage,
    answer_messages,
    escape,
    plain_messages,
)
from adapters.slack.threads import (
    answered_turns,
    asked_in,
    discussion,
    read_thread,
    without_mention,
)
from core import metrics
from core.answer.engine import AnswerEngine, held_back
from core.config import ResolvedPolicy, SlackSettings
from core.domain.conversation import Answer, AnswerStatus, ChannelKind, Question
from core.domain.questions import reads_as_follow_up
from core.ports import ConversationStore, PlatformState

log = structlog.get_logger(__name__)

# A mention of a person (U…, W… in Enterprise Grid) or a user group, as Slack writes it.
_SOMEONE = re.compile(r"<@[UW][A-Z0-9]+(?:\|[^>]*)?>|<!subteam\^[A-Z0-9]+(?:\|[^>]*)?>")
# Messages people write: plain, "also send to channel" replies, messages with a file.
_ANSWERED_SUBTYPES = frozenset({None, "thread_broadcast", "file_share"})
# A reply looked up by its timestamp: the reply, and the thread's first message, which Slack
# may put before it in any conversations.replies answer whatever the time range.
_REPLY_LOOKUP_LIMIT = 2
ASK_SHORTCUT = "ask_docs"  # the message shortcut's callback id (manifest.yml)
APOLOGY = (
    "Sorry, something went wrong while answering. Please try again in a moment; "
    "if it keeps happening, tell the bot's owners."
)
# What Slack answers a bot that posts where it is not a member: `not_in_channel` in a
# public channel, `channel_not_found` in a private one or a conversation between people.
_NOT_A_MEMBER = frozenset({"not_in_channel", "channel_not_found"})


class _NotAMember(Exception):
    """Slack refuses the bot's posts in a conversation it is no member of."""


NOT_A_MEMBER = (
    "I'm not in this conversation, so I can't answer here. Add {bot} to the channel and ask "
    "again, or ask in a direct message with {bot}."
)
SHUTDOWN_APOLOGY = (
    "Sorry, the bot was restarted before this answer was finished. Please ask again in a moment."
)


class SlackBot:
    def __init__(
        self,
        engine: AnswerEngine,
        store: ConversationStore,
        state: PlatformState,
        settings: SlackSettings,
        policies: Callable[[str], ResolvedPolicy],
        questions: Callable[[str], Awaitable[bool]],
        pending: PendingMessages | None = None,
    ) -> None:
        """`policies` gives each channel's policy (`Settings.policy`) by its key; `questions`
        tells whether an unasked message is a question for the docs (`QuestionGate`);
        `pending` records each placeholder until its answer replaced it, so a process killed
        meanwhile leaves it to the next to apologise for (`adapters/slack/leftovers`)."""
        self._pending = pending
        self._engine = engine
        self._store = store
        self._state = state
        self._settings = settings
        self._policies = policies
        self._questions = questions
        # Which channel each person is looking at, as Slack's agent surface last said
        # (app_context_changed), oldest first; bounded by `agent_context_users`.
        self._viewing: dict[str, str] = {}
        self._in_flight = InFlight("slack")
        self._feedback = FeedbackListeners(state, policies)

    def register(self, app: AsyncApp) -> None:
        app.use(drop_malformed_events)
        app.event("app_mention")(self._tracked(self._on_mention))
        app.event("message")(self._tracked(self._on_message))
        app.action(FEEDBACK_UP)(self._tracked(self._feedback.on_feedback))
        app.action(FEEDBACK_DOWN)(self._tracked(self._feedback.on_feedback))
        app.action(FEEDBACK)(self._tracked(self._feedback.on_feedback))
        app.action(ESCALATE)(self._tracked(self._feedback.on_escalate))
        app.action(SHARE_ANSWER)(self._tracked(self._on_share))
        app.shortcut(ASK_SHORTCUT)(self._tracked(self._on_shortcut))
        app.view(FEEDBACK_REASON)(self._tracked(self._feedback.on_feedback_reason))
        app.event("reaction_added")(self._tracked(self._on_reaction))
        app.event("app_home_opened")(self._tracked(self._on_home_opened))
        app.event("app_context_changed")(self._tracked(self._on_context_changed))

    async def drain(self) -> None:
        """On shutdown, once no new events arrive: the listeners still running get
        `slack.shutdown_grace_s` to finish; the rest are cancelled, and each answer cut short
        replaces its placeholder with an apology (within `slack.apology_deadline_s`), so no
        thread is left "looking through the docs" for ever."""
        await self._in_flight.drain(
            self._settings.shutdown_grace_s, self._settings.apology_deadline_s
        )

    def _tracked(self, listener: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
        """The listener, with its task known to `drain` while it runs. Bolt runs each listener
        in a task of its own and passes the arguments its signature names (kept by `wraps`)."""

        @functools.wraps(listener)
        async def run(**kwargs: Any) -> None:
            with self._in_flight.tracking():
                await listener(**kwargs)

        return run

    # -- events ------------------------------------------------------------------------------

    async def _on_mention(
        self,
        body: dict[str, Any],
        event: dict[str, Any],
        client: AsyncWebClient,
        context: dict[str, Any],
    ) -> None:
        if event.get("bot_id") or event.get("user") == context.get("bot_user_id"):
            return
        if event.get("edited") or event.get("subtype") not in _ANSWERED_SUBTYPES:
            return  # Slack re-sends app_mention when a message is edited
        if not _has_fields(event, "app_mention", "channel", "ts"):
            return
        await self._answer_mention(body, event, client, context.get("bot_user_id"))

    async def _answer_mention(
        self,
        body: dict[str, Any],
        event: dict[str, Any],
        client: AsyncWebClient,
        bot_user: str | None,
    ) -> None:
        """A message that mentions the bot, answered in its thread (or one opened from it),
        once, by whichever listener hears of it first."""
        team = body.get("team_id", "")
        if self._silenced(team, event["channel"]):
            log.info("not_answered", platform="slack", reason="trigger off")
            return
        if not await self._claim(body, event):
            return
        thread_ts = event.get("thread_ts") or event["ts"]
        await self._answer(client, team, event, bot_user, thread_ts=thread_ts)

    async def _on_message(
        self,
        body: dict[str, Any],
        event: dict[str, Any],
        client: AsyncWebClient,
        context: dict[str, Any],
    ) -> None:
        bot_user = context.get("bot_user_id")
        if event.get("subtype") not in _ANSWERED_SUBTYPES or event.get("bot_id"):
            return  # edits, deletes, joins, bot messages...
        if event.get("user") in (None, bot_user):
            return
        if not _has_fields(event, "message", "channel", "ts"):
            return
        if not str(event.get("text") or "").strip():
            # A file or an image with no words: in a channel a reply would be noise, but in a
            # direct message the sender waits for one.
            if event.get("channel_type") == "im" and await self._claim(body, event):
                with contextlib.suppress(SlackApiError):
                    await client.chat_postMessage(channel=event["channel"], text=TEXT_ONLY)
            return
        team = body.get("team_id", "")
        thread_ts = event.get("thread_ts")
        if event.get("channel_type") == "im":  # a policy's trigger is about channels
            if not await self._claim(body, event):
                return
            await self._answer(client, team, event, bot_user, thread_ts=thread_ts)
            return
        policy = self._policy(body, event)
        if policy.trigger == "off":
            return
        if bot_user and f"<@{bot_user}>" in event.get("text", ""):
            if event.get("subtype") is None:
                return  # the app_mention listener owns mentions
            # A mention with a file or sent to the channel from a thread: Slack may send no
            # app_mention for it, so it is answered here too (the claim keeps it to one answer).
            await self._answer_mention(body, event, client, bot_user)
            return
        if thread_ts is None:
            if policy.trigger == "auto":
                await self._answer_unasked(body, event, client, bot_user, policy)
            return  # a channel message that does not mention the bot
        if not _for_the_bot(event.get("text", ""), policy):
            return
        if not await self._state.is_bot_thread(_key(team, event["channel"], thread_ts)):
            return
        if not await self._claim(body, event):
            return
        await self._answer(client, team, event, bot_user, thread_ts=thread_ts)

    def _silenced(self, team: str, channel: str) -> bool:
        """A channel whose policy says `trigger: off`; never a direct message (a `D…`
        channel), which is always answered, whatever the channels' trigger."""
        if is_direct_message(channel):
            return False
        return self._policies(f"slack/{team}/{channel}").trigger == "off"

    def _policy(self, body: dict[str, Any], event: dict[str, Any]) -> ResolvedPolicy:
        return self._policies(f"slack/{body.get('team_id', '')}/{event.get('channel', '')}")

    async def _answer_unasked(
        self,
        body: dict[str, Any],
        event: dict[str, Any],
        client: AsyncWebClient,
        bot_user: str | None,
        policy: ResolvedPolicy,
    ) -> None:
        """A channel message nobody asked the bot about, in an `auto` channel: answered in its
        thread (for the poster alone in a `private` channel) when it reads as a question
        (`questions_only`) and, with
        `answer_only_when_grounded`, only when the answer stands on verified citations;
        otherwise nothing is posted and the abstention is logged. Nothing is shown while the
        answer is written, since it may never be posted."""
        text = without_mention(event.get("text", ""), bot_user)
        if policy.questions_only and not await self._questions(text):
            return
        if not await self._claim(body, event):
            return
        team, channel, ts = body.get("team_id", ""), event["channel"], event["ts"]
        key = _key(team, channel, ts)
        try:
            answer = await self._engine.answer(
                Question(
                    "slack", key, event.get("user", ""), text, ChannelKind.THREAD, unasked=True
                )
            )
            if held_back(answer, policy):
                log.info("abstained", platform="slack", status=answer.status.value)
                metrics.HELD_BACK.labels("slack").inc()
                await self._record(key, text, answer, posted=False)
                return
            if policy.private:  # for the poster alone, as an answer they asked for would be
                answer_id = await self._record(key, text, answer)
                await self._post_privately(
                    client,
                    channel,
                    event["user"],
                    ts,
                    answer,
                    answer_id,
                    escalate=bool(policy.escalate_to),
                )
                return
            await self._state.remember_thread(key)
            answer_id = await self._record(key, text, answer)
            escalate = bool(policy.escalate_to)
            await self._deliver(client, channel, ts, None, answer, answer_id, escalate=escalate)
        except Exception:  # unasked: a failure stays quiet in the channel, loud in the log
            log.exception("unasked_answer_failed", platform="slack", channel=channel)

    async def _record(
        self, key: str, text: str, answer: Answer, *, posted: bool = True, channel: str = ""
    ) -> str | None:
        """`channel`: the channel whose policy answered, where it is not the conversation's
        own (a DM asked while viewing a channel), so a re-check asks under it again."""
        try:
            return await self._state.record_answer(
                key, text, answer, posted=posted, channel=channel or None
            )
        except Exception:
            log.warning("answer_not_recorded", platform="slack", exc_info=True)
            return None

    async def _claim(self, body: dict[str, Any], event: dict[str, Any]) -> bool:
        return await self._state.first_delivery(
            f"slack-event:{body.get('event_id', '')}",
            f"slack-message:{event.get('channel')}:{event.get('ts')}",
        )

    # -- answering ---------------------------------------------------------------------------

    async def _answer(
        self,
        client: AsyncWebClient,
        team: str,
        event: dict[str, Any],
        bot_user: str | None,
        *,
        thread_ts: str | None,
        refused: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Answer one message; whatever fails (Slack, the network, the store) or stops it (a
        shutdown), the thread ends with a visible message, never a placeholder left hanging.
        Where Slack refuses the bot's first post because it is no member there (the shortcut
        is offered everywhere), nothing is answered, and `refused` says so to whoever asked."""
        channel = event["channel"]
        if event.get("channel_type") != "im" and self._policies(f"slack/{team}/{channel}").private:
            await self._answer_privately(client, team, event, bot_user, thread_ts, refused)
            return
        progress: AnswerProgressMessage | None = None
        reply_id, started = uuid.uuid4().hex, time.time()
        try:
            try:
                placeholder = await self._post(
                    client, channel, thread_ts, text=self._settings.placeholder, blocks=None
                )
            except _NotAMember:
                log.info("not_answered", platform="slack", reason="no member of the channel")
                if refused is not None:
                    await refused()
                return
            if placeholder and self._pending:
                await self._pending.hold(reply_id, channel, placeholder, thread_ts, started=started)
            progress = AnswerProgressMessage(
                client,
                channel=channel,
                thread_ts=thread_ts,
                placeholder=placeholder,
                team=team,
                user=event.get("user", ""),
                use_stream_api=self._settings.stream_api,
                update_interval_s=self._settings.update_interval_s,
                preview_chars=self._settings.section_chars - 2,
                on_stream=functools.partial(
                    self._streaming, reply_id, channel, thread_ts, started=started
                ),
            )
            await self._answer_unguarded(client, team, event, bot_user, thread_ts, progress)
        except asyncio.CancelledError:
            log.warning("answer_cut_short", platform="slack", channel=channel)
            message_ts = progress.message_ts if progress else None
            await self._deliver_text(client, channel, thread_ts, message_ts, [SHUTDOWN_APOLOGY])
            raise
        except Exception:
            log.exception("answer_failed", platform="slack", channel=channel)
            message_ts = progress.message_ts if progress else None
            await self._deliver_text(client, channel, thread_ts, message_ts, [APOLOGY])
        finally:
            # Replaced (by the answer or an apology): no later start must touch it. Dropped
            # only now, so a process killed before the replacement leaves the record.
            if self._pending:
                await self._pending.drop(reply_id)

    async def _streaming(
        self, reply_id: str, channel: str, thread_ts: str | None, stream_ts: str, *, started: float
    ) -> None:
        """A stream now shows the answer, and the placeholder is about to be deleted: the
        record names the stream from here on (written before the deletion, so a kill in
        between leaves a placeholder and an apologised stream, never an unapologised one)."""
        if self._pending:
            await self._pending.hold(
                reply_id, channel, stream_ts, thread_ts, started=started, streamed=True
            )

    async def _answer_privately(
        self,
        client: AsyncWebClient,
        team: str,
        event: dict[str, Any],
        bot_user: str | None,
        thread_ts: str | None,
        refused: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """A `private` channel: the answer goes to the asker alone (ephemeral, in the thread)
        with a button to share it. Nothing is shown while it is written (an ephemeral message
        can't be edited), but to a shortcut's clicker (`refused` given): "looking…", which
        Slack refuses where the bot is no member, before any answer is paid for."""
        channel, user = event["channel"], event.get("user", "")
        if refused is not None and not await self._looking(client, channel, user, thread_ts):
            await refused()
            return
        key = _key(team, channel, thread_ts)
        # The asker's own conversation in the thread: another member's follow-up there must
        # not get this private answer as its history (the model could repeat it to them).
        own = f"{key}/{user}"
        try:
            async with self._engine.in_turn(own):
                text = await self._question(client, own, event, bot_user, thread_ts)
                if thread_ts is not None:  # follow-ups there are answered, privately too
                    await self._state.remember_thread(key)
                answer = await self._engine.answer(
                    Question("slack", own, user, text, ChannelKind.THREAD, channel_key=key)
                )
            answer_id = await self._record(key, text, answer)
            escalate = bool(self._policies(f"slack/{team}/{channel}").escalate_to)
            await self._post_privately(
                client, channel, user, thread_ts, answer, answer_id, escalate=escalate
            )
        except Exception:
            log.exception("private_answer_failed", platform="slack", channel=channel)
            with contextlib.suppress(SlackApiError):
                await client.chat_postEphemeral(
                    channel=channel, user=user, thread_ts=thread_ts, text=APOLOGY
                )

    async def _looking(
        self, client: AsyncWebClient, channel: str, user: str, thread_ts: str | None
    ) -> bool:
        """ "Looking…" for `user` alone; False where Slack says the bot is no member there."""
        try:
            await client.chat_postEphemeral(
                channel=channel, user=user, thread_ts=thread_ts, text=self._settings.placeholder
            )
        except SlackApiError as exc:
            if slack_error(exc) in _NOT_A_MEMBER:
                log.info("not_answered", platform="slack", reason="no member of the channel")
                return False
            log.info("slack_ephemeral_refused", error=slack_error(exc))
        except Exception as exc:  # noqa: BLE001 (the network: it says nothing of membership)
            log.info("slack_ephemeral_refused", error=_describe(exc))
        return True

    async def _post_privately(
        self,
        client: AsyncWebClient,
        channel: str,
        user: str,
        thread_ts: str | None,
        answer: Answer,
        answer_id: str | None,
        *,
        escalate: bool = False,
    ) -> None:
        """The answer as messages only `user` sees, in the thread, with "Share with the
        channel" under the last, and "Still need help?" where the channel has people to call
        in: only the asker's click calls them (in the thread, for everyone to see), never the
        bot by itself, as it does for an answer everyone saw."""
        for message in self._messages(answer, answer_id, escalate=escalate, share=True):
            await client.chat_postEphemeral(
                channel=channel,
                user=user,
                thread_ts=thread_ts,
                text=message.text,
                blocks=message.blocks,
            )

    async def _on_share(
        self, ack: Any, body: dict[str, Any], action: dict[str, Any], client: AsyncWebClient
    ) -> None:
        """ "Share with the channel": the private answer, as it was checked and kept, posted in
        the thread for everyone, once."""
        await ack()
        answer_id = str(action.get("value", ""))
        user = id_of(body, "user")
        channel = id_of(body, "channel")
        kept = await self._state.recorded_answer(answer_id)
        if kept is None or not await self._state.first_delivery(f"slack-share:{answer_id}"):
            refusal = NO_LONGER_KNOWN if kept is None else ALREADY_SHARED
            with contextlib.suppress(SlackApiError):
                await client.chat_postEphemeral(channel=channel, user=user, text=escape(refusal))
            return
        thread = kept.conversation_key.rsplit("/", 1)[-1]
        thread_ts = None if thread == "direct" else thread
        await self._state.remember_thread(kept.conversation_key)
        team = team_of(body)
        escalate = bool(self._policies(f"slack/{team}/{channel}").escalate_to)
        await self._deliver(
            client, channel, thread_ts, None, kept.answer, answer_id, escalate=escalate
        )

    async def _agent_thread_status(
        self, client: AsyncWebClient, key: str, channel: str, thread_ts: str, question: str
    ) -> None:
        """A direct-message thread (Slack's agent surface): "looking through the docs…" while
        answering, and the thread titled after its first question. Slack refuses both outside
        agent threads; that costs nothing but a log line."""
        s = self._settings
        try:
            await client.assistant_threads_setStatus(
                channel_id=channel,
                thread_ts=thread_ts,
                status=s.agent_status,
                loading_messages=list(s.agent_loading_messages),
            )
            if not await self._store.recent(key, 1):
                title = " ".join(question.split())[: s.agent_title_chars]
                await client.assistant_threads_setTitle(
                    channel_id=channel, thread_ts=thread_ts, title=title
                )
        except SlackApiError as exc:
            log.debug("slack_agent_status_refused", error=slack_error(exc))

    async def _on_home_opened(self, event: dict[str, Any], context: dict[str, Any]) -> None:
        """The Messages tab (the agent surface's start): the suggested prompts, through the
        `set_suggested_prompts` Bolt gives the listener of that tab's event."""
        set_prompts = context.get("set_suggested_prompts")
        if event.get("tab") != "messages" or not self._settings.suggested_prompts:
            return
        if set_prompts is None:
            return
        try:
            await set_prompts(prompts=list(self._settings.suggested_prompts))
        except SlackApiError as exc:
            log.debug("slack_suggested_prompts_refused", error=slack_error(exc))

    async def _on_context_changed(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        """The person moved to another channel while the agent is open: questions in their
        direct messages now follow that channel's policy. Nothing in view (no channel among
        the context's entities) leaves the last channel's."""
        user = str(event.get("user", ""))
        viewed = viewed_channel(event.get("context"))
        if user and viewed is not None:
            channel, team = viewed
            self._viewing[user] = f"slack/{team or body.get('team_id', '')}/{channel}"
            while len(self._viewing) > self._settings.agent_context_users:
                self._viewing.pop(next(iter(self._viewing)))

    async def _answer_unguarded(
        self,
        client: AsyncWebClient,
        team: str,
        event: dict[str, Any],
        bot_user: str | None,
        thread_ts: str | None,
        progress: AnswerProgressMessage,
    ) -> None:
        channel = event["channel"]
        key = _key(team, channel, thread_ts)
        direct = event.get("channel_type") == "im"
        kind = ChannelKind.DIRECT if direct else ChannelKind.THREAD
        user = event.get("user", "")
        # In a direct message, the channel the person is looking at (Slack's agent surface
        # says) decides the policy: its sources, its web search.
        viewing = self._viewing.get(user, "") if direct else ""
        try:
            # From before the thread is read back: two follow-ups never both fill a history.
            async with self._engine.in_turn(key):
                text = await self._question(client, key, event, bot_user, thread_ts)
                if thread_ts is not None:
                    await self._state.remember_thread(key)
                if direct and thread_ts is not None:
                    await self._agent_thread_status(client, key, channel, thread_ts, text)
                answer = await self._engine.answer(
                    Question("slack", key, user, text, kind, channel_key=viewing),
                    on_progress=progress.update,
                )
        finally:
            await progress.finish()
        answer_id = await self._record(key, text, answer, channel=viewing)
        targets = self._policies(f"slack/{team}/{channel}").escalate_to
        await self._deliver(
            client,
            channel,
            thread_ts,
            progress.message_ts,
            answer,
            answer_id,
            escalate=bool(targets),
        )
        if targets and answer.status is AnswerStatus.NOT_FOUND:
            # Asked, and the docs don't have it: a person is called in without a click.
            await self._feedback.escalate(client, channel, thread_ts, targets, answer_id or key)

    async def _deliver(
        self,
        client: AsyncWebClient,
        channel: str,
        thread_ts: str | None,
        placeholder: str | None,
        answer: Answer,
        answer_id: str | None,
        *,
        escalate: bool = False,
    ) -> None:
        s = self._settings
        messages = self._messages(answer, answer_id, escalate=escalate)
        try:
            for n, message in enumerate(messages):
                if n == 0 and placeholder:
                    await client.chat_update(
                        channel=channel, ts=placeholder, text=message.text, blocks=message.blocks
                    )
                else:
                    await client.chat_postMessage(
                        channel=channel,
                        thread_ts=thread_ts,
                        text=message.text,
                        blocks=message.blocks,
                    )
        except Exception as exc:  # noqa: BLE001 (any failure: the same answer as plain text)
            # msg_too_long, invalid_blocks, a network error...: never silence.
            log.warning("slack_blocks_refused", error=_describe(exc))
            await self._deliver_text(
                client, channel, thread_ts, placeholder, plain_messages(answer, s.plain_chars)
            )

    def _messages(
        self, answer: Answer, answer_id: str | None, *, escalate: bool = False, share: bool = False
    ) -> list[SlackMessage]:
        """The answer as Slack messages, within this workspace's limits."""
        s = self._settings
        return answer_messages(
            answer,
            answer_id,
            section_chars=s.section_chars,
            message_chars=s.message_chars,
            max_blocks=s.max_blocks,
            max_sources=s.max_sources,
            escalate=escalate,
            share=share,
            native_feedback=s.native_feedback,
        )

    async def _deliver_text(
        self,
        client: AsyncWebClient,
        channel: str,
        thread_ts: str | None,
        placeholder: str | None,
        texts: list[str],
    ) -> None:
        try:
            for n, text in enumerate(texts):
                if n == 0 and placeholder:
                    await client.chat_update(channel=channel, ts=placeholder, text=text, blocks=[])
                else:
                    await client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text)
        except Exception as exc:  # noqa: BLE001 (last resort below)
            log.error("slack_post_failed", error=_describe(exc))
            with contextlib.suppress(_NotAMember):  # no post can say anything there
                await self._post(client, channel, thread_ts, text=APOLOGY, blocks=None)

    async def _post(
        self,
        client: AsyncWebClient,
        channel: str,
        thread_ts: str | None,
        *,
        text: str,
        blocks: list[dict[str, Any]] | None,
    ) -> str | None:
        try:
            response = await client.chat_postMessage(
                channel=channel, thread_ts=thread_ts, text=text, blocks=blocks
            )
        except SlackApiError as exc:
            if slack_error(exc) in _NOT_A_MEMBER:
                raise _NotAMember from None
            log.error("slack_post_failed", error=slack_error(exc))
            return None
        except Exception as exc:  # noqa: BLE001 (callers carry on without the message)
            log.error("slack_post_failed", error=_describe(exc))
            return None
        ts = response.get("ts")
        return str(ts) if ts else None

    async def _question(
        self,
        client: AsyncWebClient,
        key: str,
        event: dict[str, Any],
        bot_user: str | None,
        thread_ts: str | None,
    ) -> str:
        """The question a message asks, once the conversation holds what the bot needs of its
        thread (`_catch_up`): its text without the bot's mention."""
        text = without_mention(event.get("text", ""), bot_user)
        ts = str(event.get("ts"))
        if thread_ts is None or thread_ts == ts:
            return text  # a direct message, or a new thread: nothing before it
        return await self._catch_up(client, key, event["channel"], thread_ts, bot_user, ts, text)

    async def _catch_up(
        self,
        client: AsyncWebClient,
        key: str,
        channel: str,
        thread_ts: str,
        bot_user: str | None,
        before_ts: str,
        text: str,
    ) -> str:
        """Reads the thread from Slack, once, when our store has none of it (or the message is
        a bare mention): in the bot's own thread its earlier turns (`answered_turns`); in a
        thread it was not part of, the discussion so far as the conversation's first turn
        (`discussion`), so the model knows what "is this expected?" is about. A bare mention
        asks the thread's question (`asked_in`). Returns the question; rate limits just mean
        less history, or none."""
        remembered = bool(await self._store.recent(key, 1))
        if text and remembered:
            return text
        s = self._settings
        thread = await read_thread(
            client,
            channel,
            thread_ts,
            before_ts=before_ts,
            max_messages=s.history_messages,
            max_pages=s.history_pages,
        )
        asked = None if text else asked_in(thread, bot_user)
        if not remembered:
            if await self._state.is_bot_thread(key):
                turns = answered_turns(thread, bot_user, s.history_message_chars, s.placeholder)
            else:
                leave_out = asked.get("ts") if asked else None
                context = discussion(
                    thread,
                    bot_user,
                    leave_out=leave_out,
                    message_chars=s.history_message_chars,
                    max_chars=s.thread_context_chars,
                )
                turns = [context] if context else []
            for turn in turns:
                await self._store.append(key, turn)
        return without_mention(str(asked.get("text", "")), bot_user) if asked else text

    # -- asking about a message (the shortcut, the reaction) -----------------------------------

    async def _on_shortcut(
        self,
        ack: Any,
        body: dict[str, Any],
        client: AsyncWebClient,
        context: dict[str, Any],
        respond: AsyncRespond,
    ) -> None:
        """ "Ask the docs about this" on a message: its text is the question, answered in its
        thread as if the person who clicked had mentioned the bot there. The shortcut is offered
        in every conversation, also where the bot is no member and Slack refuses its every
        post: there it says so before any answer is paid for, not silence after one."""
        await ack()
        team = team_of(body)
        channel = id_of(body, "channel")
        user = id_of(body, "user")
        message = body.get("message", {})
        if not (channel and user):
            log.warning("slack_event_incomplete", platform="slack", payload="message_action")
            return
        bot_user = context.get("bot_user_id")
        tell = functools.partial(self._tell_clicker, respond, client, channel, user)
        refusal = None
        if self._silenced(team, channel):
            refusal = NOT_HERE
        elif not str(message.get("text", "")).strip():
            refusal = NOTHING_TO_ASK
        if refusal is not None:
            await tell(refusal)
            return
        if not await self._state.first_delivery(f"slack-shortcut:{body.get('trigger_id', '')}"):
            return
        not_a_member = NOT_A_MEMBER.format(bot=f"<@{bot_user}>" if bot_user else "the bot")
        refused = functools.partial(tell, not_a_member)
        await self._ask_about(client, team, channel, user, message, bot_user, refused=refused)

    async def _tell_clicker(
        self, respond: AsyncRespond, client: AsyncWebClient, channel: str, user: str, text: str
    ) -> None:
        """`text` for the person who clicked a shortcut alone, through its `response_url`:
        Slack takes that in any conversation, where chat.postEphemeral needs the bot to be a
        member there (it is the way for a payload without one)."""
        try:
            if respond.response_url:
                response = await respond(text=text, response_type="ephemeral")
                if response.status_code != HTTPStatus.OK:
                    log.warning("slack_response_url_refused", status=response.status_code)
            else:
                await client.chat_postEphemeral(channel=channel, user=user, text=text)
        except Exception as exc:  # noqa: BLE001 (nobody left to tell: the log says it)
            log.warning("slack_refusal_not_delivered", error=_describe(exc))

    async def _on_reaction(
        self,
        body: dict[str, Any],
        event: dict[str, Any],
        client: AsyncWebClient,
        context: dict[str, Any],
    ) -> None:
        """The configured reaction on a message asks about it, once per message."""
        item = event.get("item")
        if (
            event.get("reaction") != self._settings.reaction_trigger
            or not isinstance(item, dict)
            or item.get("type") != "message"
        ):
            return  # another reaction, or one on a file
        if not _has_fields(item, "reaction_added item", "channel", "ts"):
            return
        team, channel, ts = body.get("team_id", ""), item["channel"], item["ts"]
        if self._silenced(team, channel) or not self._policies(f"slack/{team}/{channel}").reactions:
            return
        if not await self._state.first_delivery(f"slack-reaction:{channel}:{ts}"):
            return
        message = await self._message(client, channel, ts)
        if message is None or message.get("bot_id") or not str(message.get("text", "")).strip():
            return
        bot_user = context.get("bot_user_id")
        await self._ask_about(client, team, channel, event.get("user", ""), message, bot_user)

    async def _message(
        self, client: AsyncWebClient, channel: str, ts: str
    ) -> dict[str, Any] | None:
        """One message by its timestamp: from the channel's history, which lists only messages
        posted to the channel itself, or else from its thread (conversations.replies takes a
        reply's timestamp as well as a thread's), for a reaction on a reply."""
        try:
            found = await client.conversations_history(
                channel=channel, latest=ts, inclusive=True, limit=1
            )
            message = _with_ts(found.get("messages"), ts)
            if message is None:
                found = await client.conversations_replies(
                    channel=channel,
                    ts=ts,
                    oldest=ts,
                    latest=ts,
                    inclusive=True,
                    limit=_REPLY_LOOKUP_LIMIT,
                )
                message = _with_ts(found.get("messages"), ts)
        except SlackApiError as exc:
            log.warning("slack_message_unreadable", error=slack_error(exc))
            return None
        return message

    async def _ask_about(
        self,
        client: AsyncWebClient,
        team: str,
        channel: str,
        user: str,
        message: dict[str, Any],
        bot_user: str | None,
        *,
        refused: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        event = {
            "channel": channel,
            "user": user,
            "text": str(message.get("text", "")),
            "ts": message.get("ts"),
        }
        thread_ts = message.get("thread_ts") or message.get("ts")
        await self._answer(client, team, event, bot_user, thread_ts=thread_ts, refused=refused)


def _has_fields(payload: dict[str, Any], what: str, *names: str) -> bool:
    """Whether an event (or a part of one) has each of `names` as a non-empty string, as Slack
    always sends them. One without is ignored by its listener (not a KeyError further on), with
    a warning that names the missing fields, never the event's contents."""
    missing = [name for name in names if not (isinstance(payload.get(name), str) and payload[name])]
    if missing:
        log.warning("slack_event_incomplete", platform="slack", payload=what, missing=missing)
    return not missing


def _for_the_bot(text: str, policy: ResolvedPolicy) -> bool:
    """Whether a message in a thread, which does not mention the bot, is meant for it: not when
    it mentions a person or a user group (words to a colleague), and, with `followups:
    questions`, only when it reads as one more question or request (not thanks, "ok", 👍)."""
    if _SOMEONE.search(text):
        log.debug("not_answered", platform="slack", reason="for someone else")
        return False
    if policy.followups == "questions" and not reads_as_follow_up(text):
        log.debug("not_answered", platform="slack", reason="not a question")
        return False
    return True


def _with_ts(messages: object, ts: str) -> dict[str, Any] | None:
    """The message of `messages` (a Web API answer's list) posted at `ts`, if any."""
    listed = messages if isinstance(messages, list) else []
    return next((m for m in listed if isinstance(m, dict) and m.get("ts") == ts), None)


def _key(team: str, channel: str, thread_ts: str | None) -> str:
    return f"slack/{team}/{channel}/{thread_ts or 'direct'}"


def _describe(exc: Exception) -> str:
    return slack_error(exc) if isinstance(exc, SlackApiError) else type(exc).__name__
