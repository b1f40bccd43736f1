"""relay.config.environment: RELAY_ variables read by pydantic-settings. A value stays the exact string given
(YAML would have made `1234` a number, `yes` a boolean, `2024-01-01` a date and `null` nothing); lists are
JSON; `RELAY_<KEY>_FILE` reads a secret from a file; every problem comes at once, never a secret's value."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay.config import ConfigError, load_config, read_config

pytestmark = pytest.mark.dated


@pytest.mark.parametrize("raw", ["1234", "0x1f", "yes", "no", "on", "2024-01-01", "~", "null", "1e3", "12:30"])
def test_a_string_key_gets_the_exact_string(raw: str) -> None:
    config = load_config(None, environ={"RELAY_PLATFORM__ACCESS_TOKEN": raw, "RELAY_SERVER__HOST": raw})
    assert config.platform.access_token == raw
    assert config.server.host == raw


def test_values_that_are_not_strings_still_convert() -> None:
    config = load_config(
        None,
        environ={
            "RELAY_SERVER__PORT": "9000",
            "RELAY_WORKERS": "3",
            "RELAY_TEMPLATES__BUILTIN": "true",
            "RELAY_RETRY__BACKOFF": '["1s", "2m"]',
            "RELAY_SERVER__AUTH__TOKENS": '["1234", "yes"]',
            "RELAY_CHANNELS": '{"ops": {"url": "json://sink:8025/"}}',
            "RELAY_CHANNELS__OPS__PER_RECIPIENT": "true",
        },
    )
    assert config.server.port == 9000
    assert config.workers == 3
    assert config.templates.builtin is True
    assert config.retry.backoff == [1.0, 120.0]
    assert config.server.auth.tokens == ["1234", "yes"]  # inside JSON, strings stay strings too
    assert config.channels["ops"].url == "json://sink:8025/" and config.channels["ops"].per_recipient


def test_nested_keys_and_a_digest_shorthand() -> None:
    config = load_config(
        None,
        environ={
            "RELAY_PLATFORM__ACCESS_TOKEN": "t-1",
            "RELAY_SERVER__AUTH__HEADER": "X-Token",
            "RELAY_CHANNELS__OPS__URL": "json://sink:8025/",
            "RELAY_ROUTES": '[{"channels": ["ops"], "digest": "15m"}]',
        },
    )
    assert config.platform.access_token == "t-1"
    assert config.server.auth.header == "X-Token"
    assert config.routes[0].digest is not None and config.routes[0].digest.window == 900


def test_a_secret_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("s3cr3t-from-a-file\n", encoding="utf-8")
    (tmp_path / "slack").write_text("slack://T/B/C\r\n", encoding="utf-8")
    (tmp_path / "port").write_text("9001\n", encoding="utf-8")
    config = load_config(
        None,
        environ={
            "RELAY_PLATFORM__ACCESS_TOKEN_FILE": str(tmp_path / "token"),
            "RELAY_CHANNELS__OPS__URL_FILE": str(tmp_path / "slack"),
            "RELAY_SERVER_PORT_FILE": str(tmp_path / "port"),  # any key, in either spelling
        },
    )
    assert config.platform.access_token == "s3cr3t-from-a-file"
    assert config.channels["ops"].url == "slack://T/B/C"
    assert config.server.port == 9001


def test_a_secret_file_for_a_key_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("platform: {url: https://p.example.com, access_token: from-the-file}\n", encoding="utf-8")
    (tmp_path / "token").write_text("from-the-secret\n", encoding="utf-8")
    config = load_config(path, environ={"RELAY_PLATFORM__ACCESS_TOKEN_FILE": str(tmp_path / "token")})
    assert config.platform.access_token == "from-the-secret"
    assert config.platform.url == "https://p.example.com"


def test_an_unreadable_secret_file_is_named_with_its_variable(tmp_path: Path) -> None:
    (tmp_path / "binary").write_bytes(b"\xff\xfe secret")
    found = read_config(
        None,
        environ={
            "RELAY_PLATFORM__ACCESS_TOKEN_FILE": str(tmp_path / "missing"),
            "RELAY_PREFERENCES__SECRET_FILE": str(tmp_path / "binary"),
        },
    )
    assert found.config is None
    assert found.problems == [
        f"RELAY_PLATFORM__ACCESS_TOKEN_FILE: cannot read the file '{tmp_path / 'missing'}' it names: "
        "No such file or directory",
        f"RELAY_PREFERENCES__SECRET_FILE: the file '{tmp_path / 'binary'}' it names is not UTF-8 text",
    ]


def test_a_key_set_twice_from_the_environment_is_a_problem(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-the-secret\n", encoding="utf-8")
    found = read_config(
        None,
        environ={
            "RELAY_PLATFORM__ACCESS_TOKEN": "from-the-variable",
            "RELAY_PLATFORM__ACCESS_TOKEN_FILE": str(tmp_path / "token"),
        },
    )
    assert found.problems == [
        "RELAY_PLATFORM__ACCESS_TOKEN and RELAY_PLATFORM__ACCESS_TOKEN_FILE: both set platform.access_token; keep one"
    ]
    assert "from-the" not in " ".join(found.problems)


def test_file_names_that_are_no_key_are_left_alone(tmp_path: Path) -> None:
    # RELAY_WEBHOOK_TOKEN is free for ${...}; its _FILE is not read (the path does not exist).
    config = load_config(None, environ={"RELAY_WEBHOOK_TOKEN_FILE": str(tmp_path / "nope"), "RELAY_CONFIG_FILE": "x"})
    assert config.server.port == 8080


def test_every_problem_at_once_and_no_value_repeated(tmp_path: Path) -> None:
    found = read_config(
        None,
        environ={
            "RELAY_SERVER__PORT": "not-a-port",
            "RELAY_SERVER__AUTH__TOKENS": "[tok-secret-a, tok-secret-b]",  # YAML, not JSON
            "RELAY_RETRY__BACKOFF": "1s,2m",
            "RELAY_PLATFORM__ACCESS_TOKEN_FILE": str(tmp_path / "missing"),
            "RELAY_SERVER__BOGUS": "1",
        },
    )
    assert found.config is None
    text = "\n".join(found.problems)
    assert len(found.problems) == 5, text
    assert "server.port: must be a whole number" in text
    assert "server.auth.tokens: RELAY_SERVER__AUTH__TOKENS is not JSON" in text
    assert "retry.backoff: RELAY_RETRY__BACKOFF is not JSON" in text
    assert "RELAY_PLATFORM__ACCESS_TOKEN_FILE: cannot read" in text
    assert "server.bogus" in text
    assert "tok-secret" not in text


def test_the_error_of_load_config_names_them_all() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, environ={"RELAY_SERVER__PORT": "x", "RELAY_WORKERS": "y"})
    assert {p.split(":")[0] for p in err.value.problems} == {"server.port", "workers"}


SECRET_LINES = "root:$6$s3cretHash$abcdef:19000:0:99999:7:::\nsecond-secret-line\n"


@pytest.mark.parametrize(
    "variable",
    [
        "RELAY_SERVER__PATH_FILE",
        "RELAY_DEDUP_TTL_FILE",
        "RELAY_RETRY__BACKOFF_FILE",
        "RELAY_SERVER__AUTH__HMAC__TOLERANCE_FILE",
        "RELAY_SERVER__TRUSTED_PROXIES_FILE",
        "RELAY_PLATFORM__URL_FILE",
        "RELAY_PLATFORM__UI_URL_FILE",
        "RELAY_PREFERENCES__PUBLIC_URL_FILE",
        "RELAY_REDIS__URL_FILE",
    ],
)
def test_a_file_named_by_a_FILE_variable_is_never_shown_in_a_problem(tmp_path: Path, variable: str) -> None:
    """A `_FILE` variable names a secret's file: whatever the check finds wrong, the problem names the variable
    and the path, never what the file holds (an operator's slip like `..._FILE=/etc/shadow` stays private)."""
    secret = tmp_path / "secret"
    secret.write_text(SECRET_LINES, encoding="utf-8")
    found = read_config(None, {variable: str(secret)})
    text = "\n".join(found.problems)
    assert found.problems, variable
    assert "s3cretHash" not in text and "second-secret-line" not in text, text


def test_a_bare_password_file_for_the_redis_url_is_not_echoed_in_the_hint(tmp_path: Path) -> None:
    secret = tmp_path / "redis-password"
    secret.write_text("hunter2-redis\n", encoding="utf-8")
    [problem] = read_config(None, {"RELAY_REDIS__URL_FILE": str(secret)}).problems
    assert "hunter2-redis" not in problem and f"RELAY_REDIS__URL_FILE={secret}" in problem


def test_a_mistyped_variable_is_named_as_written_and_the_hint_is_a_variable() -> None:
    [problem] = read_config(None, {"RELAY_SERVER__PROT": "8081"}).problems
    assert problem == "server.prot: unknown key, set by RELAY_SERVER__PROT; did you mean RELAY_SERVER__PORT?"
