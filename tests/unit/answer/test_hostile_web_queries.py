"""A web query leaves the company: pasted configuration must never go out with it.

`\\bpassword` never matched after an underscore, so `DB_PASSWORD=hunter2` went out. The class
closed here: any KEY=VALUE, KEY: VALUE, KEY := VALUE, KEY => VALUE, JSON `"key": "value"`,
`--key value`, "my DB_PASSWORD is VALUE" and `NAME VALUE` (a shouted environment variable
name, a secret-looking or shouted value) whose key names a credential as a word part (after
`_`, `-`, `.` or a camelCase hump) or at its end (PGPASSWORD); and environment-variable
assignments in general; `Authorization` and Basic/Bearer credentials without a digit; and a
credential word in any case followed by a value only a password or a key looks like ("db password
Winter2024"). Ordinary questions about passwords and tokens still go out.
"""

from __future__ import annotations

import pytest

from core.answer.tools import WebSearchInput, parse_tool_input
from core.errors import ToolInputError

SECRET_REFUSAL = "looks like it contains a secret, token or key"


@pytest.mark.parametrize(
    "query",
    [
        # the four
        "ELASTICSEARCH_PASSWORD=SECRETPW",
        "DB_PASSWORD=hunter2",
        "GITHUB_TOKEN=abc12345",
        "ELASTICSEARCH_PASSWORD: Secret99",
        # the key as a word part, every way a name is joined
        "db_password: hunter",
        "db-pass=foo bar",
        "dbPassword=x fails",
        "x-api-key: abcdef",
        "APIKey=abc",
        "client_secret: abcd",
        "privateKey: MIIEvQIBADAN",
        "SLACK_BOT_TOKEN: xoxq",
        "aws.secret.key = abc",
        "auth_token := zzz",
        "Credentials: AKx9z",
        "export AWS_SECRET_ACCESS_KEY=abc",
        # ... or at its end, unseparated
        "PGPASSWORD=x psql fails",
        "mytoken=abc",
        "MYSQL_PWD=x",
        # quoted values, JSON and other languages
        "password = 'correct horse'",
        'api_key="abc def"',
        '{"password": "x"} login fails',
        "{'token': 'abc'}",
        ":password => 'x' rails",
        # plain word keys with a value that is no word
        "password: hunter2",
        "token: Zx9Qw8",
        "secret: p@ss",
        "my password is hunter2",
        "the api key was AbC123xyz",
        # command-line flags
        "--password hunter",
        "--token=abc",
        "psql --password=x",
        "--api-key abc123",
        # environment variables in general
        "NODE_ENV=production crash",
        "DATABASE_URL=x",
        # spacing and look-alike characters
        "DB_PASSWORD = hunter2",
        "DB_PASSWORD\t=\thunter2",
        "\uff24\uff22_\uff30\uff21\uff33\uff33\uff37\uff2f\uff32\uff24\uff1dhunter2",  # full width
        # "... is VALUE" after any credential name, not only after a plain word
        "my DB_PASSWORD is hunter2",
        "client_secret is Xy7abc",
        "the key is sk-abc123",
        # an environment variable's name and its value with only a space between
        "ELASTICSEARCH_PASSWORD SECRETPW",
        "export GITHUB_TOKEN abc12345",
        "PASSWORD hunter2!",
        # a credential word in lower case, its value after a space
        "db password Winter2024 postgres",
        "password P@ssw0rd rejected",
        "secret hunt3r!x",
        "apikey 3f9a8b7c6d5e4f3a2b1c",
        "login fails with token Ab12cd34",
        # the same said the other way round
        "hunter2 is my password",
        "Xy7abc99 was the token, it fails",
        # HTTP credentials, with no digit in them
        "Authorization: Basic dXNlcjpwYXNz",
        "authorization: Bearer abcdefGHIJKLmn",
    ],
)
def test_pasted_credentials_never_go_out(query: str) -> None:
    with pytest.raises(ToolInputError, match=SECRET_REFUSAL):
        parse_tool_input(WebSearchInput, {"query": query})


@pytest.mark.parametrize(
    "query",
    [
        "how do I reset my password",
        "what is a token bucket",
        "password reset email not sent",
        "jwt token: invalid signature",
        "password: requirements azure ad",
        "token: 401 error",
        "the token is invalid",
        "secret management kubernetes",
        "api key rotation best practice",
        "FATAL: password authentication failed for user",
        "ERROR: connection refused postgres",
        "max_tokens=1000 truncated output",
        "tokenizer: wordpiece",
        "--auth-type basic nginx",
        "keyboard shortcuts vscode",
        "author: jane",
        "bypass=true proxy",
        "SSL_connect: SSL_ERROR_SYSCALL curl",
        "x=5 solve equation",
        "c++ std::vector reserve",
        "ratio 16:9 video",
        "primary key vs unique key",
        "passkey support webauthn",
        "what is the password policy",
        "how do I rotate the API key",
        "token expired error",
        "basic authentication nginx",
        "bearer token authentication header",
        "Authorization: required header missing",
        "the key is important",
        "SSL_ERROR_SYSCALL when connecting",
        "password sha256 hashing",
        "password bcrypt cost 12",
        "token o200k_base tokenizer",
        "secret v2 engine vault",
        "token limit 4096",
        "password hashing with PBKDF2 in Python3",
        "API key for GPT-4o",
        "argon2 is the password hashing algorithm",
        "why is sha256 the password hash",
        "what is the password",
    ],
)
def test_questions_about_credentials_still_go_out(query: str) -> None:
    assert parse_tool_input(WebSearchInput, {"query": query}).query == query
