"""Settings from where they live: `config.yaml` (or `$BOT_CONFIG`), then `BOT_SECTION__KEY`
environment overrides, then secrets, which come from the environment only (a secret-looking
key in the file is refused, so a token is never committed by mistake)."""

from __future__ import annotations

import copy
import difflib
import os
import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml

try:  # libyaml's parser, in PyYAML's wheels: config.yaml in 4 ms instead of 50 (every command)
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # a PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]
from pydantic import BaseModel, ValidationError

from core.config import HTTP_URL_ERROR, UNSHOWN_ERROR, Settings
from core.domain.secrets import looks_like_key
from core.domain.urls import redact_url
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


# Secrets whose value is taken as given: a password may hold spaces (it travels base64-encoded).
_FREE_TEXT_SECRETS = frozenset({"ELASTICSEARCH_PASSWORD"})


# A token or API key is one word of printable ASCII, which is all an HTTP header can carry.
_ONE_WORD = re.compile(r"[\x21-\x7e]+")


_SECRET_KEY = re.compile(r"(^|_)(token|secret|password|passwd|api_?key|credentials?)$", re.I)


def settings_file(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """The settings file read: `path` (`--config`), else $BOT_CONFIG, else config.yaml here;
    what messages about the settings name."""
    env = os.environ if environ is None else environ
    return path or (Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else Path(DEFAULT_CONFIG_FILE))


def load_settings(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Read the YAML file (if any), apply environment overrides and secrets, validate."""
    env = os.environ if environ is None else environ
    explicit = path or (Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else None)
    file = settings_file(path, env)
    origins = _Origins()
    if file.exists():
        origins.file, origins.file_data = file, _read_yaml(file)
    elif explicit is not None:
        raise ConfigError(f"config file not found: {file}")
    if "secrets" in origins.file_data:
        raise ConfigError(f"{file}: 'secrets' can't be set in the file; use environment variables")
    _reject_secret_keys(origins.file_data, str(file))
    data = copy.deepcopy(origins.file_data)
    _blank_sections_as_empty(data)
    for key, raw in env.items():
        parts = _setting_of(key)
        if parts is not None:
            _apply_override(data, key, parts, raw)
            origins.env[tuple(parts)] = key
    es = data.setdefault("elasticsearch", {})
    for name, key in ENV_ALIASES.items():
        if env.get(name) and isinstance(es, dict) and es.get(key) is None:
            es[key] = env[name]
            origins.env["elasticsearch", key] = name
    data["secrets"] = _secrets(env)
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, origins)) from None


def _secrets(env: Mapping[str, str]) -> dict[str, str]:
    """The secrets the environment sets, by `Secrets` attribute. A token pasted with a space or
    a line end around it (a `.env` saved with Windows line endings, a copied line) is taken
    without it: a signing secret with a stray carriage return fails every request's signature
    check, and nothing says why. A blank one is unset, so the command says it is not set
    instead of passing the platform's refusal on. One with a break, a space or a typographic
    quote inside is refused by name (its value is never shown): the HTTP client's own error
    ("Forbidden control character detected in headers") names no variable."""
    found: dict[str, str] = {}
    for name, attr in SECRET_ENV_VARS.items():
        raw = env.get(name, "")
        if not raw.strip():
            continue
        value = raw if name in _FREE_TEXT_SECRETS else raw.strip()
        if name not in _FREE_TEXT_SECRETS and not _ONE_WORD.fullmatch(value):
            raise ConfigError(
                f"environment variable {name} has a space, a line break or a character that is "
                "not plain ASCII inside it (the value is not shown): copy the token again"
            )
        found[attr] = value
    return found


@dataclass
class _Origins:
    """Where each value came from, so an error names the file or the variable to fix: a
    stray variable is found by its name, not by the key it happened to spell."""

    file: Path | None = None  # None: no file was read
    file_data: dict[str, Any] = field(default_factory=dict)
    env: dict[tuple[str, ...], str] = field(default_factory=dict)  # key path -> variable

    def of(self, loc: tuple[str | int, ...]) -> list[str]:
        path = tuple(str(part) for part in loc)
        for n in range(len(path), 0, -1):
            if path[:n] in self.env:  # the variable replaced this value, or a section around it
                return [self.env[path[:n]]]
        named = [name for key, name in self.env.items() if key[: len(path)] == path]
        if self.file is not None and _holds(self.file_data, path):
            named.insert(0, str(self.file))
        return named


def _holds(data: Any, path: tuple[str, ...]) -> bool:
    """Whether the file wrote the value at `path` (or the value it sits in)."""
    node = data
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return not isinstance(node, (dict, list))  # a scalar: the rest is pydantic's detail
    return True


def _setting_of(env_key: str) -> list[str] | None:
    """The key path a `BOT_` variable sets, or None when it is not a setting. Only
    `BOT_SECTION__KEY` (and `BOT_SECTION`, a whole section as YAML/JSON) are settings: other
    `BOT_*` variables (`BOT_TOKEN`, `BOT_DEBUG`) belong to someone else and are left alone,
    unless they spell a real key with one underscore, a typo that would otherwise do nothing."""
    if not env_key.startswith(ENV_PREFIX) or env_key == CONFIG_ENV:
        return None
    name = env_key[len(ENV_PREFIX) :].lower()
    if ENV_NESTING in name:
        parts = name.split(ENV_NESTING)
    elif name in Settings.model_fields:
        parts = [name]
    else:
        for section, declared in Settings.model_fields.items():
            key = name.removeprefix(f"{section}_")
            # a section's own key only: `sources` takes any name, so BOT_SOURCES_DIR is not one
            known = getattr(declared.annotation, "model_fields", {})
            if key != name and key in known and section != "secrets":
                meant = f"{ENV_PREFIX}{section}{ENV_NESTING}{key}".upper()
                raise ConfigError(
                    f"environment variable {env_key} is not read: a setting is "
                    f"{ENV_PREFIX}<SECTION>{ENV_NESTING}<KEY>, with two underscores ({meant}?)"
                )
        return None
    if parts[0] == "secrets":
        raise ConfigError(
            f"environment variable {env_key}: secrets are read only from "
            f"{', '.join(SECRET_ENV_VARS)}"
        )
    return parts


_MERGE_TAG = "tag:yaml.org,2002:merge"


class _UniqueKeysLoader(_SafeLoader):
    """YAML where a key set twice in one mapping is an error: PyYAML keeps the last silently,
    so a second `search:` block would undo the first without a word."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:  # `<<: *defaults`: its keys may be overridden here
                continue
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                continue  # PyYAML's own check refuses it below
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"'{key}' is set twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _yaml_problem(file: Path, text: str, exc: yaml.YAMLError) -> str:
    """One line, `file:line:column: problem`, instead of PyYAML's five naming '<unicode
    string>'; with the fix for the commonest mistake, a tab (found where a token should
    start: libyaml's message does not name the character)."""
    if not isinstance(exc, yaml.MarkedYAMLError) or exc.problem_mark is None:
        return f"{file} is not valid YAML: {' '.join(str(exc).split())}"
    mark = exc.problem_mark
    problem = exc.problem or "not valid YAML"
    lines = text.splitlines()
    found = lines[mark.line][mark.column : mark.column + 1] if mark.line < len(lines) else ""
    if "cannot start any token" in problem and found == "\t":
        problem = "a tab: YAML is indented with spaces only"
    return f"{file}:{mark.line + 1}:{mark.column + 1}: not valid YAML: {problem}"


def _read_yaml(file: Path) -> dict[str, Any]:
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"can't read {file}: {exc}") from None
    try:
        loaded = yaml.load(text, Loader=_UniqueKeysLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_problem(file, text, exc)) from None
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


def _apply_override(data: dict[str, Any], env_key: str, parts: list[str], raw: str) -> None:
    if not all(parts):
        raise ConfigError(f"environment variable {env_key}: empty key segment")
    node = data
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"environment variable {env_key}: '{part}' is not a section")
        node = child
    node[parts[-1]] = _env_value(raw, _declared_type(parts))


def _env_value(raw: str, declared: Any) -> Any:
    """A variable's text read as its setting's type: a text setting (a string, a path, one of
    some words) takes the text as written, since YAML would turn `no` into false and
    `Hold on: searching` into a mapping; numbers, switches, lists and sections are YAML (JSON
    is YAML too). Empty, or `null` for a setting that may be unset, unsets it."""
    text = raw.strip()
    if not text:
        return None
    if declared is not None and _is_text(declared):
        return None if _is_optional(declared) and text in _YAML_NULLS else text
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


_YAML_NULLS = frozenset({"null", "Null", "NULL", "~"})


def _blank_sections_as_empty(data: dict[str, Any], parts: tuple[str, ...] = ()) -> None:
    """A section left with every key commented out (`search:` and nothing under it) reads as
    YAML's null; it means the defaults, as a section left out does, not "a section must be a
    mapping". Only where a section, or a mapping of named ones (`sources:`), is declared."""
    for key, value in data.items():
        declared = _declared_type([*parts, str(key)])
        if value is None and not _is_optional(declared):
            section = _without_none(declared)
            if get_origin(section) is dict or (
                isinstance(section, type) and issubclass(section, BaseModel)
            ):
                data[key] = {}
        elif isinstance(value, dict):
            _blank_sections_as_empty(value, (*parts, str(key)))


def _declared_type(parts: list[str]) -> Any:
    """The type `Settings` declares at a key path, or None when the path names no setting."""
    declared: Any = Settings
    for part in parts:
        declared = _without_none(declared)
        if isinstance(declared, type) and issubclass(declared, BaseModel):
            field_info = declared.model_fields.get(part)
            if field_info is None:
                return None
            declared = field_info.annotation
        elif get_origin(declared) is dict:  # `sources`, `channels.policies`: any name
            declared = get_args(declared)[1]
        else:
            return None
    return declared


def _without_none(declared: Any) -> Any:
    args = [a for a in get_args(declared) if a is not type(None)]
    if get_origin(declared) in (Union, UnionType) and len(args) == 1:
        return _without_none(args[0])
    if get_origin(declared) is Annotated:
        return _without_none(args[0])
    return declared


def _is_optional(declared: Any) -> bool:
    return get_origin(declared) in (Union, UnionType) and type(None) in get_args(declared)


def _is_text(declared: Any) -> bool:
    inner = _without_none(declared)
    if get_origin(inner) is Literal:
        return all(isinstance(word, str) for word in get_args(inner))
    return isinstance(inner, type) and issubclass(inner, (str, PurePath))


# Settings a release took away, with what to do: an upgrade's config.yaml still names them,
# and "unknown key (did you mean ...)" would send its reader looking for a typo.
RETIRED_KEYS = {
    "answers.limits.tracked_askers": "no longer used (each asker's questions are counted in "
    "the backend's store, which keeps one window of them): delete it",
}


def _did_you_mean(loc: tuple[int | str, ...]) -> str:
    """The setting of that section an unknown key is closest to, if one is close: a newcomer's
    typo (`blogpost`, `rfk_k`) says what was meant."""
    section = _without_none(_declared_type([str(part) for part in loc[:-1]]))
    if not (isinstance(section, type) and issubclass(section, BaseModel)):
        return ""
    close = difflib.get_close_matches(str(loc[-1]), list(section.model_fields), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


# The error pydantic gives a value outside a set of words (`trigger: mention|auto|off`).
_WORD_EXPECTED = "literal_error"
_LEFT_OUT = "missing"  # ... and a required key left out


def _describe(exc: ValidationError, origins: _Origins) -> str:
    problems = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        # A key left out is in no file: the section around it is (`sources.wiki`).
        sources = origins.of(err["loc"][:-1] if err["type"] == _LEFT_OUT else err["loc"])
        where = f", from {' and '.join(sources)}" if sources else ""
        if err["type"] == "extra_forbidden":
            unknown = RETIRED_KEYS.get(key) or f"unknown key{_did_you_mean(err['loc'])}"
            problems.append(f"{key}: {unknown}{where}")
            continue
        value = err.get("input")
        if "input" in err and value is None:  # `data_dir:` with nothing after it
            problems.append(
                f"{key}: left empty; give it a value, or leave it out for the default{where}"
            )
            continue
        if isinstance(value, dict) or err["type"] == UNSHOWN_ERROR:
            got = ""
        elif isinstance(value, str) and looks_like_key(value):
            got = " (got what looks like a key or token: not shown)"
        elif err["type"] == HTTP_URL_ERROR and isinstance(value, str):
            got = f" (got {redact_url(value)!r})"
        elif isinstance(value, bool) and err["type"] == _WORD_EXPECTED:
            # YAML 1.1 reads a bare yes/no/on/off as a boolean: `trigger: off` is False.
            got = f" (got {value!r}: YAML reads a bare yes, no, on or off as true/false; quote it)"
        else:
            got = f" (got {value!r})"
        message = err["msg"].removeprefix("Value error, ")
        # A rule across sections (the whole file's) names its keys in its message.
        problems.append(f"{key + ': ' if key else ''}{message}{got}{where}")
    if len(problems) == 1:
        return f"invalid configuration: {problems[0]}"
    return "\n  ".join(["invalid configuration:", *problems])
