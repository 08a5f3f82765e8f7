"""The tools the model may call, their JSON schemas, and strict validation of what it sends.

Model output is untrusted input: every tool call is validated (types, lengths, allowed values,
no control characters) before anything runs, and a bad call comes back to the model as an
`is_error` result it can act on, never as an exception that ends the answer.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import ErrorDetails

from core.domain.learned import normalise_keyword
from core.domain.secrets import KEY_PREFIXED
from core.errors import InvalidKeyword, ToolInputError

SEARCH_TOOL = "search_knowledge_base"
WEB_SEARCH_TOOL = "web_search"
SAVE_KEYWORDS_TOOL = "save_keywords"
RESPOND_TOOL = "respond"
TOOL_NAMES = frozenset({SEARCH_TOOL, WEB_SEARCH_TOOL, SAVE_KEYWORDS_TOOL, RESPOND_TOOL})
UNKNOWN_TOOL = "unknown"  # what a call to any other name is counted as

MAX_QUERY_CHARS = 300
MAX_ANSWER_CHARS = 12_000
MAX_QUOTE_CHARS = 500
MAX_CITATIONS = 20
MAX_KEYWORDS_PER_SAVE = 10

_M = TypeVar("_M", bound="BaseModel")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# What must never leave in a web query: links, e-mail addresses, and anything shaped like a
# credential (known token prefixes, key=value secrets, private keys, long random-looking runs).
_URL = re.compile(
    r"\b[a-z][a-z0-9+.-]*://"  # any scheme: http, postgres, redis, file, ...
    r"|\bwww\.\S"
    r"|\b[\w.-]+(?:\.[a-z][\w-]*)+(?::\d+|/\S)"  # a host name with a port or a path
    r"|\b\d{1,3}(?:\.\d{1,3}){3}\b"  # an IPv4 address
    r"|\b(?:[0-9a-f]{1,4}:){3,7}[0-9a-f]{1,4}\b"  # an IPv6 address, in full
    r"|\b[0-9a-f]{1,4}::(?:[0-9a-f]{1,4}:?){1,6}\b",  # ... or shortened
    re.IGNORECASE,
)
_CREDENTIALS = re.compile(r"\S+:\S+@\S+|(?:^|\s)-p\S{4,}")  # user:password@host, -pSECRET
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}\b")
_SECRET = re.compile(
    rf"\b{KEY_PREFIXED}"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY"
    # Basic/Bearer and a credential: no plain word (`basic authentication`), but anything with a
    # digit, a base64 symbol or a capital after a small letter (`Basic dXNlcjpwYXNz`).
    r"|\b(?:bearer|basic)\s+(?=[A-Za-z0-9._~+/=-]*(?-i:[\d+/=]|[a-z][A-Za-z0-9._~+/=-]*[A-Z]))"
    r"[A-Za-z0-9._~+/=-]{12,}",
    re.IGNORECASE,
)
_LONG_RUN = re.compile(r"[A-Za-z0-9+/=_-]{32,}")
# Pasted configuration: `KEY=VALUE`, `KEY: VALUE`, `KEY := VALUE`, `:key => VALUE`, `"key": "v"`,
# `--key VALUE`, "my DB_PASSWORD is VALUE", `export DB_PASSWORD VALUE`. A key names a
# credential when one of its word parts (split at _ - . and camelCase: DB_PASSWORD, dbPassword,
# x-api-key) is a credential word, or when it ends in a long one (PGPASSWORD, mytoken);
# `\bpassword` alone never matched after `_`.
_ASSIGNMENT = re.compile(
    r"(?P<quote>[\"']?)(?P<key>[A-Za-z][\w.-]*)(?P=quote)[ \t]*(?P<op>=>|:=|=|:(?!:))[ \t]*"
    r"(?P<value>\"[^\"]*\"?|'[^']*'?|[^\s,;]*)"
)
_FLAG = re.compile(r"(?<!\S)--?(?P<key>[A-Za-z][\w-]*)[ \t]+(?P<value>[^\s-]\S*)")
_SAID = re.compile(
    r"(?<![\w.-])(?P<key>[\w.-]+)[ \t]+(?:is|was)[ \t]+(?P<value>\S+)", re.IGNORECASE
)
# The same said the other way round, the credential ending its clause: "hunter2 is my password"
# (not "argon2 is the password hashing algorithm": a word after it makes it a compound).
_SAID_BACKWARDS = re.compile(
    r"(?<![\w.-])(?P<value>\S+)[ \t]+(?:is|was)[ \t]+(?:(?:my|our|your|the|its)[ \t]+)?"
    r"(?P<key>[\w.-]+)(?=[ \t]*(?:[.,;:!?)]|$))",
    re.IGNORECASE,
)
# An environment variable's name and its value with only a space between (a shell's `export
# NAME VALUE` typo, a pasted table): the value is looked at from every name, overlapping.
_ENV_PAIR = re.compile(r"(?<![\w.-])(?P<key>[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)[ \t]+(?=(?P<value>\S+))")
# A credential word in any case, then its value with only a space between ("db password
# Winter2024"): read from every word, overlapping, as `_ENV_PAIR` is.
_WORD_PAIR = re.compile(r"(?<![\w.-])(?P<key>[A-Za-z][\w-]*)[ \t]+(?=(?P<value>\S+))")
_KEY_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_ENV_VAR = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*")
_CREDENTIAL_WORDS = frozenset(
    {
        "password", "passwords", "passwd", "pwd", "pass", "passphrase", "secret", "secrets",
        "token", "key", "apikey", "auth", "credential", "credentials", "cred", "creds",
        "private", "privatekey", "authorization",
    }
)  # fmt: skip
# Named outright by these, a flag's value is a secret whatever it looks like (`--auth-type
# basic` is not; `--password hunter` is).
_STRONG_CREDENTIAL_WORDS = frozenset(
    {"password", "passwd", "pwd", "passphrase", "secret", "token", "apikey"}
)
_CREDENTIAL_ENDINGS = ("password", "passwd", "passphrase", "secret", "token", "apikey")
_PASSWORD_SYMBOLS = frozenset("!@#$%^&*+=~?")
_KEY_RUN_CHARS = 16  # letters and digits this long after "key": a key, not a version
_MIN_SECRET_CHARS = 4  # "401" after "token:" is a status code, "hunter2" a password
_TRAILING_PUNCTUATION = ".,;:!?)"


def required_tool(round_number: int, max_rounds: int, failures: int) -> str | None:
    """Which tool the model must call this round; None lets it choose among all tools.

    Round 1 must search (the knowledge base is always consulted, with the model's own query);
    the last allowed round, and any round after a failed answer, must respond.
    """
    if round_number == 1:
        return SEARCH_TOOL
    if round_number >= max_rounds or failures:
        return RESPOND_TOOL
    return None


def _no_control_characters(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    return value


class SearchInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=2, max_length=MAX_QUERY_CHARS)

    @field_validator("query")
    @classmethod
    def _clean(cls, value: str) -> str:
        value = _no_control_characters(value).strip()
        if len(value) < 2:
            raise ValueError("must have at least 2 non-blank characters")
        return value


def _key_parts(key: str) -> list[str]:
    return [part.lower() for part in _KEY_PART.findall(key)]


def _names_credential(key: str, words: frozenset[str] = _CREDENTIAL_WORDS) -> bool:
    parts = _key_parts(key)
    return any(p in words for p in parts) or any(p.endswith(_CREDENTIAL_ENDINGS) for p in parts)


def _looks_secret(value: str) -> bool:
    """A value that is no plain word: quoted, or with a digit, a symbol or inner capitals
    (`hunter2`, `Secret99`, `p@ss`), not `invalid` after "token:"."""
    if value[:1] in ("'", '"'):
        return True
    value = value.rstrip(_TRAILING_PUNCTUATION)
    return len(value) >= _MIN_SECRET_CHARS and (
        any(c.isdigit() or not c.isalnum() for c in value)
        or (any(c.isupper() for c in value[1:]) and any(c.islower() for c in value))
    )


def _pastes_configuration(query: str) -> bool:
    """Whether the query carries a credential's value or an environment variable's setting."""
    for match in _ASSIGNMENT.finditer(query):
        key, op, value = match.group("key", "op", "value")
        # DB_PASSWORD, dbPassword, "password": a name from a file, not a word of a sentence.
        identifier = bool(match.group("quote")) or any(c in key for c in "_-.")
        identifier = identifier or key not in (key.lower(), key.capitalize())
        if op != ":":  # =, :=, =>: an assignment, whatever its value
            if _names_credential(key) or (value and len(key) > 1 and _ENV_VAR.fullmatch(key)):
                return True
        elif value and _names_credential(key) and (identifier or _looks_secret(value)):
            return True
    for match in _FLAG.finditer(query):
        if _names_credential(match.group("key")) and (
            _names_credential(match.group("key"), _STRONG_CREDENTIAL_WORDS)
            or _looks_secret(match.group("value"))
        ):
            return True
    if any(
        _names_credential(m.group("key")) and _looks_secret(m.group("value"))
        for pattern in (_SAID, _SAID_BACKWARDS)
        for m in pattern.finditer(query)
    ):
        return True
    # `ELASTICSEARCH_PASSWORD SECRETPW`: a shouted value after a shouted name is no sentence.
    if any(
        _names_credential(m.group("key"))
        and (_looks_secret(m.group("value")) or _shouted(m.group("value")))
        for m in _ENV_PAIR.finditer(query)
    ):
        return True
    return any(
        _names_credential(m.group("key"), _STRONG_CREDENTIAL_WORDS)
        and _password_shaped(m.group("value"))
        for m in _WORD_PAIR.finditer(query)
    )


def _password_shaped(value: str) -> bool:
    """A value only a password or a key looks like, even after a lower-case "password" in a
    sentence: small and capital letters with digits (`Winter2024`), letters and digits with a
    symbol (`hunt3r!x`), or a long run of letters and digits (`3f9a8b7c6d5e4f3a2b1c`). Letters
    and digits alone (`sha256`, `o200k`) are how algorithms and versions are named, so "password
    sha256 hashing" still goes out."""
    value = value.rstrip(_TRAILING_PUNCTUATION)
    letters = any(c.isalpha() for c in value)
    digits = any(c.isdigit() for c in value)
    if not (letters and digits):
        return False
    cased = any(c.isupper() for c in value) and any(c.islower() for c in value)
    symbol = any(c in _PASSWORD_SYMBOLS for c in value)
    return cased or symbol or (len(value) >= _KEY_RUN_CHARS and value.isalnum())


def _shouted(value: str) -> bool:
    value = value.rstrip(_TRAILING_PUNCTUATION)
    return len(value) >= _MIN_SECRET_CHARS and value.isupper()


def _looks_random(run: str) -> bool:
    """A long run mixing letters and digits: a key, a token or a hash, not a search term."""
    return any(c.isdigit() for c in run) and any(c.isalpha() for c in run)


class WebSearchInput(SearchInput):
    """A web query leaves the company: it must be the model's own search terms, nothing pasted
    from the conversation that could carry a link, an address or a credential."""

    @field_validator("query")
    @classmethod
    def _nothing_private(cls, value: str) -> str:
        if any(unicodedata.category(c) == "Cf" for c in value):
            raise ValueError("must not contain invisible formatting characters")
        # Judged as the provider will read it: full-width `ＰＡＳＳＷＯＲＤ＝x` is `PASSWORD=x`.
        query = unicodedata.normalize("NFKC", value)
        if _URL.search(query):
            raise ValueError(
                "must not contain URLs, host names with a port or path, or IP addresses; "
                "search with words only"
            )
        if _CREDENTIALS.search(query) or _pastes_configuration(query):
            raise ValueError(
                "looks like it contains a secret, token or key; remove it and search with words"
            )
        if _EMAIL.search(query):
            raise ValueError("must not contain e-mail addresses")
        if _SECRET.search(query) or any(_looks_random(m) for m in _LONG_RUN.findall(query)):
            raise ValueError(
                "looks like it contains a secret, token or key; remove it and search with words"
            )
        return value


class SaveKeywordsInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    keywords: list[str] = Field(min_length=1, max_length=MAX_KEYWORDS_PER_SAVE)

    @field_validator("keywords")
    @classmethod
    def _normalised(cls, value: list[str]) -> list[str]:
        problems, kept = [], []
        for raw in value:
            try:
                kept.append(normalise_keyword(raw))
            except InvalidKeyword as exc:
                problems.append(str(exc))
        if problems:
            raise ValueError("; ".join(problems))
        return list(dict.fromkeys(kept))


class CitedSource(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: int = Field(ge=1, le=1_000)
    quote: str = Field(max_length=MAX_QUOTE_CHARS)

    @field_validator("quote")
    @classmethod
    def _clean(cls, value: str) -> str:
        return _no_control_characters(value)


class RespondInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: str = Field(min_length=1, max_length=MAX_ANSWER_CHARS)
    citations: list[CitedSource] = Field(default_factory=list, max_length=MAX_CITATIONS)
    status: Literal["answered", "partial", "not_found"]

    @field_validator("answer")
    @classmethod
    def _clean(cls, value: str) -> str:
        return _no_control_characters(value)


def parse_tool_input(model: type[_M], raw: Any) -> _M:
    if not isinstance(raw, dict):
        raise ToolInputError("the input must be a JSON object")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{_where(e)}: " + e["msg"].removeprefix("Value error, ") for e in exc.errors()
        )
        raise ToolInputError(f"invalid input: {problems}") from None


def _where(error: ErrorDetails) -> str:
    """Where in the input a problem is, in our own field names: an unexpected field's own name
    is the model's text (any text), and the problem's description reaches the person asking
    as the reason an answer fell back to the passages, so it is never repeated."""
    loc = error["loc"][:-1] if error["type"] == "extra_forbidden" else error["loc"]
    return ".".join(str(part) for part in loc) or "input"


SEARCH_DESCRIPTION = (
    "Search the team's knowledge base (its own documentation). Write a focused query in your own "
    "words: the key terms, product names, error codes or option names the answer would contain; "
    "not the user's whole message. Returns numbered sources; cite them by number. You may search "
    "again with a different query if the results do not answer the question."
)
WEB_SEARCH_DESCRIPTION = (
    "Search the public web. Use it only when the knowledge-base results do not answer the "
    "question: the team's own documentation is more trustworthy than the web, and the query "
    "leaves the company. Write a short, self-contained query of search terms; never include "
    "links, e-mail addresses, names of people, credentials or anything confidential from the "
    "conversation. Returns numbered web sources to cite like knowledge-base sources. After a "
    "web search you must call save_keywords before you respond."
)
SAVE_KEYWORDS_DESCRIPTION = (
    "Save keywords for what the web search taught you, so the next person who asks something "
    "related finds it in the knowledge base without a web search. Give 3 to 8 keywords, each 2 "
    "to 50 characters: specific terms a future question would contain, such as product and "
    "feature names, API or option names, error codes and messages, version numbers. Not "
    "generic words (documentation, error, how to, guide), not whole sentences."
)
RESPOND_DESCRIPTION = (
    "Give the final answer to the user. `answer` is Markdown; put [n] right after each claim, "
    "where n is the number of a source you retrieved that supports it. `citations` lists every "
    "source you cite, each with a short quote copied exactly from that source that supports the "
    "claim. `status`: answered when the sources answer the question, partial when they answer "
    "only part of it, not_found when they do not answer it (then say so plainly and do not guess)."
)


def _query_tool(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "input_schema": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": f"Search terms, 2 to {MAX_QUERY_CHARS} characters.",
                    "minLength": 2,
                    "maxLength": MAX_QUERY_CHARS,
                }
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    }


def _web_tools() -> list[dict[str, Any]]:
    return [
        _query_tool(WEB_SEARCH_TOOL, WEB_SEARCH_DESCRIPTION),
        {
            "name": SAVE_KEYWORDS_TOOL,
            "description": SAVE_KEYWORDS_DESCRIPTION,
            "input_schema": {
                "type": "object",
                "properties": {
                    "keywords": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": MAX_KEYWORDS_PER_SAVE,
                        "items": {"type": "string", "minLength": 2, "maxLength": 50},
                    }
                },
                "required": ["keywords"],
                "additionalProperties": False,
            },
        },
    ]


def tool_definitions(*, web: bool = False) -> list[dict[str, Any]]:
    """Tool definitions in the Anthropic Messages format (the OpenAI path converts them);
    `web` adds web search and keyword saving. `respond` stays last."""
    return [
        _query_tool(SEARCH_TOOL, SEARCH_DESCRIPTION),
        *(_web_tools() if web else []),
        {
            "name": RESPOND_TOOL,
            "description": RESPOND_DESCRIPTION,
            "input_schema": {
                "type": "object",
                "properties": {
                    "answer": {"type": "string", "maxLength": MAX_ANSWER_CHARS},
                    "citations": {
                        "type": "array",
                        "maxItems": MAX_CITATIONS,
                        "items": {
                            "type": "object",
                            "properties": {
                                "source": {"type": "integer", "minimum": 1},
                                "quote": {"type": "string", "maxLength": MAX_QUOTE_CHARS},
                            },
                            "required": ["source", "quote"],
                            "additionalProperties": False,
                        },
                    },
                    "status": {"type": "string", "enum": ["answered", "partial", "not_found"]},
                },
                "required": ["answer", "citations", "status"],
                "additionalProperties": False,
            },
        },
    ]
