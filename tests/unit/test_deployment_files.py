"""The deployment files hold together: docker-compose.yml, .env.example, the Dockerfile and the
Procfile. Docker can't run here, so these check the structure compose relies on: one image for
every bot service, a profile for each platform process (a Slack-only team never restart-loops
Discord), every ${VAR} documented in .env.example, every secret the bot reads listed there, and
every command a real `bot` command."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from bot.cli import app
from core.backends.elasticsearch.schema import IndexNames
from core.config_loader import ENV_ALIASES, SECRET_ENV_VARS, load_settings
from tests.conftest import REPO

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
BOT_SERVICES = {name: s for name, s in SERVICES.items() if name != "elasticsearch"}
PLATFORM_PROFILES = {"slack": "slack", "slack-socket": "slack-socket", "discord": "discord"}
ENV_EXAMPLE = (REPO / ".env.example").read_text()
# `${VAR}`, `${VAR:-default}`, `${VAR:?error}`; `$${VAR}` is a literal for the container's shell.
_COMPOSE_VAR = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)")
_ENV_LINE = re.compile(r"^(#\s*)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.MULTILINE)


def _example(*, commented: bool) -> dict[str, str]:
    """.env.example's variables: as shipped, or with every commented-out setting turned on."""
    return {
        name: value
        for hash_, name, value in _ENV_LINE.findall(ENV_EXAMPLE)
        if commented or not hash_
    }


def test_every_bot_service_runs_the_one_image() -> None:
    images = {s["image"] for s in BOT_SERVICES.values()}
    builds = {yaml.safe_dump(s["build"]) for s in BOT_SERVICES.values()}
    assert images == {"${DOCBOT_IMAGE:-docbot:local}"}
    assert len(builds) == 1  # same tag, same build: compose builds it once
    assert set(BOT_SERVICES) == {"ingest", "slack", "slack-socket", "discord", "clock"}


def test_each_process_has_its_profile_and_ingest_always_runs() -> None:
    for name, profile in PLATFORM_PROFILES.items():
        assert SERVICES[name]["profiles"] == [profile]
    assert SERVICES["clock"]["profiles"] == ["clock"]
    assert SERVICES["elasticsearch"]["profiles"] == ["elasticsearch"]
    assert "profiles" not in SERVICES["ingest"]
    assert SERVICES["ingest"]["restart"] == "no"
    for name, service in BOT_SERVICES.items():
        # Without the elasticsearch profile the dependency is skipped, not an error.
        assert service["depends_on"]["elasticsearch"] == {
            "condition": "service_healthy",
            "required": False,
        }, name


# Seconds a platform waits after SIGTERM before it kills: Heroku's, and what docker-compose.yml
# asks for (Docker's own default is 10 s). The bot must have apologised by then.
HEROKU_STOP_S = 30
_DURATION = re.compile(r"([0-9]+)s")
# After the apologies: the HTTP server and the index closed, the process gone.
CLOSING_S = 3


def test_a_stopping_bot_apologises_before_the_platform_kills_it() -> None:
    """A SIGTERM's drain (the grace, then the apologies) ends before the kill, or the process
    dies with its askers' placeholders (Slack's "Looking through the docs…", Discord's
    "thinking…") left as they are for ever: the shipped 30 s + 10 s outlasted both Heroku's
    30 s and Docker's 10 s."""
    settings = load_settings(REPO / "config.yaml", environ={})
    for name, service, platform in [
        ("slack", "slack", settings.slack),
        ("slack", "slack-socket", settings.slack),
        ("discord", "discord", settings.discord),
    ]:
        drain_s = platform.shutdown_grace_s + platform.apology_deadline_s + CLOSING_S
        assert drain_s <= HEROKU_STOP_S, name
        stop = _DURATION.fullmatch(str(SERVICES[service].get("stop_grace_period", "10s")))
        assert stop is not None, service
        assert drain_s <= int(stop.group(1)), service


def test_the_teams_docs_are_mounted_and_ingested() -> None:
    ingest = SERVICES["ingest"]
    assert "${DOCS_DIR:-./docs}:/knowledge:ro" in ingest["volumes"]
    assert "bot-data:/data" in ingest["volumes"]
    assert ingest["command"][:3] == ["bot", "ingest", "/knowledge"]
    assert ingest["environment"]["BOT_STORAGE__DATA_DIR"] == "/data"
    assert "ENV BOT_STORAGE__DATA_DIR=/data" in (REPO / "Dockerfile").read_text()


def test_every_compose_variable_is_in_env_example() -> None:
    used = set(_COMPOSE_VAR.findall((REPO / "docker-compose.yml").read_text()))
    assert used - set(_example(commented=True)) == set()
    assert "ELASTIC_PASSWORD" in used


def test_every_secret_and_alias_the_bot_reads_is_in_env_example() -> None:
    shipped = _example(commented=False)
    for name in [*SECRET_ENV_VARS, *ENV_ALIASES]:
        assert name in shipped, name
    assert all(shipped[name] == "" for name in SECRET_ENV_VARS)  # no sample secret values


@pytest.mark.parametrize("commented", [False, True])
def test_env_example_as_compose_passes_it_is_a_valid_configuration(commented: bool) -> None:
    env = {**_example(commented=commented), **_compose_environment()}
    settings = load_settings(REPO / "config.yaml", environ=env)
    assert settings.storage.data_dir.as_posix() == "/data"


def _compose_environment() -> dict[str, str]:
    """The bot services' `environment:` with compose's `${VAR:-default}` defaults applied."""
    nested = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:-([^${}]*)\}")
    resolved = {}
    for name, value in SERVICES["slack"]["environment"].items():
        text = str(value)
        while nested.search(text):
            text = nested.sub(r"\1", text)
        resolved[name] = text
    return resolved


def _commands() -> list[list[str]]:
    compose = [s["command"] for s in BOT_SERVICES.values()]
    procfile = [
        shlex.split(line.split(":", 1)[1])
        for line in (REPO / "Procfile").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    return compose + procfile


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
def test_every_process_command_is_a_bot_command(command: list[str]) -> None:
    assert command[0] == "bot"
    result = CliRunner().invoke(app, [*command[1:], "--help"])
    assert result.exit_code == 0, result.output


def test_the_image_has_the_commands_a_source_type_runs() -> None:
    """A git source runs `git`: python:3.11-slim has none, so `type: git` failed in the image
    with "git sources need the git command"."""
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.search(r"apt-get install [^\n]*\bgit\b", dockerfile)


def test_secrets_never_reach_the_image() -> None:
    ignored = (REPO / ".dockerignore").read_text().splitlines()
    assert ".env" in ignored
    assert ".bot/" in ignored


def test_the_slack_manifests_ask_for_what_the_app_handles() -> None:
    from adapters.slack.app import ASK_SHORTCUT

    classic = yaml.safe_load((REPO / "manifest.yml").read_text())
    agent = yaml.safe_load((REPO / "manifest.agent.yml").read_text())
    for manifest in (classic, agent):
        events = set(manifest["settings"]["event_subscriptions"]["bot_events"])
        scopes = set(manifest["oauth_config"]["scopes"]["bot"])
        assert {"app_mention", "message.channels", "message.im", "reaction_added"} <= events
        assert {"commands", "reactions:read", "chat:write"} <= scopes
        [shortcut] = manifest["features"]["shortcuts"]
        assert shortcut["callback_id"] == ASK_SHORTCUT
    assert "agent_view" in agent["features"]
    assert "assistant_view" not in agent["features"]
    assert {"app_home_opened", "app_context_changed"} <= set(
        agent["settings"]["event_subscriptions"]["bot_events"]
    )
    assert "assistant:write" in agent["oauth_config"]["scopes"]["bot"]


# The bot token scopes each Slack Web API method the adapter calls needs (Slack's method
# reference). A method missing here fails the test below: look its scope up and add it.
_HISTORY = {"channels:history", "groups:history", "im:history", "mpim:history"}
SLACK_METHOD_SCOPES: dict[str, set[str]] = {
    "chat_postMessage": {"chat:write"},
    "chat_postEphemeral": {"chat:write"},
    "chat_update": {"chat:write"},
    "chat_delete": {"chat:write"},
    "chat_startStream": {"chat:write"},
    "chat_appendStream": {"chat:write"},
    "chat_stopStream": {"chat:write"},
    "conversations_replies": _HISTORY,  # threads in every kind of conversation the bot is in
    "conversations_history": _HISTORY,
    "views_open": set(),
    "auth_test": set(),
    "apps_connections_open": set(),  # the app-level token's connections:write
    # Slack's reference since March 2026 (assistant:write is still taken, for now).
    "assistant_threads_setStatus": {"chat:write"},
    "assistant_threads_setTitle": {"assistant:write"},
}
# What an event subscription needs, and what the listeners need besides the Web API.
SLACK_EVENT_SCOPES: dict[str, set[str]] = {
    "app_mention": {"app_mentions:read"},
    "message.channels": {"channels:history"},
    "message.groups": {"groups:history"},
    "message.im": {"im:history"},
    "message.mpim": {"mpim:history"},
    "reaction_added": {"reactions:read"},
    "app_home_opened": set(),
    "app_context_changed": set(),
}
_SLACK_CALL = re.compile(
    r"\.((?:chat|conversations|views|auth|apps|assistant|reactions|users|usergroups|files|im"
    r"|team|bots|pins|bookmarks)_[A-Za-z_]+)\("
)


def test_the_slack_manifests_ask_for_exactly_the_scopes_the_bot_uses() -> None:
    """Every scope a manifest asks for is one a called method or a subscribed event needs, and
    the other way round: `im:write` (opening DMs; the bot only replies where it is spoken to)
    was asked for and never used, while the README said "exactly the scopes the bot uses"."""
    called = {
        name
        for path in (REPO / "adapters" / "slack").glob("*.py")
        for name in _SLACK_CALL.findall(path.read_text())
    }
    unknown = called - set(SLACK_METHOD_SCOPES)
    assert not unknown, f"add the scopes of {sorted(unknown)} to SLACK_METHOD_SCOPES"
    for file, agent in [("manifest.yml", False), ("manifest.agent.yml", True)]:
        manifest = yaml.safe_load((REPO / file).read_text())
        events = manifest["settings"]["event_subscriptions"]["bot_events"]
        needed = {"commands"} if manifest["features"].get("shortcuts") else set()
        for event in events:
            needed |= SLACK_EVENT_SCOPES[event]
        for method in called:
            scopes = SLACK_METHOD_SCOPES[method]
            if agent or scopes != {"assistant:write"}:  # refused, and logged, outside agent threads
                needed |= scopes
        if agent:  # the suggested prompts, set through Bolt on app_home_opened
            needed.add("assistant:write")
        assert set(manifest["oauth_config"]["scopes"]["bot"]) == needed, file


# What each long-running process serves, and where (`bot slack --http` on its own port; the
# others on `metrics.port`, the probes only where the process has a readiness of its own).
_SERVES = {
    "slack": ("slack.port", {"/healthz", "/readyz", "/metrics"}),
    "slack-socket": ("metrics.port", {"/healthz", "/readyz", "/metrics"}),
    "discord": ("metrics.port", {"/healthz", "/readyz", "/metrics"}),
    "clock": ("metrics.port", {"/metrics"}),
}
_PROBED = re.compile(r"urlopen\('http://127\.0\.0\.1:(\d+)(/[a-z]+)'")


@pytest.mark.parametrize("name", sorted(_SERVES))
def test_each_long_running_service_probes_what_its_process_serves(name: str) -> None:
    """A health check on a port or path the process does not serve would mark a healthy
    container unhealthy for ever (and one that always passes would hide a dead one)."""
    settings = load_settings(REPO / "config.yaml", environ=_compose_environment())
    port_setting, paths = _SERVES[name]
    section, key = port_setting.split(".")
    port = getattr(getattr(settings, section), key)
    [probe] = _PROBED.findall(" ".join(SERVICES[name]["healthcheck"]["test"]))
    assert (int(probe[0]), probe[1] in paths) == (port, True)
    assert settings.metrics.host == "127.0.0.1"  # the probe runs in the container itself


def test_the_readme_names_every_elasticsearch_state_index() -> None:
    """Operators grant privileges and clean up by the README's list; three indices the backend
    creates (`-pending-replies`, `-reply-owners`, `-askers`) had gone unnamed there."""
    readme = " ".join((REPO / "README.md").read_text().split())
    names = IndexNames("docbot")
    unnamed = [
        index
        for index in names.state_indices()
        if f"`{index.removeprefix('docbot')}`" not in readme and f"`{index}`" not in readme
    ]
    assert not unnamed, f"README.md's state indices lack {unnamed}"
