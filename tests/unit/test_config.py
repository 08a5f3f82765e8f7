from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from core.config import Settings
from core.config_loader import load_settings
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


def test_unknown_key_is_an_error(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text("search:\n  rfk_k: 10\n")
    with pytest.raises(ConfigError, match=r"search\.rfk_k: unknown key"):
        load_settings(file, environ={})


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
