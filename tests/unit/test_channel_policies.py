"""Channel policies: `channels.default`, overridden key by key by every matching entry of
`channels.policies`, most specific last; the older `web_search` keys still decide web search
unless a policy says."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from bot.wiring import build_web_search
from core.config import ChannelPolicy, ChannelSettings, Secrets, Settings, WebSearchSettings
from core.errors import MissingSecret


def _settings(**policies: ChannelPolicy) -> Settings:
    return Settings(channels=ChannelSettings(policies=policies))


def test_the_default_is_mention_only_everywhere() -> None:
    policy = Settings().policy("slack/T1/C1/1700000000.1")
    assert policy.trigger == "mention"
    assert policy.questions_only
    assert policy.answer_only_when_grounded
    assert policy.sources == ()
    assert policy.matched == ()
    assert policy.min_relevance == pytest.approx(0.3)
    assert policy.followups == "questions"


def test_a_default_written_without_a_key_keeps_that_keys_built_in_value() -> None:
    # An older config.yaml's `channels.default`, or a single env override of one key.
    older = Settings(channels=ChannelSettings(default=ChannelPolicy(trigger="auto")))
    policy = older.policy("slack/T1/C1")
    assert policy.trigger == "auto"
    assert policy.min_relevance == pytest.approx(0.3)
    assert policy.questions_only
    assert policy.answer_only_when_grounded
    assert policy.reactions


def test_a_channel_may_turn_the_relevance_floor_off_but_not_out_of_range() -> None:
    settings = _settings(**{"slack/T1/C9": ChannelPolicy(min_relevance=0)})
    assert settings.policy("slack/T1/C9").min_relevance == 0
    assert settings.policy("slack/T1/C8").min_relevance == pytest.approx(0.3)
    with pytest.raises(ValueError, match="less than or equal to 1"):
        ChannelPolicy(min_relevance=1.5)
    with pytest.raises(ValueError, match="not true/false"):
        ChannelPolicy(min_relevance=True)  # what `=true` in the environment parses to


def test_the_most_specific_entry_wins_key_by_key() -> None:
    settings = Settings(
        channels=ChannelSettings(
            policies={
                "slack/T1": ChannelPolicy(sources=["handbook"], web_search=False),
                "slack/T1/C9": ChannelPolicy(trigger="auto"),
                "slack/T1/C9X": ChannelPolicy(trigger="off"),  # another channel: no match
            }
        )
    )
    policy = settings.policy("slack/T1/C9/1700000000.1")
    assert policy.trigger == "auto"
    assert policy.sources == ("handbook",)  # inherited from the workspace entry
    assert policy.web_search is False
    assert policy.matched == ("slack/T1", "slack/T1/C9")
    assert settings.policy("slack/T2/C9").trigger == "mention"


def test_web_search_keeps_its_old_keys_unless_a_policy_says() -> None:
    settings = Settings(
        web_search=WebSearchSettings(enabled=True, channels={"discord/5": False}),
        channels=ChannelSettings(policies={"discord/5/77": ChannelPolicy(web_search=True)}),
    )
    assert settings.policy("slack/T1/C1").web_search is True
    assert settings.policy("discord/5/66").web_search is False
    assert settings.policy("discord/5/77").web_search is True


@pytest.mark.parametrize(
    "channels",
    [
        ChannelSettings(policies={"slack/T1/C3": ChannelPolicy(web_search=True)}),
        ChannelSettings(default=ChannelPolicy(web_search=True)),
    ],
)
async def test_a_policy_alone_that_turns_web_search_on_gets_a_provider(
    channels: ChannelSettings,
) -> None:
    # The `web_search` section is off: the policy's `true` used to be ignored, as no provider
    # was built for the engine to offer.
    settings = Settings(channels=channels)
    assert settings.policy("slack/T1/C3/1700000000.1").web_search is True
    with pytest.raises(MissingSecret, match="PERPLEXITY_API_KEY is not set"):
        build_web_search(settings)
    keyed = settings.model_copy(update={"secrets": Secrets(perplexity_api_key=SecretStr("k"))})
    search = build_web_search(keyed)
    assert search is not None
    await search.close()
    assert build_web_search(Settings()) is None


def test_no_provider_and_no_key_needed_where_every_conversation_resolves_off() -> None:
    # `enabled: true`, but the default policy says off: nothing may search the web.
    off = Settings(
        web_search=WebSearchSettings(enabled=True),
        channels=ChannelSettings(default=ChannelPolicy(web_search=False)),
    )
    assert off.policy("slack/T1/C1").web_search is False
    assert not off.web_search_reach().anywhere
    assert build_web_search(off) is None


def test_a_bad_prefix_is_refused_at_load() -> None:
    with pytest.raises(ValueError, match="conversation-key prefix"):
        _settings(**{"#general": ChannelPolicy(trigger="auto")})


# Each would be accepted, then never match a key the adapters look a channel up by.
NEVER_MATCHING = [
    "general",  # a channel's name
    "slack/general",
    "slack/T0123/general",
    "slakc/T0123/C0DOCS",  # a misspelt platform
    "Slack/T0123",
    "teams/T0123",
    "slack/t0123/c0docs",  # Slack ids are upper case, and keys are matched as written
    "slack/T0123/C0DOCS/",
    "discord/general",
    "discord/111/general",
    "discord/thread/5",  # a thread follows its channel's policy
]


@pytest.mark.parametrize("prefix", NEVER_MATCHING)
def test_a_prefix_no_adapter_looks_up_is_refused_with_the_forms_it_may_take(prefix: str) -> None:
    with pytest.raises(ValueError, match="conversation-key prefix") as caught:
        _settings(**{prefix: ChannelPolicy(trigger="auto")})
    assert repr(prefix) in str(caught.value)
    assert "slack/TEAM_ID/CHANNEL_ID" in str(caught.value)
    assert "discord/GUILD_ID/CHANNEL_ID" in str(caught.value)
    with pytest.raises(ValueError, match="conversation-key prefix"):
        WebSearchSettings(channels={prefix: True})


@pytest.mark.parametrize(
    "prefix",
    [
        "slack",
        "slack/T0123",
        "slack/T0123/C0DOCS",
        "slack/T0123/G0PRIVATE",
        "slack/T0123/D0DIRECT",
        "discord",
        "discord/111111111111111111",
        "discord/111111111111111111/222222222222222222",
        "discord/dm",
        "discord/dm/333333333333333333",
    ],
)
def test_every_key_shape_the_adapters_look_up_is_accepted(prefix: str) -> None:
    settings = _settings(**{prefix: ChannelPolicy(trigger="auto")})
    assert settings.policy(prefix).matched == (prefix,)
    assert WebSearchSettings(channels={prefix: True}).channels == {prefix: True}


def test_web_search_may_be_set_per_slack_thread_but_a_policy_may_not() -> None:
    """Web search is looked up by conversation (a Slack thread's key ends in its ts); the
    trigger and the rest, by channel."""
    thread = "slack/T1/C7/1700000000.1"
    assert WebSearchSettings(channels={thread: False}).channels == {thread: False}
    with pytest.raises(ValueError, match="conversation-key prefix"):
        _settings(**{thread: ChannelPolicy(trigger="auto")})


@pytest.mark.parametrize(
    "target", ["<!channel>", "@everyone", "U0 1", "user:abc", "here", "role:1<@&2>"]
)
def test_escalation_targets_are_ids_only(target: str) -> None:
    with pytest.raises(ValueError, match="not an escalation target"):
        _settings(**{"slack/T1": ChannelPolicy(escalate_to=[target])})


def test_the_default_may_name_both_platforms_targets_and_each_mentions_its_own() -> None:
    slack, discord = ["U0ESC1", "W0ESC2", "S0GROUP"], ["user:123456789", "role:987654321"]
    default = ChannelPolicy(escalate_to=[*slack, *discord])
    settings = Settings(channels=ChannelSettings(default=default))
    assert settings.policy("slack/T1/C1").escalate_to == tuple(slack)
    assert settings.policy("discord/1/2").escalate_to == tuple(discord)
    assert settings.policy("discord/dm/2").escalate_to == tuple(discord)


@pytest.mark.parametrize(
    ("prefix", "target"),
    [
        ("slack/T1", "role:333"),
        ("slack", "user:1"),
        ("discord/1/2", "U0ONCALL"),
        ("discord", "S0G"),
    ],
)
def test_a_platforms_entry_refuses_the_other_platforms_targets(prefix: str, target: str) -> None:
    """They would be posted as text, "<@role:333>", and ping nobody."""
    with pytest.raises(ValueError, match=f"{prefix}: escalate_to '{target}' can't be mentioned"):
        _settings(**{prefix: ChannelPolicy(escalate_to=[target])})


def test_a_channel_may_answer_every_follow_up_but_only_questions_or_all() -> None:
    settings = _settings(**{"discord/9": ChannelPolicy(followups="all")})
    assert settings.policy("discord/9/10").followups == "all"
    assert settings.policy("slack/T1/C1").followups == "questions"
    with pytest.raises(ValueError, match="'questions' or 'all'"):
        ChannelPolicy(followups="some")  # type: ignore[arg-type]


def test_only_a_channel_that_says_no_web_search_leaves_learned_knowledge_out() -> None:
    settings = Settings(
        channels=ChannelSettings(policies={"slack/T1/C1": ChannelPolicy(web_search=False)}),
        web_search=WebSearchSettings(channels={"slack/T1/C2": False, "slack/T1/C3": True}),
    )
    assert not settings.policy("slack/T1/C1/1.1").learned
    assert not settings.policy("slack/T1/C2/1.1").learned
    assert settings.policy("slack/T1/C3/1.1").learned
    assert settings.policy("slack/T1/C4/1.1").learned  # web search off by default: inherited
    assert not settings.policy("slack/T1/C4/1.1").web_search
    # Off through `channels.default` is off by default too, not said for every channel.
    default_off = Settings(channels=ChannelSettings(default=ChannelPolicy(web_search=False)))
    assert default_off.policy("slack/T1/C4/1.1").learned
    assert not default_off.policy("slack/T1/C4/1.1").web_search
