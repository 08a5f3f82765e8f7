"""What a pasted credential looks like, for the places that must refuse one or never show it: a
web query leaving the company, a setting that names a variable (`token_env`) holding a token
pasted in its place, the value a configuration error would echo.

By the prefixes the services issue their keys with (OpenAI's and Anthropic's `sk-`, Stripe's,
Perplexity's, Slack's `xox?-`/`xapp-`, GitHub's and GitLab's, AWS's and Google's), and, for a
key no prefix names, by shape: a long run mixing capitals, small letters and digits at random,
which no variable name or setting is written as (`ConfluenceApiToken2024` changes case five
times in 22 characters, `Xk9pQ2mT7vB4nL8rW3zYa` at nearly every one).
"""

from __future__ import annotations

import itertools
import re

# Case-insensitive, with the AWS and Google prefixes kept to their case (`Akia` is a word part).
KEY_PREFIXED = (
    r"(?:sk-|sk_live_|sk_test_|pk_live_|rk_live_|pplx-|xox[abposr]-|xapp-|ghp_|gho_|ghu_|ghs_"
    r"|ghr_|github_pat_|glpat-|(?-i:AKIA|ASIA|AIza))[A-Za-z0-9_\-]{8,}"
)
_KEY_PREFIXED = re.compile(KEY_PREFIXED, re.IGNORECASE)
_RANDOM_KEY_CHARS = 20  # capitals, small letters and digits this long: generated, not named
# A generated key changes between capital, small letter and digit at least this often (a share
# of its characters); words glued in camel case change once per word.
_RANDOM_CHANGES_SHARE = 1 / 3


def is_issued_key(value: str) -> bool:
    """Whether a value starts as the services issue their keys (`sk-ant-...`, `ghp_...`): the
    test for a name that may itself look random (`Qwen/Qwen2.5-7B-Instruct`, a model's name)."""
    return _KEY_PREFIXED.match(value.strip()) is not None


def looks_like_key(value: str) -> bool:
    """Whether a whole value is an issued key or token rather than a name or a word."""
    value = value.strip()
    if _KEY_PREFIXED.match(value):
        return True
    if len(value) < _RANDOM_KEY_CHARS:
        return False
    kinds = [_kind(c) for c in value]
    if not {"capital", "small", "digit"} <= set(kinds):
        return False
    changes = sum(a != b for a, b in itertools.pairwise(kinds))
    return changes >= len(value) * _RANDOM_CHANGES_SHARE


def _kind(char: str) -> str:
    if char.isdigit():
        return "digit"
    if char.isupper():
        return "capital"
    return "small" if char.islower() else "other"
