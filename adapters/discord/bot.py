"""Discord: `/ask` answered in a thread created from the answer, follow-ups in that thread.

The interaction is deferred first (Discord allows 3 s); the answer then goes out as the
interaction's follow-up, and a thread is created from that message so the conversation can go
on without another `/ask`. Whatever does not fit in the first message is posted in the thread
with the bot token. The interaction token lasts 15 minutes: an answer that takes longer (a
slow local model over several rounds) goes out in the channel with the bot token instead,
mentioning the asker, and its thread opens from that message (`adapters.discord.reply`).
On SIGTERM the answers in progress get `discord.shutdown_grace_s` to finish (`shutdown`); one
still running then is cut short with an apology where its asker waits (`_apology_if_cut_short`),
so no command is left "thinking…" and no follow-up or ❓ unanswered without a word. While
draining no answer starts: a command or a follow-up is told to ask again; a ❓, an unasked
question or a forum post, which have nobody waiting on an interaction, are left unclaimed and
logged (`not_answered`), so a ❓ added again after the restart is answered.
Every send disables mentions, but for that one of the asker and those of an escalation:
nothing from a document or a model can ping anyone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import discord
import structlog
from discord import app_commands

from adapters.answer_labels import ASK_ABOUT_THIS, NOT_HERE, NOTHING_TO_ASK, TEXT_ONLY
from adapters.discord.components import (
    NO_MENTIONS,
    PERSISTENT_BUTTONS,
    EscalateButton,
    ShareButton,
    attach,
    escalation,
    feedback_view,
    key_of_channel,
    view_argument,
)
from adapters.discord.permissions import known_missing, missing_permissions, say_missing
from adapters.discord.render import answer_embeds
from adapters.discord.reply import (
    APOLOGY,
    RESTARTING,
    SHUTDOWN_APOLOGY,
    InteractionReply,
    ReplyUndeliverable,
)
from adapters.discord.threads import thread_discussion
from adapters.draining import InFlight
from core import metrics
from core.answer.engine import AnswerEngine, held_back
from core.config import DiscordSettings, ResolvedPolicy
from core.domain.conversation import Answer, AnswerStatus, ChannelKind, Question, Turn
from core.domain.questions import reads_as_follow_up
from core.ports import ConversationStore, PlatformState

log = structlog.get_logger(__name__)

NO_THREAD = "I couldn't open a thread here ({reason}), so follow-up questions need a new `/ask`."
NO_THREAD_POSTS = "I'm missing {missing} in this thread, so follow-up questions need a new `/ask`."
MISSING_HERE = (
    "I can't answer here: I'm missing {missing} in this channel. A server admin can grant "
    "it; meanwhile `/ask` answers you directly."
)
REFUSED_HERE = (
    "Discord refused my answer here. A server admin can check that I may send messages in "
    "threads and embed links in this channel."
)
ANSWERED_IN_THREAD = "I answered in a thread on that message."
ANSWERED_IN_ITS_THREAD = "I answered that message in its thread."
NO_PLACE_TO_ANSWER = "I can't open a thread on a message here; ask with `/ask` instead."
ASK_PRIVATELY = (
    "Answers in this channel are for the asker alone now: ask with `/ask`, and only you will "
    "see the answer."
)
CHANNEL_UNKNOWN = (
    "Discord couldn't tell me which channel this thread belongs to, so I can't tell which of its "
    "settings apply. Please ask again in a minute."
)
THREAD_NAME_CHARS = 100
THREAD_ARCHIVE_MINUTES: Literal[1440] = 1440  # a day without messages, as Discord's client proposes
_ANSWERED_TYPES = (discord.MessageType.default, discord.MessageType.reply)
_THREAD_EXISTS = 160004  # Discord: "A thread has already been created for this message"


class DocsBot(discord.Client):
    def __init__(
        self,
        engine: AnswerEngine,
        store: ConversationStore,
        state: PlatformState,
        settings: DiscordSettings,
        policies: Callable[[str], ResolvedPolicy],
        questions: Callable[[str], Awaitable[bool]],
        **options: Any,
    ) -> None:
        """`policies` gives each channel's policy (`Settings.policy`) by its key; `questions`
        tells whether an unasked message is a question for the docs (`QuestionGate`)."""
        intents = discord.Intents.none()
        intents.guilds = True
        intents.guild_messages = True
        intents.message_content = True  # privileged: follow-ups in threads are read as text
        intents.dm_messages = True  # questions in direct messages
        intents.guild_reactions = True  # the reaction that asks about a message
        # The bot never joins voice: discord.py's start-up warnings about voice libraries
        # (PyNaCl, davey) would only make an operator look for a problem that isn't there.
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
        super().__init__(intents=intents, allowed_mentions=NO_MENTIONS, **options)
        self.engine = engine
        self.store = store
        self.state = state
        self.settings = settings
        self.policies = policies
        self.questions = questions
        # The tasks answering someone now: what `shutdown` waits for, then cuts short.
        self._in_flight = InFlight("discord")
        self.draining = False  # shutting down: no new answer is started
        self.tree = app_commands.CommandTree(self)
        self.tree.add_command(
            app_commands.Command(
                name="ask",
                description="Ask the docs; the answer opens a thread for follow-ups.",
                callback=self._ask,
            )
        )
        self.tree.add_command(
            app_commands.ContextMenu(name=ASK_ABOUT_THIS, callback=self._ask_about)
        )
        attach(self)

    async def setup_hook(self) -> None:
        self.add_dynamic_items(*PERSISTENT_BUTTONS)

    async def shutdown(self) -> None:
        """Stop (on SIGTERM): no new answer starts (a command or a follow-up is told to ask
        again), those in progress get `discord.shutdown_grace_s` to finish, the rest are
        cancelled and apologise where their asker waits (within `discord.apology_deadline_s`);
        then the connection closes, which ends `start`. Closing at once would cut every answer
        off with the connection: the asker's "thinking…" would never change (`InFlight`)."""
        self.draining = True
        await self._in_flight.drain(
            self.settings.shutdown_grace_s, self.settings.apology_deadline_s
        )
        await self.close()

    def not_ready(self) -> str | None:
        """Why this process can't answer now, as far as Discord goes (None: it can), for the
        readiness probe (`bot discord` serves /readyz on `metrics.port`)."""
        if self.draining:
            return "shutting down"
        if self.is_closed() or not self.is_ready():
            return "not connected to Discord"
        return None

    def _answering(self) -> contextlib.AbstractContextManager[None]:
        """The current task known to `shutdown` while it answers someone."""
        return self._in_flight.tracking()

    async def _restarting(self, interaction: discord.Interaction[Any]) -> bool:
        """While shutting down, a new command is told at once to ask again: an answer begun
        now would only be cut short."""
        if not self.draining:
            return False
        await interaction.response.send_message(RESTARTING, ephemeral=True)
        return True

    def _draining_now(self, what: str) -> bool:
        """While shutting down, `what` (a ❓, an unasked question, a forum post) starts no
        answer: one begun now would only be cut short. Nobody waits on an interaction to be
        told to ask again, so it is logged instead; this is checked before the event is
        claimed (`first_delivery`), so a ❓ added again once the bot is back is answered."""
        if self.draining:
            log.info("not_answered", platform="discord", reason=f"{what} while restarting")
        return self.draining

    async def sync_commands(self, token: str, guild: int | None) -> str:
        """Register /ask with Discord (on deploy, not at every start: Discord rate-limits it).
        One server is instant, for testing; globally may take up to an hour. Says what it did."""
        await self.login(token)
        target = discord.Object(id=guild) if guild else None
        if target is not None:
            self.tree.copy_global_to(guild=target)
        commands = await self.tree.sync(guild=target)
        where = f"in server {guild}" if target else "globally (may take up to an hour)"
        return f"Registered {len(commands)} command(s) {where}."

    # -- /ask --------------------------------------------------------------------------------

    @app_commands.describe(question="What you want to know")
    async def _ask(self, interaction: discord.Interaction[Any], question: str) -> None:
        if await self._restarting(interaction):
            return
        with self._answering(), _first_response_refused():
            await self._answer_ask(interaction, question)

    async def _answer_ask(self, interaction: discord.Interaction[Any], question: str) -> None:
        asked = _conversation_of(interaction)
        policy = self.policies(asked.channel_key)
        reply = InteractionReply(
            interaction, self.settings.interaction_reply_s, private=policy.private
        )
        # A direct message is always answered, whatever its `trigger`, as a DM's message is.
        if policy.trigger == "off" and interaction.guild_id:
            await interaction.response.send_message(NOT_HERE, ephemeral=True)
            return
        if policy.private:
            await self._ask_privately(interaction, question, reply)
            return
        await interaction.response.defer(thinking=True)
        metrics.EVENT_ACKS.labels("discord", "interaction", "deferred").inc()
        try:
            async with _apology_if_cut_short(reply.apologise):
                await self._reply_to_ask(interaction, asked, question, reply, policy)
        except discord.Forbidden as exc:  # a thread's post the permissions could not foresee
            log.warning("answer_refused", platform="discord", path="ask", code=exc.code)
            await reply.apologise(REFUSED_HERE)
        except Exception:
            log.exception("ask_failed", platform="discord")
            await reply.apologise()

    async def _reply_to_ask(
        self,
        interaction: discord.Interaction[Any],
        asked: _Conversation,
        question: str,
        reply: InteractionReply,
        policy: ResolvedPolicy,
    ) -> None:
        """A public `/ask`, deferred: its answer through `reply`, the thread opened from it
        (the rest of a long answer goes there), and a person called in when so configured."""
        escalate = bool(policy.escalate_to)
        key, answer, answer_id = await self._answer_command(interaction, question, asked)
        embeds = self.embeds_of(answer)
        first_view = (
            feedback_view(answer_id, escalate=escalate) if answer_id and len(embeds) == 1 else None
        )
        first = await reply.send(embed=embeds[0], view=view_argument(first_view))
        thread, note = await self._open_thread(
            interaction, asked, question, answer, answer_id, first
        )
        rest = embeds[1:]
        target: discord.abc.Messageable = thread or reply  # type: ignore[assignment]
        for n, embed in enumerate(rest, start=1):
            view = (
                feedback_view(answer_id, escalate=escalate)
                if answer_id and n == len(rest)
                else None
            )
            await target.send(embed=embed, allowed_mentions=NO_MENTIONS, view=view_argument(view))
        if note:
            await reply.send(note)
        if escalate and answer.status is AnswerStatus.NOT_FOUND:
            # Asked, and the docs don't have it: a person is called in without a click.
            await self._escalate(target, policy.escalate_to, answer_id or key)

    async def _answer_command(
        self, interaction: discord.Interaction[Any], question: str, asked: _Conversation
    ) -> tuple[str, Answer, str | None]:
        """A command's conversation key, its answer, and the id it was recorded under. In a
        thread whose turns our store lost (or never had), they are read from Discord first,
        as for a follow-up there."""
        thread = interaction.channel if asked.kind is ChannelKind.THREAD else None
        async with self.engine.in_turn(asked.key):  # a history read back is filled once
            if isinstance(thread, discord.Thread) and not await self.store.recent(asked.key, 1):
                await self._seed_history(thread, asked.key)
            answer = await self.engine.answer(
                Question(
                    "discord",
                    asked.key,
                    str(interaction.user.id),
                    question,
                    asked.kind,
                    # Always named: a thread's key, and a private answer's key in a thread,
                    # start with the thread, whose id no channel's settings name.
                    channel_key=asked.channel_key,
                )
            )
        recorded = await self._record(asked.key, question, answer, channel=asked.channel_key)
        return asked.key, answer, recorded

    def embeds_of(self, answer: Answer) -> list[discord.Embed]:
        return answer_embeds(
            answer,
            description_chars=self.settings.description_chars,
            max_sources=self.settings.max_sources,
        )

    async def _ask_privately(
        self, interaction: discord.Interaction[Any], question: str, reply: InteractionReply
    ) -> None:
        """A `private` channel: the answer only the asker sees (ephemeral), with a button to
        share it; no thread, since one can't open from an ephemeral message."""
        await interaction.response.defer(thinking=True, ephemeral=True)
        metrics.EVENT_ACKS.labels("discord", "interaction", "deferred").inc()
        try:
            async with _apology_if_cut_short(reply.apologise):
                private = _conversation_of(interaction, private=True)
                _, answer, answer_id = await self._answer_command(interaction, question, private)
                embeds = self.embeds_of(answer)
                # Calling a person in posts for everyone: only at the asker's click.
                escalate = bool(self.policies(private.channel_key).escalate_to)
                for n, embed in enumerate(embeds, start=1):
                    view = discord.ui.View(timeout=None)
                    if answer_id and n == len(embeds):
                        view.add_item(ShareButton(answer_id))
                        if escalate:
                            view.add_item(EscalateButton(answer_id))
                    await reply.send(embed=embed, view=view)
        except ReplyUndeliverable:
            # Past its token a private answer has no way to the asker, nor has an apology.
            log.warning("private_answer_undelivered", platform="discord")
        except Exception:
            log.exception("private_ask_failed", platform="discord")
            await reply.apologise()

    async def _open_thread(
        self,
        interaction: discord.Interaction[Any],
        asked: _Conversation,
        question: str,
        answer: Answer,
        answer_id: str | None,
        answer_message: discord.Message,
    ) -> tuple[discord.Thread | None, str]:
        """The thread the conversation goes on in, and, when there is none, a note saying why
        for the asker ("" when nothing needs saying: a direct message is a conversation
        already). None where the bot may not post answers in it (`app_permissions`): the rest
        of the answer then comes through the interaction, which needs none. A new thread opens
        from `answer_message`, the answer's first message: the deferred response itself when it
        went through the interaction (after a deferral, the first follow-up is the original
        response), or the bot's own message in the channel."""
        channel = interaction.channel
        if asked.kind is ChannelKind.DIRECT:
            return None, ""
        if isinstance(channel, discord.abc.GuildChannel | discord.Thread):
            missing = missing_permissions(interaction.app_permissions, channel)
            if missing:
                log.info("no_thread", platform="discord", missing=missing)
                named = say_missing(missing)
                if isinstance(channel, discord.Thread):
                    return None, NO_THREAD_POSTS.format(missing=named)
                return None, NO_THREAD.format(reason=f"I'm missing {named}")
        if asked.kind is ChannelKind.THREAD and isinstance(channel, discord.Thread):
            # Asked inside a thread (ours, anyone's, a forum post): the conversation goes on
            # there, and its follow-ups are answered like those in a thread the bot opened.
            try:
                await self.state.remember_thread(asked.key)
            except Exception:
                log.exception("thread_not_recorded", platform="discord")
            return channel, ""
        if not isinstance(channel, discord.TextChannel):
            return None, "not a server text channel"
        try:
            # Only the message's id is used: a follow-up's lack of a guild doesn't matter.
            thread = await channel.create_thread(
                name=question[:THREAD_NAME_CHARS] or "Question", message=answer_message
            )
        except discord.Forbidden:
            return None, NO_THREAD.format(reason="no permission to create threads")
        except discord.HTTPException as exc:
            return None, NO_THREAD.format(reason=f"Discord said: {exc.text or exc.status}")
        thread_key = _thread_key(thread.id)
        try:
            await self.state.remember_thread(thread_key)
            if answer.status is not AnswerStatus.ERROR:
                await self.store.append(thread_key, Turn(question, answer.text))
            if answer_id:  # an update to the answer (its sources changed) goes in the thread
                await self.state.move_answer(answer_id, thread_key)
        except Exception:
            # The answer and its thread are out; only follow-ups there will need /ask.
            log.exception("thread_not_recorded", platform="discord")
        return thread, ""

    # -- follow-ups --------------------------------------------------------------------------

    async def on_message(self, message: discord.Message) -> None:
        if message.author.bot or (self.user and message.author.id == self.user.id):
            return
        if message.type not in _ANSWERED_TYPES:
            return  # renames, joins, pins
        if not message.content.strip():
            # A file or a sticker alone: left alone in a channel or a thread, where a reply
            # would be noise, but said in a direct message, whose sender waits for an answer.
            # (A DM's text is read without the Message Content intent: empty is empty.)
            if isinstance(message.channel, discord.DMChannel) and await self.state.first_delivery(
                f"discord-message:{message.id}"
            ):
                await _say(message.channel, TEXT_ONLY)
            return
        with self._answering():
            await self._on_question_message(message)

    async def _on_question_message(self, message: discord.Message) -> None:
        guild = getattr(message.channel, "guild_id", None) or (
            message.guild.id if message.guild else None
        )
        if guild is None:
            await self._answer_in_place(message, key_of_channel(None, message.channel.id), "")
            return
        key = _thread_key(message.channel.id)
        try:
            if await self.state.is_bot_thread(key):
                await self._on_follow_up(message, key)
                return
            if message.id == message.channel.id:  # a thread's first message: a forum post?
                await self._answer_forum_post(message, guild)
                return
            policy = self.policies(key_of_channel(guild, message.channel.id))
            mentioned = bool(self.user and self.user in message.mentions)
            if policy.trigger == "auto" and not _cannot_be_private(policy, "unasked question"):
                # Mentioning the bot there asks it: answered as /ask would be, not held back.
                await self._answer_unasked(message, guild, policy, asked=mentioned)
        except discord.Forbidden as exc:
            log.warning("answer_refused", platform="discord", path="message", code=exc.code)
        except Exception:
            log.exception("message_not_handled", platform="discord")

    async def _on_follow_up(self, message: discord.Message, key: str) -> None:
        """A message in one of the bot's threads, under the settings of the channel it hangs
        off. A follow-up needs no mention, but words to a colleague (they mention someone
        else) and, with `followups: questions`, thanks or 👍 are not for the bot. A mention is
        one written in the message: a reply to the bot's answer pings it too, by default, and
        a "thanks!" sent that way is still only thanks."""
        mentioned = bool(self.user and _written_mention(message.content, self.user.id))
        others = [u for u in message.mentions if u != self.user] or message.role_mentions
        channel_key = await self._channel_key(message)
        if not channel_key:
            # Never answered under settings other than its channel's (its sources, private):
            # one that asks the bot is told to ask again.
            log.warning("follow_up_channel_unknown", platform="discord")
            if (mentioned or reads_as_follow_up(message.content)) and not others:
                await self._tell_once(message, CHANNEL_UNKNOWN)
            return
        policy = self.policies(channel_key)
        asks = policy.followups == "all" or reads_as_follow_up(message.content)
        if policy.trigger == "off" or not (mentioned or (asks and not others)):
            return
        if policy.private:
            # Made private since the thread opened: only a command's reply reaches one person.
            await self._tell_once(message, ASK_PRIVATELY)
            return
        await self._answer_in_place(message, key, channel_key)

    async def _tell_once(self, message: discord.Message, text: str) -> None:
        """`text` in the message's channel, by one process only (each gets the message)."""
        if await self.state.first_delivery(f"discord-message:{message.id}"):
            await _say(message.channel, text)

    async def _answer_unasked(
        self, message: discord.Message, guild: int, policy: ResolvedPolicy, *, asked: bool
    ) -> None:
        """A message nobody asked the bot about, in an `auto` channel: answered in a thread
        opened from it when it reads as a question (`questions_only`) and, with
        `answer_only_when_grounded`, only when the answer stands on verified citations;
        otherwise nothing is posted and the abstention is logged. One that mentions the bot
        (`asked`) is answered whatever it reads as, as a forum post that mentions it is."""
        if not asked and policy.questions_only and not await self.questions(message.content):
            return
        place = await self._answer_place(message.channel.id)
        if not isinstance(place, discord.TextChannel):
            return  # someone else's thread, a voice chat...: not where a thread can open
        if _cannot_post(place, "unasked question") or self._draining_now("unasked question"):
            return
        if not await self.state.first_delivery(f"discord-message:{message.id}"):
            return
        await self._answer_about(
            message, place, guild, policy, str(message.author.id), unasked=not asked
        )

    async def _answer_forum_post(self, message: discord.Message, guild: int) -> None:
        """A new post in a forum whose policy is `auto`: answered in the post's own thread
        (its title and text are the question), with "It's solved" under the answer. Every post
        asks something, so the question detector is not consulted; the relevance floor and
        `answer_only_when_grounded` still hold, unless the post mentions the bot."""
        post: dict[str, Any] = dict(await self.http.get_channel(message.channel.id))
        parent = post.get("parent_id")
        if not parent:
            return
        forum: dict[str, Any] = dict(await self.http.get_channel(int(parent)))
        if forum.get("type") != discord.ChannelType.forum.value:
            return
        channel_key = key_of_channel(guild, int(parent))
        policy = self.policies(channel_key)
        if policy.trigger != "auto" or _cannot_be_private(policy, "forum post"):
            return
        if _cannot_post(message.channel, "forum post") or self._draining_now("forum post"):
            return
        if not await self.state.first_delivery(f"discord-message:{message.id}"):
            return
        key = _thread_key(message.channel.id)
        text = "\n".join(part for part in (post.get("name", ""), message.content) if part)
        asked = bool(self.user and self.user in message.mentions)  # then answered, always
        answer = await self.engine.answer(
            Question(
                "discord",
                key,
                str(message.author.id),
                text,
                ChannelKind.THREAD,
                channel_key=channel_key,
                unasked=not asked,
            )
        )
        if not asked and held_back(answer, policy):
            log.info("abstained", platform="discord", status=answer.status.value)
            metrics.HELD_BACK.labels("discord").inc()
            await self._record(key, text, answer, posted=False, channel=channel_key)
            return
        answer_id = await self._record(key, text, answer, channel=channel_key)
        await self._send_answer(
            message.channel,
            answer_id,
            answer,
            escalate=bool(policy.escalate_to),
            solved=message.channel.id,
        )
        # Only once the answer is there: a post that refused it is no conversation of the bot's,
        # and its every later message would be answered and refused again.
        await self.state.remember_thread(key)

    async def _answer_about(
        self,
        message: discord.Message,
        place: discord.TextChannel | discord.Thread,
        guild: int,
        policy: ResolvedPolicy,
        asker: str,
        *,
        unasked: bool,
    ) -> bool:
        """`message`'s text answered (an `unasked` question, or a message someone asked about
        with the context menu or a reaction) in `place` (`_answer_place`): in a thread opened
        from it, or, for a message inside a thread, in that thread, as a reply to it, carrying
        on the thread's conversation. False when nothing was posted (an unasked answer not
        grounded enough to post)."""
        in_thread = isinstance(place, discord.Thread)
        if isinstance(place, discord.Thread):
            channel_key, key = key_of_channel(guild, place.parent_id), _thread_key(place.id)
        else:
            channel_key = key_of_channel(guild, place.id)
            key = f"{channel_key}/{message.id}"
        async with self.engine.in_turn(key):  # a history read back is filled once
            if isinstance(place, discord.Thread) and not await self.store.recent(key, 1):
                await self._read_thread(place, key, message)
            answer = await self.engine.answer(
                Question(
                    "discord",
                    key,
                    asker,
                    message.content,
                    ChannelKind.THREAD if in_thread else ChannelKind.CHANNEL,
                    channel_key=channel_key if in_thread else "",
                    unasked=unasked,
                )
            )
        if unasked and held_back(answer, policy):
            log.info("abstained", platform="discord", status=answer.status.value)
            metrics.HELD_BACK.labels("discord").inc()
            await self._record(key, message.content, answer, posted=False, channel=channel_key)
            return False
        thread: discord.abc.Messageable = place
        thread_key = key
        if not in_thread:
            opened = await self._thread_from(message)
            thread = self.get_partial_messageable(opened, guild_id=guild)
            thread_key = _thread_key(opened)
            await self.store.append(thread_key, Turn(message.content, answer.text))
        answer_id = await self._record(thread_key, message.content, answer, channel=channel_key)
        await self._send_answer(
            thread,
            answer_id,
            answer,
            escalate=bool(policy.escalate_to),
            reply_to=message if in_thread else None,
        )
        await self.state.remember_thread(thread_key)  # once answered: see _answer_forum_post
        if policy.escalate_to and answer.status is AnswerStatus.NOT_FOUND and not unasked:
            await self._escalate(thread, policy.escalate_to, answer_id or key)
        return True

    # -- asking about a message: the context menu and the reaction -----------------------------

    async def _ask_about(
        self, interaction: discord.Interaction[Any], message: discord.Message
    ) -> None:
        """ "Ask the docs about this" on a message: its text is the question, answered in a
        thread opened from it; the person who asked is told where, privately. In a `private`
        channel the answer itself is for them alone, with "Share with the channel"."""
        if await self._restarting(interaction):
            return
        with self._answering(), _first_response_refused():
            await self._answer_menu(interaction, message)

    async def _answer_menu(
        self, interaction: discord.Interaction[Any], message: discord.Message
    ) -> None:
        guild = interaction.guild_id or 0
        policy = self.policies(_conversation_of(interaction).channel_key)
        if policy.trigger == "off" or not message.content.strip():
            reason = NOT_HERE if policy.trigger == "off" else NOTHING_TO_ASK
            await interaction.response.send_message(reason, ephemeral=True)
            return
        reply = InteractionReply(interaction, self.settings.interaction_reply_s, private=True)
        if policy.private:  # the answer for the person who asked, as a private `/ask`'s
            await self._ask_privately(interaction, message.content, reply)
            return
        await interaction.response.defer(thinking=True, ephemeral=True)
        metrics.EVENT_ACKS.labels("discord", "interaction", "deferred").inc()
        try:
            async with _apology_if_cut_short(reply.apologise):
                # Where it can be answered is known before the model is paid to answer it.
                place = await self._answer_place(message.channel.id, interaction.channel)
                if place is None:
                    await reply.send(NO_PLACE_TO_ANSWER)
                    return
                in_thread = isinstance(place, discord.Thread)
                # A thread someone opened from the message already takes the answer (a locked
                # one, only from a bot that may manage threads).
                where = place if in_thread else (message.thread or place)
                missing = missing_permissions(interaction.app_permissions, where, reply=in_thread)
                if missing:
                    log.info("not_answered", platform="discord", reason="missing permissions")
                    await reply.send(MISSING_HERE.format(missing=say_missing(missing)))
                    return
                await self._answer_about(
                    message, place, guild, policy, str(interaction.user.id), unasked=False
                )
                await reply.send(ANSWERED_IN_ITS_THREAD if in_thread else ANSWERED_IN_THREAD)
        except ReplyUndeliverable:  # the answer is out; only the private pointer to it is not
            log.warning("pointer_undelivered", platform="discord")
        except discord.Forbidden as exc:  # one the permissions could not foresee
            log.warning("answer_refused", platform="discord", path="menu", code=exc.code)
            await reply.apologise(REFUSED_HERE)
        except Exception:
            log.exception("ask_about_failed", platform="discord")
            await reply.apologise()

    async def on_raw_reaction_add(self, payload: discord.RawReactionActionEvent) -> None:
        """The configured emoji on a message asks about it, once per message."""
        if str(payload.emoji) != self.settings.reaction_trigger or payload.guild_id is None:
            return
        if self.user and payload.user_id == self.user.id:
            return
        with self._answering():
            await self._answer_reaction(payload, payload.guild_id)

    async def _answer_reaction(self, payload: discord.RawReactionActionEvent, guild: int) -> None:
        try:
            place = await self._answer_place(payload.channel_id)
            if place is None:
                log.info("not_answered", platform="discord", reason="reaction: no thread here")
                return
            # In a thread the policy is its channel's: a thread's own id names no policy, so
            # `reactions: false` or `trigger: off` would not hold in the channel's threads.
            policy = self.policies(key_of_channel(guild, _policy_channel(place)))
            if policy.trigger == "off" or not policy.reactions:
                return
            if _cannot_be_private(policy, "reaction") or self._draining_now("reaction"):
                return
            if _cannot_post(place, "reaction", reply=isinstance(place, discord.Thread)):
                return
            if not await self.state.first_delivery(f"discord-reaction:{payload.message_id}"):
                return
            channel = self.get_partial_messageable(payload.channel_id, guild_id=guild)
            message = await channel.fetch_message(payload.message_id)
            if not message.content.strip() or message.author.bot:
                return
            apologise = functools.partial(self._apologise_about, message, place, guild)
            async with _apology_if_cut_short(apologise):
                await self._answer_about(
                    message, place, guild, policy, str(payload.user_id), unasked=False
                )
        except discord.Forbidden as exc:
            log.warning("answer_refused", platform="discord", path="reaction", code=exc.code)
        except Exception:
            log.exception("reaction_not_answered", platform="discord")

    async def _apologise_about(
        self,
        message: discord.Message,
        place: discord.TextChannel | discord.Thread,
        guild: int,
        text: str,
    ) -> None:
        """`text` where the answer about `message` (asked with a ❓: no interaction to reply
        through) was going: in its thread as a reply to it, or in the thread opened from it.
        That thread may not exist yet (it opens once the answer is written), so it is opened
        now. The thread is the bot's, so asking again there is answered."""
        try:
            if isinstance(place, discord.Thread):
                await place.send(text, reference=message, allowed_mentions=NO_MENTIONS)
                return
            thread_id = await self._thread_from(message)
            thread = self.get_partial_messageable(thread_id, guild_id=guild)
            await thread.send(text, allowed_mentions=NO_MENTIONS)
            await self.state.remember_thread(_thread_key(thread_id))
        except Exception:
            log.warning("apology_not_sent", platform="discord", exc_info=True)

    async def _thread_from(self, message: discord.Message) -> int:
        """The id of the public thread hanging off `message`: opened now, named after it, or
        the one someone opened already (a person while the answer was being written, another
        ❓ or menu on the same message), which Discord numbers with the message's own id."""
        try:
            data = await self.http.start_thread_with_message(
                message.channel.id,
                message.id,
                name=message.content[:THREAD_NAME_CHARS] or "Question",
                auto_archive_duration=THREAD_ARCHIVE_MINUTES,
                rate_limit_per_user=None,
            )
        except discord.HTTPException as exc:
            if exc.code != _THREAD_EXISTS:
                raise
            return message.id
        return int(data["id"])

    async def _answer_place(
        self, channel_id: int, seen: object = None
    ) -> discord.TextChannel | discord.Thread | None:
        """Where a message of this channel can be answered: a server text channel (in a
        thread opened from the message), a thread (in it: Discord refuses a thread from a
        message in a thread, 400 with code 50024), or nowhere (None: a voice channel's chat,
        a DM, a channel Discord doesn't show the bot). `seen` is the channel as the event
        described it (an interaction's), taken when it is this one; else the cached channel,
        else Discord's."""
        same = getattr(seen, "id", None) == channel_id
        channel = seen if same else self.get_channel(channel_id)
        if channel is None:
            try:
                channel = await self.fetch_channel(channel_id)
            except discord.HTTPException:
                return None
        return channel if isinstance(channel, discord.TextChannel | discord.Thread) else None

    async def _answer_in_place(self, message: discord.Message, key: str, channel_key: str) -> None:
        """A follow-up in one of the bot's threads, or a direct message: answered where it
        was written, with that conversation's memory."""
        say = functools.partial(_say, message.channel)
        try:
            async with _apology_if_cut_short(say):
                # Claimed first: every connected process gets the message, and during a
                # rolling deploy the new one answers while the old one would say "restarting".
                if not await self.state.first_delivery(f"discord-message:{message.id}"):
                    return
                if self.draining:
                    await say(RESTARTING)
                    return
                missing = known_missing(message.channel)
                if missing:
                    log.info("not_answered", platform="discord", reason="missing permissions")
                    await say(MISSING_HERE.format(missing=say_missing(missing)))
                    return
                kind = (
                    ChannelKind.THREAD if channel_key or "/thread/" in key else ChannelKind.DIRECT
                )
                async with self.engine.in_turn(key), message.channel.typing():
                    if not await self.store.recent(key, 1):  # a history read back: filled once
                        await self._seed_history(message.channel, key, before=message)
                    answer = await self.engine.answer(
                        Question(
                            "discord",
                            key,
                            str(message.author.id),
                            message.content,
                            kind,
                            channel_key=channel_key,
                        )
                    )
                escalate = bool(channel_key and self.policies(channel_key).escalate_to)
                await self._send_answer(
                    message.channel,
                    await self._record(key, message.content, answer, channel=channel_key),
                    answer,
                    escalate=escalate,
                )
        except discord.Forbidden as exc:
            # Not "try again": asking again is refused again until the permissions change.
            log.warning("answer_refused", platform="discord", path="follow-up", code=exc.code)
            await say(REFUSED_HERE)
        except Exception:
            log.exception("follow_up_failed", platform="discord")
            await say(APOLOGY)

    async def _escalate(
        self, channel: discord.abc.Messageable, targets: tuple[str, ...], answer_id: str
    ) -> None:
        if await self.state.first_delivery(f"discord-escalation:{answer_id}"):
            content, allowed = escalation(targets)
            await channel.send(content, allowed_mentions=allowed)

    async def _send_answer(
        self,
        channel: discord.abc.Messageable,
        answer_id: str | None,
        answer: Answer,
        *,
        escalate: bool = False,
        solved: int | None = None,
        reply_to: discord.Message | None = None,
    ) -> None:
        """The answer in `channel`, its first message a reply to `reply_to` when given (a
        message asked about inside a thread: the reply shows which one), pinging nobody."""
        embeds = self.embeds_of(answer)
        for n, embed in enumerate(embeds, start=1):
            last = answer_id and n == len(embeds)
            view = (
                feedback_view(answer_id, escalate=escalate, solved=solved)
                if last and answer_id
                else None
            )
            # discord.py's signature takes no None for `reference`: it is passed or left out.
            reply: dict[str, Any] = {"reference": reply_to} if reply_to and n == 1 else {}
            await channel.send(
                embed=embed, allowed_mentions=NO_MENTIONS, view=view_argument(view), **reply
            )

    async def _channel_key(self, message: discord.Message) -> str:
        """The channel a thread hangs off, keyed like an `/ask` there (guild/channel), so a
        follow-up obeys that channel's settings. An uncached thread (after a restart) is
        fetched once; empty when Discord can't say."""
        channel: object = message.channel
        if getattr(channel, "parent_id", None) is None:
            with contextlib.suppress(discord.HTTPException):
                channel = await self.fetch_channel(message.channel.id)
        parent = getattr(channel, "parent_id", None)
        guild = getattr(channel, "guild", None) or message.guild
        return key_of_channel(guild.id, parent) if parent and guild else ""

    async def _read_thread(self, thread: discord.Thread, key: str, asked: discord.Message) -> None:
        """A thread whose turns our store does not hold, read back before `asked`: the bot's
        own thread as its earlier turns, anyone else's as the discussion so far (one turn),
        so "is this expected?" is answered knowing what "this" is."""
        if await self.state.is_bot_thread(key):
            await self._seed_history(thread, key, before=asked)
            return
        bot_id = self.user.id if self.user else None
        turn = await thread_discussion(thread, asked, bot_id, self.settings)
        if turn is not None:
            await self.store.append(key, turn)

    async def _seed_history(
        self,
        channel: discord.abc.Messageable,
        key: str,
        *,
        before: discord.Message | None = None,
    ) -> None:
        """The thread's latest turns from Discord when our store lost them (those `before` the
        message being answered): fetched newest first (the latest `history_messages`),
        replayed oldest first; a bot answer split over several messages is joined back into
        one. Discord refusing the read (a thread the bot can't view) means no history, as
        for a thread whose history is gone: the question is still answered."""
        try:
            recent = [
                m
                async for m in channel.history(limit=self.settings.history_messages, before=before)
            ]
        except discord.HTTPException as exc:
            log.info("history_unreadable", platform="discord", code=exc.code)
            return
        question: str | None = None
        answer_parts: list[str] = []
        for earlier in reversed(recent):
            if self.user and earlier.author.id == self.user.id:
                text = earlier.embeds[0].description if earlier.embeds else earlier.content
                if text:
                    answer_parts.append(text)
            elif not earlier.author.bot:
                if question and answer_parts:
                    await self.store.append(key, Turn(question, "\n\n".join(answer_parts)))
                question, answer_parts = earlier.content, []
        if question and answer_parts:
            await self.store.append(key, Turn(question, "\n\n".join(answer_parts)))

    async def _record(
        self,
        key: str,
        question: str,
        answer: Answer,
        *,
        posted: bool = True,
        channel: str | None = None,
    ) -> str | None:
        """Every answer goes in the answer log (with its channel: a thread's key names only
        the thread); the id comes back only for one that gets feedback buttons (not an
        error)."""
        try:
            answer_id = await self.state.record_answer(
                key, question, answer, posted=posted, channel=channel or None
            )
        except Exception:
            log.warning("answer_not_recorded", platform="discord", exc_info=True)
            return None
        return None if answer.status is AnswerStatus.ERROR else answer_id


@dataclass(frozen=True, slots=True)
class _Conversation:
    """The conversation a command's question belongs to: its key and kind, and the key of the
    channel whose policy holds there (for a thread, the channel it hangs off)."""

    key: str
    kind: ChannelKind
    channel_key: str


@contextlib.asynccontextmanager
async def _apology_if_cut_short(apologise: Callable[[str], Awaitable[None]]) -> AsyncIterator[None]:
    """An answer cancelled by `DocsBot.shutdown` (its grace over) says so where its asker
    waits, with `apologise` (the interaction's reply, the thread), then ends cancelled: without
    it the asker would watch "thinking…" for ever, or a question with no reply. One place for
    every path that someone asked on (`/ask`, the menu, a follow-up, a ❓); an unasked answer
    (an `auto` channel, a forum post) shows nothing while it is written and ends in silence.
    The apology is sent while the task is being cancelled, so a failure of it is only logged:
    the cancellation must go on."""
    try:
        yield
    except asyncio.CancelledError:
        log.warning("answer_cut_short", platform="discord")
        try:
            await apologise(SHUTDOWN_APOLOGY)
        except Exception:
            log.warning("apology_not_sent", platform="discord", exc_info=True)
        raise


@contextlib.contextmanager
def _first_response_refused() -> Iterator[None]:
    """A command's first response (a deferral, a refusal) refused by Discord, as in a locked
    and archived thread (400, code 50083): nobody can be told, and it is logged as such, not
    as a crash of the command with its traceback. Everything after that first response
    catches its own failures and apologises through the interaction."""
    try:
        yield
    except discord.HTTPException as exc:
        log.warning("interaction_refused", platform="discord", status=exc.status, code=exc.code)


def _cannot_post(place: object, what: str, *, reply: bool = False) -> bool:
    """Whether the bot lacks, by the gateway's cache, a permission the answer to `what` needs
    in `place` (`known_missing`): then no model is paid for an answer Discord would refuse.
    Nobody waits on an interaction to be told, so it is logged, with the permissions' names
    for the server's admin."""
    missing = known_missing(place, reply=reply)
    if missing:
        log.info("not_answered", platform="discord", reason=f"{what}: missing {missing}")
    return bool(missing)


async def _say(channel: discord.abc.Messageable, text: str) -> None:
    """`text` in `channel`, pinging nobody; a refusal is dropped: this is what a follow-up is
    told (ask again, an apology) when there is nothing better to do."""
    with contextlib.suppress(discord.HTTPException):
        await channel.send(text, allowed_mentions=NO_MENTIONS)


def _written_mention(content: str, user_id: int) -> bool:
    """Whether `content` itself mentions the user (`<@id>`, or `<@!id>` as older clients write
    it), rather than a reply's ping putting them in the message's mentions."""
    return f"<@{user_id}>" in content or f"<@!{user_id}>" in content


def _conversation_of(
    interaction: discord.Interaction[Any], *, private: bool = False
) -> _Conversation:
    """Inside a thread, the thread's conversation (its earlier turns are the context, and the
    answer joins them); in a direct message, the DM's, as its messages are; in a channel, a
    new one for this command, which the thread opened from its answer takes over. A private
    answer is always a conversation of its own: a thread's later askers must not get it as
    their context."""
    channel = interaction.channel
    here = key_of_channel(interaction.guild_id, interaction.channel_id)
    if isinstance(channel, discord.Thread):
        parent = key_of_channel(interaction.guild_id, channel.parent_id)
        if not private:
            return _Conversation(_thread_key(channel.id), ChannelKind.THREAD, parent)
        return _Conversation(f"{here}/{interaction.id}", ChannelKind.CHANNEL, parent)
    if interaction.guild_id is None and not private:
        return _Conversation(here, ChannelKind.DIRECT, here)
    return _Conversation(f"{here}/{interaction.id}", ChannelKind.CHANNEL, here)


def _policy_channel(place: discord.TextChannel | discord.Thread) -> int:
    """The channel whose policy holds in `place`: a thread's parent, else the channel."""
    if isinstance(place, discord.Thread) and place.parent_id:
        return place.parent_id
    return place.id


def _cannot_be_private(policy: ResolvedPolicy, what: str) -> bool:
    """A `private` channel's answers are for the asker alone, and Discord shows a message to
    one person only as a reply to their command: what comes without one (a message nobody
    asked the bot about, a forum post, a reaction) is left unanswered there, and logged."""
    if policy.private:
        log.info("not_answered", platform="discord", reason=f"{what} in a private channel")
    return policy.private


def _thread_key(thread_id: int) -> str:
    """Thread ids are unique across Discord, and a message in a thread whose guild is not
    cached yet (right after a restart) still carries the thread's id."""
    return f"discord/thread/{thread_id}"
