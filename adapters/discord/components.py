"""The buttons and the form under a Discord answer: 👍/👎 (a 👎 opens "what was wrong?"),
"Still need help?", "Share with the channel" and "It's solved".

Each button is persistent: its custom id carries what it acts on (the vote and answer id, or
the forum post), so discord.py rebuilds it from the id and a click still works after a
restart. The running `DocsBot` is attached once at start (`attach`); until then a click finds
nothing known and says so.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

import discord
import structlog

from adapters.answer_labels import (
    ALREADY_SHARED,
    ESCALATION,
    MARKED_SOLVED,
    NO_LONGER_KNOWN,
    NO_SOLVED_TAG,
    NOT_MARKED_SOLVED,
    ONLY_ASKER,
    SHARE,
    SOLVED,
    STILL_NEED_HELP,
)
from core.domain.feedback import FEEDBACK_REASONS, MAX_FEEDBACK_NOTE_CHARS
from core.ports import PlatformState

if TYPE_CHECKING:
    from adapters.discord.bot import DocsBot

log = structlog.get_logger(__name__)

NO_MENTIONS = discord.AllowedMentions.none()
FEEDBACK_NOT_SAVED = "Sorry, your feedback could not be saved. Please try again later."
NO_ONE_TO_CALL = "Nobody is set up to help in this channel yet; ask the bot's owners."
ALREADY_CALLED = "Help has already been called for this answer."
MAX_FORUM_TAGS = 5  # Discord's limit of tags on one forum post


def key_of_channel(guild: int | None, channel: int | None) -> str:
    """A channel's key, as policies name it: `discord/GUILD/CHANNEL`, or `discord/dm/CHANNEL`
    for a direct message (whose interactions and events carry no guild)."""
    return f"discord/{guild or 'dm'}/{channel}"


def is_direct_key(conversation_key: str) -> bool:
    """Whether a conversation key is a direct message's, as `key_of_channel` writes one."""
    return conversation_key.startswith("discord/dm/")


class _KeyedButton:
    """Mixed into a persistent button (a `DynamicItem` whose template names one `key`): built
    from its custom id, so a click works after a restart. Subclasses say the prefix, label
    and style; `bot` is set once at start."""

    PREFIX: ClassVar[str]
    LABEL: ClassVar[str]
    STYLE: ClassVar[discord.ButtonStyle] = discord.ButtonStyle.secondary
    bot: ClassVar[DocsBot | None] = None

    def __init__(self, key: str) -> None:
        button = discord.ui.Button[Any](
            style=self.STYLE, label=self.label_for(key), custom_id=f"{self.PREFIX}:{key}"
        )
        super().__init__(button)  # type: ignore[call-arg]
        self.key = key

    @classmethod
    def label_for(cls, key: str) -> str:  # noqa: ARG003 (one label for every key here)
        return cls.LABEL

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],  # noqa: ARG003 (the signature discord.py calls)
        item: discord.ui.Item[Any],  # noqa: ARG003
        match: re.Match[str],
    ) -> Any:
        return cls(match["key"])


class FeedbackButton(
    _KeyedButton,
    discord.ui.DynamicItem[discord.ui.Button[Any]],
    template=r"docbot:fb:(?P<key>(?:up|down):[0-9a-f]{32})",
):
    """A 👍/👎 button whose custom id carries the vote and the answer id."""

    PREFIX = "docbot:fb"

    @classmethod
    def label_for(cls, key: str) -> str:
        return "👍 Helpful" if key.startswith("up:") else "👎 Not helpful"

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        vote, _, answer_id = self.key.partition(":")
        state = _KeyedButton.bot.state if _KeyedButton.bot else None
        try:
            stored = state is not None and await state.record_feedback(
                answer_id, str(interaction.user.id), vote == "up"
            )
        except Exception:
            log.exception("feedback_failed", platform="discord")
            await interaction.response.send_message(FEEDBACK_NOT_SAVED, ephemeral=True)
            return
        if stored and vote == "down" and state is not None:
            # A 👎 asks what was wrong (the form can be closed; the vote stands).
            await interaction.response.send_modal(ReasonModal(answer_id, state))
            return
        text = "Thanks for the feedback." if stored else NO_LONGER_KNOWN
        await interaction.response.send_message(text, ephemeral=True)


class ReasonModal(discord.ui.Modal, title="What was wrong?"):
    """The form a 👎 opens: what was wrong, and a note in the person's own words."""

    def __init__(self, answer_id: str, state: PlatformState) -> None:
        super().__init__(custom_id=f"docbot:reason:{answer_id}")
        self.answer_id = answer_id
        self.state = state
        self.reason: discord.ui.Select[Any] = discord.ui.Select(
            custom_id="reason",
            options=[
                discord.SelectOption(label=label, value=value)
                for value, label in FEEDBACK_REASONS.items()
            ],
        )
        self.note: discord.ui.TextInput[Any] = discord.ui.TextInput(
            custom_id="note",
            style=discord.TextStyle.long,
            required=False,
            max_length=MAX_FEEDBACK_NOTE_CHARS,
        )
        self.add_item(discord.ui.Label(text="The answer…", component=self.reason))
        self.add_item(discord.ui.Label(text="Anything to add?", component=self.note))

    async def on_submit(self, interaction: discord.Interaction[Any]) -> None:
        reason = self.reason.values[0] if self.reason.values else ""
        try:
            stored = await self.state.record_feedback_reason(
                self.answer_id, str(interaction.user.id), reason, self.note.value or ""
            )
            text = "Thanks, that helps." if stored else NO_LONGER_KNOWN
        except Exception:
            log.exception("feedback_reason_failed", platform="discord")
            text = FEEDBACK_NOT_SAVED
        await interaction.response.send_message(text, ephemeral=True)


class EscalateButton(
    _KeyedButton,
    discord.ui.DynamicItem[discord.ui.Button[Any]],
    template=r"docbot:help:(?P<key>[0-9a-f]{32})",
):
    """ "Still need help?": mentions the channel's escalation targets, once per answer."""

    PREFIX, LABEL = "docbot:help", STILL_NEED_HELP

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        bot = _KeyedButton.bot
        channel = interaction.channel
        targets = bot.policies(policy_key(interaction)).escalate_to if bot else ()
        known = bot is not None and await bot.state.recorded_answer(self.key) is not None
        if bot is None or not targets or channel is None or not known:
            await interaction.response.send_message(NO_ONE_TO_CALL, ephemeral=True)
            return
        if not await bot.state.first_delivery(f"discord-escalation:{self.key}"):
            await interaction.response.send_message(ALREADY_CALLED, ephemeral=True)
            return
        content, allowed = escalation(targets)
        await interaction.response.send_message(content, allowed_mentions=allowed)


def policy_key(interaction: discord.Interaction[Any]) -> str:
    """The key of the channel whose policy holds where `interaction` happened: in a thread, the
    channel it hangs off (no policy names a thread), else the channel itself."""
    parent = getattr(interaction.channel, "parent_id", None) or interaction.channel_id
    return key_of_channel(interaction.guild_id, parent)


def escalation(targets: tuple[str, ...]) -> tuple[str, discord.AllowedMentions]:
    """The configured targets as mentions (`user:ID` people, `role:ID` roles) and the only
    mentions Discord may turn into pings for that message: exactly those."""
    users = [int(t.split(":")[1]) for t in targets if t.startswith("user:")]
    roles = [int(t.split(":")[1]) for t in targets if t.startswith("role:")]
    mentions = " ".join([*(f"<@{u}>" for u in users), *(f"<@&{r}>" for r in roles)])
    allowed = discord.AllowedMentions(
        everyone=False,
        users=[discord.Object(id=u) for u in users],
        roles=[discord.Object(id=r) for r in roles],
        replied_user=False,
    )
    return ESCALATION.format(targets=mentions), allowed


class ShareButton(
    _KeyedButton,
    discord.ui.DynamicItem[discord.ui.Button[Any]],
    template=r"docbot:share:(?P<key>[0-9a-f]{32})",
):
    """ "Share with the channel" under a private answer: the same checked answer, for everyone,
    once."""

    PREFIX, LABEL, STYLE = "docbot:share", SHARE, discord.ButtonStyle.primary

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        bot = _KeyedButton.bot
        kept = await bot.state.recorded_answer(self.key) if bot else None
        if bot is None or kept is None:
            await interaction.response.send_message(NO_LONGER_KNOWN, ephemeral=True)
            return
        if not await bot.state.first_delivery(f"discord-share:{self.key}"):
            await interaction.response.send_message(ALREADY_SHARED, ephemeral=True)
            return
        policy = bot.policies(policy_key(interaction))
        embeds = bot.embeds_of(kept.answer)
        view = feedback_view(self.key, escalate=bool(policy.escalate_to))
        await interaction.response.send_message(
            embed=embeds[0],
            allowed_mentions=NO_MENTIONS,
            view=view_argument(view if len(embeds) == 1 else None),
        )
        for n, embed in enumerate(embeds[1:], start=2):
            await interaction.followup.send(
                embed=embed,
                allowed_mentions=NO_MENTIONS,
                view=view_argument(view if n == len(embeds) else None),
            )


class SolvedButton(
    _KeyedButton,
    discord.ui.DynamicItem[discord.ui.Button[Any]],
    template=r"docbot:solved:(?P<key>\d{1,25})",
):
    """ "It's solved" under an answer to a forum post: the poster or a moderator applies the
    forum's solved tag (and, when configured, locks the post)."""

    PREFIX, LABEL, STYLE = "docbot:solved", SOLVED, discord.ButtonStyle.success

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        """Deferred at once: three REST calls come before the reply, and a rate limit's wait
        would pass Discord's 3 s ("This interaction failed"). A call Discord refuses (no
        Manage Threads to tag or lock the post) is said, not left as that failure."""
        bot = _KeyedButton.bot
        if bot is None:
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            said = await self._marked(bot, interaction)
        except discord.HTTPException as exc:
            log.warning("solved_not_marked", platform="discord", status=exc.status)
            said = NOT_MARKED_SOLVED
        await interaction.followup.send(said, ephemeral=True)

    async def _marked(self, bot: DocsBot, interaction: discord.Interaction[Any]) -> str:
        post: dict[str, Any] = dict(await bot.http.get_channel(int(self.key)))
        is_poster = str(post.get("owner_id")) == str(interaction.user.id)
        if not (is_poster or interaction.permissions.manage_threads):
            return ONLY_ASKER
        forum: dict[str, Any] = dict(await bot.http.get_channel(int(post["parent_id"])))
        wanted = bot.settings.solved_tag.casefold()
        tag = next(
            (t["id"] for t in forum.get("available_tags", []) if t["name"].casefold() == wanted),
            None,
        )
        applied = list(post.get("applied_tags") or [])
        if tag is not None and tag not in applied and len(applied) < MAX_FORUM_TAGS:
            applied.append(tag)
        changes: dict[str, Any] = {"applied_tags": applied}
        if bot.settings.lock_solved:
            changes["locked"] = True
        await bot.http.edit_channel(int(self.key), **changes)
        return MARKED_SOLVED if tag else NO_SOLVED_TAG.format(tag=bot.settings.solved_tag)


def view_argument(view: discord.ui.View | None) -> Any:
    """discord.py's "no buttons" is `MISSING`, not None: `Webhook.send` calls methods on any
    view it is given other than `MISSING`, so a None there would fail the send."""
    return discord.utils.MISSING if view is None else view


def feedback_view(
    answer_id: str, *, escalate: bool = False, solved: int | None = None
) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    view.add_item(FeedbackButton(f"up:{answer_id}"))
    view.add_item(FeedbackButton(f"down:{answer_id}"))
    if escalate:
        view.add_item(EscalateButton(answer_id))
    if solved is not None:
        view.add_item(SolvedButton(str(solved)))
    return view


PERSISTENT_BUTTONS = (FeedbackButton, EscalateButton, ShareButton, SolvedButton)


def attach(bot: DocsBot) -> None:
    """The bot every persistent button acts through (one per process)."""
    _KeyedButton.bot = bot
