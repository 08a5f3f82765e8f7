from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from core.config import Settings
from core.config_loader import RETIRED_KEYS, load_settings
from core.errors import ConfigError
from tests.conftest import REPO


def test_config_yaml_lists_exactly_the_defaults() -> None:
    """config.yaml documents every setting: it must hold the code's defaults, key for key."""
    from_file = yaml.safe_load((REPO / "config.yaml").read_text())
    defaults = Settings().model_dump(mode="json", exclude={"secrets"})
    assert from_file == defaults


def test_environment_overrides_nested_keys(tmp_path: Path) -> None:
    s = load_settings(
        None,
        environ={"BOT_SEARCH__RRF_K": "40", "BOT_SEARCH__BM25_COLUMNS__TITLE": "3.5"},
    )
    assert s.search.rrf_k == 40
    assert s.search.bm25_columns.title == 3.5


def test_bad_value_names_the_key(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text("search:\n  rrf_k: 0\n")
    with pytest.raises(ConfigError, match=r"search\.rrf_k: .*greater than or equal to 1"):
        load_settings(file, environ={})


def test_bad_env_value_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"embeddings\.batch_size"):
        load_settings(environ={"BOT_EMBEDDINGS__BATCH_SIZE": "many"})


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        (
            "BOT_INGEST__CRAWL__MAX_HELD_BYTES",
            "-1",
            r"ingest\.crawl\.max_held_bytes: .*greater than or equal to 0 \(got -1\), from "
            "BOT_INGEST__CRAWL__MAX_HELD_BYTES",
        ),
        (
            "BOT_INGEST__CONFLUENCE__MAX_TOTAL_WAIT_S",
            "forever",
            r"ingest\.confluence\.max_total_wait_s: .*valid number",
        ),
    ],
)
def test_the_crawl_and_confluence_budgets_refuse_what_is_no_amount(
    variable: str, value: str, said: str
) -> None:
    with pytest.raises(ConfigError, match=said):
        load_settings(environ={variable: value})


@pytest.mark.parametrize("section", ["slack", "metrics"])
@pytest.mark.parametrize(
    ("value", "said"), [("-1", "greater than or equal to 0"), ("61", "less than or equal to 60")]
)
def test_a_refused_bodys_linger_is_a_bounded_wait(section: str, value: str, said: str) -> None:
    """Neither a negative wait nor one that lets a stalled sender hold a connection for long."""
    variable = f"BOT_{section.upper()}__REFUSED_LINGER_S"
    with pytest.raises(ConfigError, match=rf"{section}\.refused_linger_s: .*{said}.*{variable}"):
        load_settings(environ={variable: value})


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("BOT_INGEST__GIT__MAX_OUTPUT_BYTES", "100", "greater than or equal to 1024"),
        ("BOT_INGEST__GIT__MAX_OUTPUT_BYTES", "1e12", "valid integer"),
        ("BOT_INGEST__GIT__DOCUMENTS_ONLY", "sometimes", "valid boolean"),
    ],
)
def test_the_git_settings_refuse_what_is_no_setting(variable: str, value: str, said: str) -> None:
    key = variable.removeprefix("BOT_").lower().replace("__", ".")
    with pytest.raises(ConfigError, match=rf"{key}: .*{said}.*{variable}"):
        load_settings(environ={variable: value})


def test_unknown_key_is_an_error(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text("search:\n  rfk_k: 10\n")
    with pytest.raises(ConfigError, match=r"search\.rfk_k: unknown key"):
        load_settings(file, environ={})


@pytest.mark.parametrize(
    ("written", "said"),
    [
        ("search:\n  rfk_k: 10\n", "search.rfk_k: unknown key (did you mean rrf_k?)"),
        ("serch:\n  rrf_k: 10\n", "serch: unknown key (did you mean search?)"),
        (
            "ingest:\n  confluence:\n    blogpost: true\n",
            "ingest.confluence.blogpost: unknown key (did you mean blogposts?)",
        ),
        (
            "sources:\n  wiki:\n    type: confluence\n    location: [https://w.example]\n"
            "    spacs: [ENG]\n",
            "sources.wiki.spacs: unknown key (did you mean spaces?)",
        ),
        ("search:\n  zzz: 1\n", "search.zzz: unknown key,"),  # nothing close: no guess
    ],
)
def test_an_unknown_key_names_the_setting_it_is_closest_to(
    tmp_path: Path, written: str, said: str
) -> None:
    assert said in refusal(tmp_path / "config.yaml", written)


@pytest.mark.parametrize("key", sorted(RETIRED_KEYS))
def test_a_retired_key_says_it_is_retired_not_a_typo(tmp_path: Path, key: str) -> None:
    *sections, name = key.split(".")
    written = "".join(f"{'  ' * depth}{part}:\n" for depth, part in enumerate(sections))
    said = refusal(tmp_path / "config.yaml", f"{written}{'  ' * len(sections)}{name}: 1\n")
    assert f"{key}: no longer used" in said
    assert "unknown key" not in said


def refusal(file: Path, text: str) -> str:
    """What loading `text` as the settings file says."""
    file.write_text(text)
    with pytest.raises(ConfigError) as refused:
        load_settings(file, environ={})
    return str(refused.value)


def test_cross_field_rule_is_reported(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text("ingest:\n  chunk_chars: 200\n  chunk_overlap_chars: 300\n")
    with pytest.raises(ConfigError, match="chunk_overlap_chars must be smaller"):
        load_settings(file, environ={})


def test_secret_in_file_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text("search:\n  api_key: sk-live-123\n")
    with pytest.raises(ConfigError, match="looks like a secret") as caught:
        load_settings(file, environ={})
    assert "sk-live-123" not in str(caught.value)


def test_secrets_come_from_the_environment_and_stay_hidden() -> None:
    s = load_settings(environ={"ANTHROPIC_API_KEY": "sk-ant-xyz"})
    assert s.secrets.anthropic_api_key is not None
    assert s.secrets.anthropic_api_key.get_secret_value() == "sk-ant-xyz"
    assert "sk-ant-xyz" not in repr(s)


def test_a_pasted_token_loses_the_space_and_line_end_around_it() -> None:
    """A `.env` saved with Windows line endings gives `SLACK_SIGNING_SECRET=abc\r`: kept as it
    was, every Slack request failed its signature check (401) with nothing saying why."""
    s = load_settings(
        environ={"SLACK_SIGNING_SECRET": "abc123\r", "SLACK_BOT_TOKEN": " xoxb-1-2 \n"}
    )
    assert s.secrets.slack_signing_secret is not None
    assert s.secrets.slack_signing_secret.get_secret_value() == "abc123"
    assert s.secrets.slack_bot_token is not None
    assert s.secrets.slack_bot_token.get_secret_value() == "xoxb-1-2"


def test_a_blank_token_is_not_set() -> None:
    """`DISCORD_TOKEN=" "` was a token, so the bot logged in with it and Discord refused it,
    instead of the bot saying that it is not set."""
    assert load_settings(environ={"DISCORD_TOKEN": "  "}).secrets.discord_token is None


@pytest.mark.parametrize(
    "pasted", ["xoxb-sec\nret-part", "xoxb-sec ret", "\u201cxoxb-secret\u201d"]
)
def test_a_token_with_a_break_or_a_quote_inside_is_refused_by_name(pasted: str) -> None:
    """A wrapped paste (a line break inside) used to end as "unexpected ValueError: Forbidden
    control character detected in headers", naming no variable."""
    with pytest.raises(ConfigError, match="environment variable SLACK_BOT_TOKEN has") as caught:
        load_settings(environ={"SLACK_BOT_TOKEN": pasted})
    assert "xoxb" not in str(caught.value)


def test_a_password_is_taken_as_given() -> None:
    """A password may hold spaces: only tokens and keys are one word."""
    s = load_settings(environ={"ELASTICSEARCH_PASSWORD": " pass word "})
    assert s.secrets.elasticsearch_password is not None
    assert s.secrets.elasticsearch_password.get_secret_value() == " pass word "


def test_missing_explicit_file_and_invalid_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_settings(tmp_path / "nope.yaml", environ={})
    bad = tmp_path / "bad.yaml"
    bad.write_text("search: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(bad, environ={})
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_settings(scalar, environ={})


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("search:\n\ttop_k: 3\n", ":2:1: not valid YAML: a tab: YAML is indented with spaces only"),
        (
            "search:\n  top_k: 3\nsearch:\n  rrf_k: 60\n",
            ":3:1: not valid YAML: 'search' is set twice in one mapping",
        ),
        (
            "search:\n  top_k: 3\n  top_k: 5\n",
            ":3:3: not valid YAML: 'top_k' is set twice in one mapping",
        ),
        ("? [a]\n: 1\n", ":1:3: not valid YAML: found unhashable key"),
    ],
)
def test_a_yaml_mistake_is_one_line_naming_file_line_and_column(
    tmp_path: Path, text: str, said: str
) -> None:
    file = tmp_path / "config.yaml"
    assert refusal(file, text) == f"{file}{said}"


def test_yaml_merge_keys_still_share_settings(tmp_path: Path) -> None:
    """`<<: *anchor` reuses a mapping, and a key written beside it overrides the merged one:
    neither is a key set twice."""
    file = tmp_path / "config.yaml"
    file.write_text(
        "sources:\n"
        "  handbook: &nightly {type: site, location: [https://a.example/], schedule: '0 4 * * *'}\n"
        "  blog:\n    <<: *nightly\n    location: [https://b.example/]\n"
    )
    sources = load_settings(file, environ={}).sources
    assert sources["blog"].schedule == "0 4 * * *"
    assert sources["blog"].location == ["https://b.example/"]


@pytest.mark.parametrize("switch", ["true", "yes", "on", "false"])
def test_a_switch_where_a_number_goes_is_an_error(tmp_path: Path, switch: str) -> None:
    file = tmp_path / "config.yaml"
    file.write_text(f"search:\n  top_k: {switch}\nanswers:\n  extractive_passages: 2\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(file, environ={})
    assert str(caught.value).startswith(
        "invalid configuration: search.top_k: a number, not a switch"
    )
    assert load_settings(environ={"BOT_SEARCH__TOP_K": "5"}).search.top_k == 5


def test_an_empty_path_is_an_error_not_the_current_folder(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text('storage:\n  data_dir: ""\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(file, environ={})
    assert str(caught.value).startswith(
        'invalid configuration: storage.data_dir: an empty path: write the folder ("." for'
    )


def test_bot_config_env_selects_the_file(tmp_path: Path) -> None:
    file = tmp_path / "other.yaml"
    file.write_text("search:\n  top_k: 3\n")
    assert load_settings(environ={"BOT_CONFIG": str(file)}).search.top_k == 3


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://localhost:11434/v1", True),
        ("http://127.0.0.1:8080/v1", True),
        ("http://[::1]:8080/v1", True),
        ("http://10.0.0.7/v1", True),
        ("http://192.168.1.20:11434/v1", True),
        ("http://ollama:11434/v1", True),  # a Docker Compose service
        ("http://gpu-box.internal/v1", True),
        ("https://api.openai.com/v1", False),
        ("https://8.8.8.8/v1", False),
        ("not a url", False),
        (None, False),
    ],
)
def test_a_model_server_nearby_gets_the_local_timeout(url: str | None, local: bool) -> None:
    openai = Settings().openai.model_copy(update={"base_url": url})
    expected = openai.local_timeout_s if local else openai.timeout_s
    assert openai.request_timeout_s == expected
    assert openai.local_timeout_s > openai.timeout_s


def test_stray_bot_variables_are_not_settings() -> None:
    """`BOT_TOKEN`, `BOT_DEBUG`: someone else's variables, which must not stop every command."""
    s = load_settings(environ={"BOT_TOKEN": "xyz", "BOT_DEBUG": "1", "BOT_USER": "ci"})
    assert s == load_settings(environ={})


def test_a_whole_section_may_come_from_one_variable() -> None:
    sources = '{"runbooks": {"type": "files", "location": ["/srv/runbooks"]}}'
    s = load_settings(environ={"BOT_SOURCES": sources})
    assert s.sources["runbooks"].location == ["/srv/runbooks"]


@pytest.mark.parametrize(
    ("name", "shown"),
    [("BOT_SLACK__TOKN", r"slack\.tokn: unknown key"), ("BOT_FOO__BAR", r"foo: unknown key")],
)
def test_an_unknown_setting_in_the_environment_names_the_variable(name: str, shown: str) -> None:
    with pytest.raises(ConfigError, match=rf"{shown}, from {name}$"):
        load_settings(environ={name: "1"})


def test_a_real_key_written_with_one_underscore_is_refused() -> None:
    """Read as "not a setting", it would do nothing, and nobody would know why."""
    with pytest.raises(ConfigError, match=r"BOT_SEARCH_RRF_K is not read.*BOT_SEARCH__RRF_K\?"):
        load_settings(environ={"BOT_SEARCH_RRF_K": "40"})


@pytest.mark.parametrize(
    ("name", "raw", "read"),
    [
        ("BOT_SLACK__PLACEHOLDER", "Hold on: searching the docs", "Hold on: searching the docs"),
        ("BOT_SLACK__PLACEHOLDER", "no", "no"),
        ("BOT_DISCORD__SOLVED_TAG", "Yes", "Yes"),
        ("BOT_CHANNELS__DEFAULT__TRIGGER", "off", "off"),  # a Literal: YAML would say False
        ("BOT_ELASTICSEARCH__SSL_ASSERT_FINGERPRINT", "12:34", "12:34"),  # YAML: 754
        ("BOT_OPENAI__MODEL", " qwen2.5 ", "qwen2.5"),
        ("BOT_OPENAI__MODEL", "null", None),  # an optional text setting: unset
        ("BOT_OPENAI__MODEL", "", None),
    ],
)
def test_a_text_setting_from_the_environment_is_the_text_as_written(
    name: str, raw: str, read: object
) -> None:
    s = load_settings(environ={name: raw})
    section, *keys = name.removeprefix("BOT_").lower().split("__")
    value: object = getattr(s, section)
    for key in keys:
        value = getattr(value, key)
    assert value == read


def test_numbers_switches_and_lists_from_the_environment_are_still_parsed() -> None:
    s = load_settings(
        environ={
            "BOT_SEARCH__RRF_K": "40",
            "BOT_ELASTICSEARCH__VERIFY_CERTS": "false",
            "BOT_SLACK__SUGGESTED_PROMPTS": '["Where is X?", "How: step by step"]',
            "BOT_CHANNELS__DEFAULT__SOURCES": "[handbook]",
            "BOT_WEB_SEARCH__CHANNELS": '{"slack/T1/C2": true}',
        }
    )
    assert s.search.rrf_k == 40
    assert s.elasticsearch.verify_certs is False
    assert s.slack.suggested_prompts == ["Where is X?", "How: step by step"]
    assert s.channels.default.sources == ["handbook"]
    assert s.web_search.channels == {"slack/T1/C2": True}


URL_SETTINGS = [
    "ingest.base_url",
    "openai.base_url",
    "anthropic.base_url",
    "web_search.base_url",
    "slack.base_url",
]


@pytest.mark.parametrize("key", URL_SETTINGS)
@pytest.mark.parametrize(
    "url", ["handbook.example.com", "not a url", "https://", "localhost:11434/v1", "https:/x.io"]
)
def test_a_url_setting_is_checked_when_the_settings_load(key: str, url: str) -> None:
    name = "BOT_" + key.upper().replace(".", "__")
    with pytest.raises(ConfigError, match=rf"^invalid configuration: {key}: not an http\(s\) URL"):
        load_settings(environ={name: url})


def test_a_url_setting_in_a_file_is_checked_and_a_good_one_kept_as_written(
    tmp_path: Path,
) -> None:
    file = tmp_path / "config.yaml"
    file.write_text("sources:\n  runbooks: {type: files, location: [/srv], base_url: wiki/rb}\n")
    with pytest.raises(ConfigError, match=rf"sources\.runbooks\.base_url: not an http.*{file}"):
        load_settings(file, environ={})
    served = {"BOT_OPENAI__BASE_URL": "http://localhost:11434/v1", "BOT_OPENAI__MODEL": "qwen2.5"}
    s = load_settings(environ=served)
    assert s.openai.base_url == "http://localhost:11434/v1"  # no `/` added, nothing normalised


def test_a_refused_url_is_shown_without_its_password() -> None:
    with pytest.raises(ConfigError, match=r"openai\.base_url") as caught:
        load_settings(environ={"BOT_OPENAI__BASE_URL": "bob:hunter2@llm.example/v1"})
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    "key",
    ["ingest.base_url", "sources.runbooks.base_url", "sources.wiki.web_url"],
)
def test_a_base_for_citation_links_holds_no_password(tmp_path: Path, key: str) -> None:
    file = tmp_path / "config.yaml"
    url = "https://bob:hunter2@docs.example.com/{path}"
    file.write_text(
        yaml.safe_dump(
            {
                "ingest": {"base_url": url if key == "ingest.base_url" else None},
                "sources": {
                    "runbooks": {"type": "files", "location": ["/srv"]}
                    | ({"base_url": url} if key.startswith("sources.runbooks") else {}),
                    "wiki": {"type": "git", "location": ["/srv/wiki.git"]}
                    | ({"web_url": url} if key.startswith("sources.wiki") else {}),
                },
            }
        )
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(file, environ={})
    assert str(caught.value).startswith(
        f"invalid configuration: {key}: a base for citation links can't hold a user or password"
    )
    assert "hunter2" not in str(caught.value)


def test_a_confluence_location_with_a_password_is_refused(tmp_path: Path) -> None:
    """Every page's link is built on the location: the password would be in each citation."""
    file = tmp_path / "config.yaml"
    wiki = {"type": "confluence", "location": ["https://bob:hunter2@wiki.example.com"]}
    file.write_text(yaml.safe_dump({"sources": {"wiki": {**wiki, "spaces": ["ENG"]}}}))
    with pytest.raises(ConfigError) as caught:
        load_settings(file, environ={})
    assert str(caught.value).startswith(
        "invalid configuration: sources.wiki: a confluence source's location can't hold a user "
        "or password"
    )
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    "token",
    [
        "ghp_R3alT0kenValue1234567890abc-def",
        # shaped like a variable's name: only its prefix or its mix of letters and digits tells
        "ghp_SECRETSECRETSECRET1234",
        "github_pat_11ABCDEFG0123456789_abcdefghijkl",
        "Xk9pQ2mT7vB4nL8rW3zYa",
    ],
)
def test_a_token_written_where_its_variables_name_goes_is_never_shown(
    tmp_path: Path, token: str
) -> None:
    file = tmp_path / "config.yaml"
    file.write_text(
        "sources:\n  guides:\n    type: git\n    location: [https://github.com/acme/g.git]\n"
        f"    token_env: {token}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(file, environ={})
    assert str(caught.value) == (
        "invalid configuration: sources.guides.token_env: token_env is the name of the "
        "environment variable that holds the token (such as GITHUB_TOKEN), not the token "
        f"itself, from {file}"
    )
    for name in ("GITHUB_TOKEN", "ConfluenceApiToken2024"):  # odd names, but names
        file.write_text(file.read_text().replace(token, name))
        assert load_settings(file, environ={}).sources["guides"].token_env == name
        token = name


def test_a_key_pasted_into_any_setting_is_not_echoed(tmp_path: Path) -> None:
    """An error names the setting and says what is wrong, but a value shaped like an issued key
    (a newcomer's `provider: sk-ant-...`) is not repeated into the terminal and the logs."""
    file = tmp_path / "config.yaml"
    file.write_text("answers:\n  provider: sk-ant-api03-AbCdEf0123456789\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(file, environ={})
    assert str(caught.value).startswith("invalid configuration: answers.provider: ")
    assert "got what looks like a key or token: not shown" in str(caught.value)
    assert "AbCdEf0123456789" not in str(caught.value)
    file.write_text("answers:\n  provider: claud\n")
    with pytest.raises(ConfigError, match="got 'claud'"):
        load_settings(file, environ={})


def test_a_section_left_with_every_key_commented_out_means_its_defaults(tmp_path: Path) -> None:
    """`search:` with nothing under it is YAML's null: it was refused as "Input should be a
    valid dictionary or instance of SearchSettings"; a newcomer commenting keys out meant the
    defaults. A setting left empty is refused in plain words, wherever it was left empty."""
    file = tmp_path / "config.yaml"
    file.write_text("search:\n  # top_k: 8\nsources:\nanswers:\n  limits:\n")
    settings = load_settings(file, environ={"BOT_SEARCH__RRF_K": "40"})
    assert settings.search.rrf_k == 40
    assert settings.search.top_k == Settings().search.top_k
    assert settings.sources == {}
    assert settings.answers.limits == Settings().answers.limits
    file.write_text("storage:\n  data_dir:\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(file, environ={})
    assert str(caught.value) == (
        "invalid configuration: storage.data_dir: left empty; give it a value, or leave it out "
        f"for the default, from {file}"
    )
    file.write_text("")
    with pytest.raises(ConfigError, match=r"search\.top_k: left empty; .*from BOT_SEARCH__TOP_K"):
        load_settings(file, environ={"BOT_SEARCH__TOP_K": ""})


@pytest.mark.parametrize("agent", ["docbot\nX-Injected: 1", "docbot/1.0 (équipe)", "docbot\x7f"])
def test_a_user_agent_no_http_header_can_carry_is_refused_at_load(
    tmp_path: Path, agent: str
) -> None:
    """It was accepted, then every URL's fetch failed with httpx's LocalProtocolError."""
    file = tmp_path / "config.yaml"
    file.write_text("")
    with pytest.raises(ConfigError, match=r"ingest\.user_agent: must be one line of printable"):
        load_settings(file, environ={"BOT_INGEST__USER_AGENT": agent})
    file.write_text("ingest:\n  user_agent: 'docbot/1.0 (+https://wiki.example.com/bot)'\n")
    assert load_settings(file, environ={}).ingest.user_agent.startswith("docbot/1.0 (+https")


def test_an_option_of_another_type_of_source_is_an_error(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text(
        "sources:\n  handbook: {type: files, location: [docs], branch: main, spaces: [ENG]}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(file, environ={})
    assert str(caught.value) == (
        "invalid configuration: sources.handbook: branch, spaces: not an option of a files "
        f"source (its options: base_url, exclude, include), from {file}"
    )


@pytest.mark.parametrize("schedule", ["0 0 31 2 *", "0 4 31 4,6,9,11 *", "0 0 30 2 *"])
def test_a_schedule_that_never_runs_is_refused_at_load(schedule: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"BOT_KEYWORDS__PRUNE_SCHEDULE": schedule})
    assert str(caught.value).startswith(
        "invalid configuration: keywords.prune_schedule: this schedule never runs"
    )
    leap_day = load_settings(environ={"BOT_KEYWORDS__PRUNE_SCHEDULE": "0 0 29 2 *"})
    assert leap_day.keywords.prune_schedule == "0 0 29 2 *"  # rare, but it runs


def test_paths_start_from_the_home_directory_as_in_a_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    file = tmp_path / "config.yaml"
    file.write_text(
        "storage:\n  data_dir: ~/docbot-data\n"
        "sources:\n  runbooks: {type: files, location: [~/runbooks]}\n"
    )
    s = load_settings(file, environ={"BOT_EMBEDDINGS__CACHE_PATH": "~/cache.sqlite"})
    assert s.storage.data_dir == tmp_path / "docbot-data"
    assert s.embedding_cache_path == tmp_path / "cache.sqlite"
    assert s.sources["runbooks"].location == [str(tmp_path / "runbooks")]
    from_env = load_settings(environ={"BOT_STORAGE__DATA_DIR": "~/x"})
    assert from_env.storage.data_dir == tmp_path / "x"


def test_an_unknown_users_home_is_the_settings_error() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"BOT_STORAGE__DATA_DIR": "~nosuchuser-docbot/data"})
    assert str(caught.value).startswith("invalid configuration: storage.data_dir: ")
    assert "from BOT_STORAGE__DATA_DIR" in str(caught.value)


def test_an_error_names_where_the_bad_value_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no config.yaml here
    with pytest.raises(ConfigError) as from_env:
        load_settings(environ={"BOT_SEARCH__RRF_K": "0"})
    assert str(from_env.value).endswith("(got 0), from BOT_SEARCH__RRF_K")
    assert "config.yaml" not in str(from_env.value)

    file = tmp_path / "mine.yaml"
    file.write_text("ingest:\n  chunk_chars: 200\nsearch:\n  top_k: 0\n")
    with pytest.raises(ConfigError) as both:
        load_settings(file, environ={"BOT_INGEST__CHUNK_OVERLAP_CHARS": "300"})
    header, *problems = str(both.value).splitlines()
    assert header == "invalid configuration:"
    assert sorted(line.strip() for line in problems) == [
        "ingest: chunk_overlap_chars must be smaller than chunk_chars, "
        f"from {file} and BOT_INGEST__CHUNK_OVERLAP_CHARS",
        f"search.top_k: Input should be greater than or equal to 1 (got 0), from {file}",
    ]


def test_a_variable_that_only_starts_like_a_section_is_left_alone() -> None:
    # `sources` takes any name, and `slack` has no `token`: neither is a misspelt key.
    assert load_settings(environ={"BOT_SOURCES_DIR": "/x", "BOT_SLACK_TOKEN": "t"}).sources == {}


def test_secrets_are_not_read_from_bot_variables() -> None:
    """`BOT_SECRETS__...` used to be dropped without a word: the key would silently be unset."""
    with pytest.raises(ConfigError, match="BOT_SECRETS__ANTHROPIC_API_KEY: secrets are read only"):
        load_settings(environ={"BOT_SECRETS__ANTHROPIC_API_KEY": "sk-x"})


def test_a_thread_read_back_must_fit_the_history_budget() -> None:
    """Over the budget, the engine keeps only the start of the turn, and the thread's latest
    messages (at its end) would never reach the model."""
    with pytest.raises(ConfigError, match=r"slack\.thread_context_chars"):
        load_settings(
            environ={
                "BOT_ANSWERS__HISTORY_TOKEN_BUDGET": "500",
                "BOT_SLACK__THREAD_CONTEXT_CHARS": "6000",
            }
        )
    fits = {"BOT_ANSWERS__HISTORY_TOKEN_BUDGET": "2000", "BOT_SLACK__THREAD_CONTEXT_CHARS": "6000"}
    assert load_settings(environ=fits).slack.thread_context_chars == 6_000
    over = {
        "BOT_ANSWERS__HISTORY_TOKEN_BUDGET": "2000",
        "BOT_DISCORD__THREAD_CONTEXT_CHARS": "9000",
    }
    with pytest.raises(ConfigError, match=r"discord\.thread_context_chars"):
        load_settings(environ=over)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("learned", "the label of what the bot learns from the web"),
        ("docs", "the label `bot ingest` gives what it ingests without --source"),
    ],
)
def test_a_source_may_not_take_a_label_another_writer_owns(name: str, why: str) -> None:
    """A source's sync prunes every document of its label: named `learned` it would delete
    what the bot learned, named as `bot ingest`'s label everything ingested by hand."""
    sources = json.dumps({name: {"type": "files", "location": ["docs"]}})
    with pytest.raises(ConfigError, match=re.escape(why)):
        load_settings(environ={"BOT_SOURCES": sources})


def test_a_bare_off_is_the_trigger_off_and_other_bare_switches_say_to_quote(
    tmp_path: Path,
) -> None:
    """YAML 1.1 reads `trigger: off`, as config.yaml's own comment writes it, as false: it was
    refused with "should be 'mention', 'auto' or 'off' (got False)"."""
    file = tmp_path / "config.yaml"
    file.write_text("channels:\n  default:\n    trigger: off\n")
    assert load_settings(file, environ={}).policy("slack/T1/C1").trigger == "off"
    said = refusal(file, 'channels:\n  policies:\n    "slack/T1/C1": {followups: yes}\n')
    assert "(got True: YAML reads a bare yes, no, on or off as true/false; quote it)" in said


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ("anthropic", "model"),
        ("openai", "model"),
        ("web_search", "model"),
        ("elasticsearch", "username"),
    ],
)
def test_a_key_pasted_where_a_name_goes_is_refused_unshown(
    tmp_path: Path, section: str, key: str
) -> None:
    """Pasted beside the comment naming its variable, a key was accepted as the model's name:
    shown by `bot doctor`, written into every answer's trace and the answer log."""
    pasted = "sk-ant-api03-SECRETVALUEabcdefghijkl"
    said = refusal(tmp_path / "config.yaml", f"{section}:\n  {key}: {pasted}\n")
    assert f"{section}.{key}: a name, not a key" in said
    assert "SECRET" not in said


def test_a_models_name_that_looks_random_is_still_a_name() -> None:
    for name in ("Qwen/Qwen2.5-7B-Instruct", "unsloth/Qwen3-4B-GGUF:UD-Q4_K_XL", "gpt-4o-mini"):
        settings = load_settings(None, environ={"BOT_OPENAI__MODEL": name})
        assert settings.openai.model == name


def test_a_server_without_a_models_name_is_refused_saying_what_to_set() -> None:
    """It named no model to ask: every answer fell back to quoted passages, silently."""
    with pytest.raises(ConfigError) as refused:
        load_settings(environ={"BOT_OPENAI__BASE_URL": "http://localhost:11434/v1"})
    assert "openai.base_url is set without openai.model: set it" in str(refused.value)
    # Where Claude answers, a server left over is harmless: `bot doctor` still runs.
    both = {"BOT_OPENAI__BASE_URL": "http://localhost:11434/v1", "ANTHROPIC_API_KEY": "sk-x"}
    assert load_settings(environ=both).openai.model is None


@pytest.mark.parametrize(
    ("environ", "said"),
    [
        ({"BOT_SEARCH__SQLITE_PATH": "."}, "search.sqlite_path: . names a folder"),
        (
            {"BOT_SEARCH__SQLITE_PATH": ".bot/state.sqlite", "BOT_STORAGE__DATA_DIR": ".bot"},
            "storage.data_dir's state.sqlite and search.sqlite_path are one file",
        ),
        (
            {"BOT_EMBEDDINGS__CACHE_PATH": "x/index.sqlite", "BOT_STORAGE__DATA_DIR": "x"},
            "embeddings.cache_path and search.sqlite_path are one file",
        ),
    ],
)
def test_a_stores_file_must_be_a_file_of_its_own(environ: dict[str, str], said: str) -> None:
    """`.` failed every command with "PosixPath('.') has an empty name"; the state file named
    as the index got the index's tables, and only it can't be made again."""
    with pytest.raises(ConfigError) as refused:
        load_settings(environ=environ)
    assert said in str(refused.value)


@pytest.mark.parametrize("base", ["https://wiki.example/docs?view=1", "https://wiki.example/d#top"])
def test_a_base_for_links_holds_no_query_or_fragment(base: str) -> None:
    """Each file's path is added after it: `…/docs?view=1/setup.md` opens nothing."""
    with pytest.raises(ConfigError, match=r"ingest\.base_url: a base for citation links can't"):
        load_settings(environ={"BOT_INGEST__BASE_URL": base})


def test_a_key_left_out_and_a_rule_across_sections_name_the_file(tmp_path: Path) -> None:
    """A required key left out named no file (it is in none), and a rule across sections was
    reported at "(top level)"."""
    file = tmp_path / "s3.yaml"
    left_out = refusal(file, "sources:\n  a: {type: files}\n")
    assert left_out == f"invalid configuration: sources.a.location: Field required, from {file}"
    across = refusal(file, "sources:\n  docs: {type: files, location: [x]}\n")
    assert across.startswith("invalid configuration: source 'docs' has the label `bot ingest`")
    assert across.endswith(f"; name the source otherwise, from {file}")


def test_a_git_file_views_pattern_may_hold_its_path_in_a_query() -> None:
    """Azure DevOps and Bitbucket Server show a file at `...?path=/{path}`: refused as a
    link base, every command failed on a configuration that had worked."""
    view = "https://dev.azure.com/acme/handbook/_git/docs?path=/{path}&version=GB{branch}"
    sources = {
        "repo": {"type": "git", "location": ["https://dev.azure.com/x.git"], "web_url": view}
    }
    settings = load_settings(environ={"BOT_SOURCES": json.dumps(sources)})
    assert settings.sources["repo"].web_url == view
