"""Settings from where they live: `config.yaml` (or `$BOT_CONFIG`), then `BOT_SECTION__KEY`
environment overrides, then secrets, which come from the environment only (a secret-looking
key in the file is refused, so a token is never committed by mistake)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    ValidationError,
)

from core.config import Settings
from core.errors import ConfigError

ENV_PREFIX = "BOT_"


ENV_NESTING = "__"


CONFIG_ENV = "BOT_CONFIG"


DEFAULT_CONFIG_FILE = "config.yaml"


# Secret name in the environment -> attribute of `Secrets`. Only these carry credentials.
SECRET_ENV_VARS: dict[str, str] = {
    "ANTHROPIC_API_KEY": "anthropic_api_key",
    "OPENAI_API_KEY": "openai_api_key",
    "PERPLEXITY_API_KEY": "perplexity_api_key",
    "SLACK_BOT_TOKEN": "slack_bot_token",
    "SLACK_APP_TOKEN": "slack_app_token",
    "SLACK_SIGNING_SECRET": "slack_signing_secret",
    "DISCORD_TOKEN": "discord_token",
    "ELASTICSEARCH_API_KEY": "elasticsearch_api_key",
    "ELASTICSEARCH_PASSWORD": "elasticsearch_password",
}


# Conventional variables of the Elasticsearch tooling, honoured when the BOT_ form is not set.
ENV_ALIASES: dict[str, str] = {"ELASTICSEARCH_URL": "url", "ELASTICSEARCH_CLOUD_ID": "cloud_id"}


_SECRET_KEY = re.compile(r"(^|_)(token|secret|password|passwd|api_?key|credentials?)$", re.I)


def load_settings(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Read the YAML file (if any), apply environment overrides and secrets, validate."""
    env = os.environ if environ is None else environ
    explicit = path or (Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else None)
    file = explicit or Path(DEFAULT_CONFIG_FILE)
    data: dict[str, Any] = {}
    if file.exists():
        data = _read_yaml(file)
    elif explicit is not None:
        raise ConfigError(f"config file not found: {file}")
    if "secrets" in data:
        raise ConfigError(f"{file}: 'secrets' can't be set in the file; use environment variables")
    _reject_secret_keys(data, str(file))
    for key, raw in env.items():
        if key.startswith(ENV_PREFIX) and key != CONFIG_ENV:
            _apply_override(data, key, raw)
    es = data.setdefault("elasticsearch", {})
    for name, key in ENV_ALIASES.items():
        if env.get(name) and isinstance(es, dict) and es.get(key) is None:
            es[key] = env[name]
    data["secrets"] = {attr: env[name] for name, attr in SECRET_ENV_VARS.items() if env.get(name)}
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, file)) from None


def _read_yaml(file: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"can't read {file}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{file} is not valid YAML: {exc}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{file}: the top level must be a mapping of sections")
    return loaded


def _reject_secret_keys(data: Mapping[str, Any], where: str, prefix: str = "") -> None:
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            _reject_secret_keys(value, where, f"{dotted}.")
        elif _SECRET_KEY.search(str(key)) and value not in (None, ""):
            raise ConfigError(
                f"{where}: '{dotted}' looks like a secret; secrets are read only from the "
                f"environment ({', '.join(SECRET_ENV_VARS)})"
            )


def _apply_override(data: dict[str, Any], env_key: str, raw: str) -> None:
    parts = [p.lower() for p in env_key[len(ENV_PREFIX) :].split(ENV_NESTING)]
    if not all(parts):
        raise ConfigError(f"environment variable {env_key}: empty key segment")
    node = data
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"environment variable {env_key}: '{part}' is not a section")
        node = child
    try:
        node[parts[-1]] = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        node[parts[-1]] = raw


def _describe(exc: ValidationError, file: Path) -> str:
    lines = [f"invalid configuration ({file} and {ENV_PREFIX}* environment variables):"]
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            lines.append(f"  {key}: unknown key")
        else:
            got = "" if isinstance(err.get("input"), dict) else f" (got {err.get('input')!r})"
            lines.append(f"  {key}: {err['msg']}{got}")
    return "\n".join(lines)
