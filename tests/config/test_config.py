"""relay.config and relay.config.durations: YAML, ${ENV} substitution, RELAY_ overrides, validation, durations."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from relay.config import Config, ConfigError, RetryConfig, load_config
from relay.config.durations import parse_duration
from relay.core.outcome import backoff_delay

SLACK = "slack://TTTT/BBBB/CCCC"


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def load(tmp_path: Path, data: Any, environ: dict[str, str] | None = None) -> Config:
    return load_config(write(tmp_path, data), environ=environ or {})


def env_vars(monkeypatch: pytest.MonkeyPatch, **values: str) -> dict[str, str]:
    """Set variables for `${...}` in the process and return them for `environ=` too."""
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return dict(values)


# --- defaults and files -------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "# only a comment\n", "{}\n"])
def test_empty_file_gives_defaults(tmp_path: Path, text: str) -> None:
    cfg = load(tmp_path, text)
    assert cfg.server.port == 8080
    assert cfg.server.host == "127.0.0.1"
    assert cfg.server.path == "/webhook"
    assert cfg.server.max_body_bytes == 1_048_576
    assert cfg.redis.url is None
    assert cfg.dedup_ttl == 7 * 86400
    assert cfg.retry.attempts == 6
    assert cfg.retry.backoff == [10, 60, 300, 1800, 7200]
    assert cfg.channels == {}
    assert cfg.routes == []
    assert cfg.default.channels == []


def test_relative_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    sub = tmp_path / "etc"
    sub.mkdir()
    cfg = load(sub, {"templates": {"dir": "./tpl"}, "data_dir": "state"})
    assert cfg.templates_path == sub.resolve() / "tpl"
    assert cfg.data_path == sub.resolve() / "state"
    absolute = load(sub, {"data_dir": str(tmp_path / "abs")})
    assert absolute.data_path == tmp_path / "abs"


@pytest.mark.parametrize(
    ("text", "message_part"),
    [
        ("server: [unclosed\n", "not valid YAML"),
        ("- a\n- b\n", "top level must be a mapping"),
        ("just a string\n", "top level must be a mapping"),
    ],
)
def test_unreadable_files(tmp_path: Path, text: str, message_part: str) -> None:
    with pytest.raises(ConfigError, match=message_part):
        load(tmp_path, text)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "nope.yaml", environ={})


# --- ${ENV} substitution ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "env", "expected"),
    [
        ("${TOK}", {"TOK": "s3cret-token"}, "s3cret-token"),
        ("Bearer ${TOK}", {"TOK": "abcd"}, "Bearer abcd"),
        ("${A}-${B}", {"A": "one", "B": "two"}, "one-two"),
        ("${TOK:-fallback-value}", {}, "fallback-value"),
        ("${TOK:-fallback-value}", {"TOK": "from-env"}, "from-env"),
        ("${TOK:-}", {}, ""),
        ("${TOK:-}", {"TOK": ""}, ""),
        # A substituted value is not expanded again.
        ("${TOK}", {"TOK": "${OTHER}"}, "${OTHER}"),
        # Not references: left as they are.
        ("$TOK", {"TOK": "x"}, "$TOK"),
        ("${1BAD}", {}, "${1BAD}"),
        ("plain", {}, "plain"),
    ],
)
def test_env_substitution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, env: dict[str, str], expected: str
) -> None:
    for name in ("TOK", "OTHER", "A", "B"):
        monkeypatch.delenv(name, raising=False)
    environ = env_vars(monkeypatch, **env)
    cfg = load(tmp_path, {"server": {"admin_tokens": [value]}}, environ)
    assert cfg.server.admin_tokens == [expected]


def test_env_substitution_reaches_every_level(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    environ = env_vars(monkeypatch, SLACK_URL=SLACK, PASS="pw-1234", PORT="9123")
    cfg = load(
        tmp_path,
        {
            "server": {"port": "${PORT}", "auth": {"basic": {"username": "platform", "password": "${PASS}"}}},
            "channels": {"owners": {"url": "${SLACK_URL}"}},
        },
        environ,
    )
    assert cfg.channels["owners"].url == SLACK
    assert cfg.server.auth.basic is not None
    assert cfg.server.auth.basic.password == "pw-1234"
    assert cfg.server.port == 9123


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"channels": {"owners": {"url": "${RELAY_UNIT_MISSING}"}}}, "channels.owners.url"),
        ({"server": {"auth": {"tokens": ["ok", "${RELAY_UNIT_MISSING}"]}}}, "server.auth.tokens[1]"),
        ({"platform": {"access_token": "x${RELAY_UNIT_MISSING}"}}, "platform.access_token"),
        ({"data_dir": "${RELAY_UNIT_MISSING}"}, "data_dir"),
    ],
)
def test_missing_env_var_names_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: dict[str, Any], key: str
) -> None:
    monkeypatch.delenv("RELAY_UNIT_MISSING", raising=False)
    with pytest.raises(ConfigError) as err:
        load(tmp_path, data)
    assert key in str(err.value)
    assert "RELAY_UNIT_MISSING" in str(err.value)


def test_non_string_values_are_not_substituted(tmp_path: Path) -> None:
    cfg = load(tmp_path, {"server": {"port": 9001}, "retry": {"attempts": 3}})
    assert cfg.server.port == 9001
    assert cfg.retry.attempts == 3


def test_env_substitution_uses_the_given_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RELAY_UNIT_ONLY_IN_ENVIRON", raising=False)
    cfg = load(
        tmp_path,
        {"server": {"admin_tokens": ["${RELAY_UNIT_ONLY_IN_ENVIRON}"]}},
        {"RELAY_UNIT_ONLY_IN_ENVIRON": "given-token"},
    )
    assert cfg.server.admin_tokens == ["given-token"]


# --- RELAY_SECTION__KEY overrides ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "raw", "read"),
    [
        ("RELAY_SERVER__PORT", "9000", lambda c: c.server.port == 9000),
        ("RELAY_SERVER__HOST", "0.0.0.0", lambda c: c.server.host == "0.0.0.0"),
        ("RELAY_SERVER__PATH", "/hooks/in", lambda c: c.server.path == "/hooks/in"),
        ("RELAY_SERVER__ALLOW_UNAUTHENTICATED", "true", lambda c: c.server.allow_unauthenticated is True),
        ("RELAY_SERVER__AUTH__TOKENS", '["tok-a", "tok-b"]', lambda c: c.server.auth.tokens == ["tok-a", "tok-b"]),
        ("RELAY_SERVER__ADMIN_TOKENS", '["adm-1"]', lambda c: c.server.admin_tokens == ["adm-1"]),
        ("RELAY_REDIS__URL", "redis://h:6379/1", lambda c: c.redis.url == "redis://h:6379/1"),
        ("RELAY_DATA_DIR", "/var/lib/relay", lambda c: c.data_dir == "/var/lib/relay"),
        ("RELAY_DEDUP_TTL", "2h", lambda c: c.dedup_ttl == 7200),
        ("RELAY_WORKERS", "4", lambda c: c.workers == 4),
        ("RELAY_RETRY__ATTEMPTS", "3", lambda c: c.retry.attempts == 3),
        ("RELAY_RETRY__BACKOFF", '["1s", "2m"]', lambda c: c.retry.backoff == [1, 120]),
        ("RELAY_LOGGING__FORMAT", "json", lambda c: c.logging.format == "json"),
        # Case of the name does not matter after the prefix.
        ("RELAY_server__port", "9001", lambda c: c.server.port == 9001),
        # New channels can be declared from the environment.
        ("RELAY_CHANNELS__OPS__URL", SLACK, lambda c: c.channels["ops"].url == SLACK),
    ],
)
def test_env_override(tmp_path: Path, name: str, raw: str, read: Any) -> None:
    cfg = load(tmp_path, {"server": {"port": 8181}}, {name: raw})
    assert read(cfg)


def test_env_override_beats_file_and_keeps_siblings(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        {"server": {"port": 8181, "host": "10.0.0.1", "auth": {"tokens": ["file-token"]}}},
        {"RELAY_SERVER__PORT": "9000"},
    )
    assert cfg.server.port == 9000
    assert cfg.server.host == "10.0.0.1"
    assert cfg.server.auth.tokens == ["file-token"]


def test_env_override_without_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RELAY_CONFIG", raising=False)
    cfg = load_config(None, environ={"RELAY_SERVER__PORT": "9100"})
    assert cfg.server.port == 9100


@pytest.mark.parametrize(
    "name",
    [
        "RELAY_SOMETHING_ELSE",
        "RELAY_WEBHOOK_TOKEN",
        "RELAY_CONFIG",
        "RELAY_BASE_DIR",
        "RELAY_",
        "RELAY___",
        "SERVER__PORT",
        "relay_server__port",
        "XRELAY_SERVER__PORT",
    ],
)
def test_names_that_are_not_config_keys_are_ignored(tmp_path: Path, name: str) -> None:
    cfg = load(tmp_path, {"server": {"port": 8181}}, {name: "9999"})
    assert cfg.server.port == 8181
    assert cfg.base_dir == str(tmp_path.resolve())


def test_env_override_is_validated(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"server\.port"):
        load(tmp_path, {}, {"RELAY_SERVER__PORT": "not-a-port"})


def test_env_override_of_unknown_nested_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="bogus"):
        load(tmp_path, {}, {"RELAY_SERVER__BOGUS": "1"})


# --- validation ---------------------------------------------------------------------------------

CHANNELS = {"slack": {"url": SLACK}, "mail": {"url": "mailto://h.example.com", "per_recipient": True}}


@pytest.mark.parametrize(
    ("data", "message_part"),
    [
        ({"channels": CHANNELS, "routes": [{"channels": ["nope"]}]}, "routes[0].channels[0]: unknown channel 'nope'"),
        (
            {"channels": CHANNELS, "routes": [{"channels": ["slack"]}, {"channels": ["slack", "ghost"]}]},
            "routes[1].channels[1]: unknown channel 'ghost'",
        ),
        (
            {"channels": CHANNELS, "routes": [{"channels": ["slack"], "fallback": ["ghost"]}]},
            "routes[0].fallback[0]: unknown channel 'ghost'",
        ),
        ({"channels": CHANNELS, "default": {"channels": ["ghost"]}}, "default.channels[0]: unknown channel"),
        ({"channels": CHANNELS, "default": {"fallback": ["ghost"]}}, "default.fallback[0]: unknown channel"),
        ({"routes": [{"channels": ["slack"]}]}, "routes[0].channels[0]"),
        # Unknown keys are refused, at every level.
        ({"bogus": 1}, "bogus"),
        ({"server": {"prot": 8080}}, "server.prot"),
        ({"server": {"auth": {"token": ["x"]}}}, "server.auth.token"),
        ({"channels": {"slack": {"url": SLACK, "per_recipent": True}}}, "channels.slack.per_recipent"),
        ({"routes": [{"kind": ["x"]}]}, "routes[0].kind"),
        ({"retry": {"attempts": 3, "delays": [1]}}, "retry.delays"),
        ({"default": {"channels": [], "continue": True}}, "default.continue"),
        # Values.
        ({"server": {"port": 70000}}, "server.port"),
        ({"server": {"port": -1}}, "server.port"),
        ({"server": {"max_body_bytes": 0}}, "server.max_body_bytes"),
        ({"server": {"path": "webhook"}}, "must start with '/'"),
        ({"server": {"path": "/api/v1/hook"}}, "collides"),
        ({"server": {"path": "/healthz"}}, "collides"),
        ({"server": {"path": "/metrics"}}, "collides"),
        ({"retry": {"attempts": 0}}, "retry.attempts"),
        ({"retry": {"attempts": 101}}, "retry.attempts"),
        ({"retry": {"backoff": ["10s", "soon"]}}, "retry.backoff[1]"),
        ({"dedup_ttl": "7 days"}, "dedup_ttl"),
        ({"dedup_ttl": -5}, "dedup_ttl"),
        ({"channels": {"slack": {}}}, "channels.slack.url"),
        ({"channels": {"slack": {"url": SLACK, "format": "pdf"}}}, "channels.slack.format"),
        ({"redis": {"appendfsync": "no"}}, "redis.appendfsync"),
        ({"workers": 65}, "workers"),
    ],
)
def test_invalid_config_names_the_key(tmp_path: Path, data: dict[str, Any], message_part: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, data)
    assert message_part in str(err.value)


def test_route_fields_and_defaults(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        {
            "channels": CHANNELS,
            "routes": [
                {"channels": ["slack"]},
                {
                    "kinds": ["a-*"],
                    "recipient_types": ["b"],
                    "channels": ["mail"],
                    "template": "platform",
                    "continue": True,
                    "fallback": ["slack"],
                },
            ],
        },
    )
    first, second = cfg.routes
    assert (first.kinds, first.recipient_types, first.template, first.continue_, first.fallback) == (
        ["*"],
        ["*"],
        "auto",
        False,
        [],
    )
    assert (second.kinds, second.recipient_types, second.template, second.continue_, second.fallback) == (
        ["a-*"],
        ["b"],
        "platform",
        True,
        ["slack"],
    )
    assert cfg.channels["mail"].per_recipient is True
    assert cfg.channels["slack"].per_recipient is False


def test_secrets_lists_every_credential(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        {
            "server": {
                "auth": {"tokens": ["webhook-tok"], "basic": {"username": "u", "password": "basic-pw"}},
                "admin_tokens": ["admin-tok", "abc"],
            },
            "platform": {"access_token": "platform-tok"},
            "channels": {"slack": {"url": SLACK}},
        },
    )
    secrets = cfg.secrets()
    for value in ("webhook-tok", "basic-pw", "admin-tok", "platform-tok", SLACK):
        assert value in secrets
    # Too short to scrub safely.
    assert "abc" not in secrets


# --- durations ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("10s", 10),
        ("1m", 60),
        ("5m", 300),
        ("2h", 7200),
        ("7d", 604800),
        ("1w", 604800),
        ("1h30m", 5400),
        ("1d2h3m4s", 93784),
        ("1m5s", 65),
        ("500ms", 0.5),
        ("1s500ms", 1.5),
        ("1.5h", 5400),
        ("0s", 0),
        ("30", 30),
        ("2.5", 2.5),
        (" 10S ", 10),
        ("2H", 7200),
        (45, 45),
        (0, 0),
        (1.25, 1.25),
    ],
)
def test_parse_duration(value: Any, seconds: float) -> None:
    result = parse_duration(value)
    assert isinstance(result, float)
    assert result == pytest.approx(seconds)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        "abc",
        "10x",
        "s",
        "m10",
        "-5s",
        "1h 30m",
        "1h,30m",
        "1m30",
        "10 s",
        "1e3s",
        "h1",
        "1.s",
        -1,
        -0.5,
        True,
        False,
    ],
)
def test_parse_duration_refuses(value: Any) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(value)


def test_parse_duration_refuses_nan() -> None:
    with pytest.raises(ValueError):
        parse_duration(math.nan)


@pytest.mark.parametrize(
    ("field", "raw", "seconds"),
    [
        ("dedup_ttl", "10s", 10),
        ("dedup_ttl", "1m", 60),
        ("dedup_ttl", "2h", 7200),
        ("dedup_ttl", "7d", 604800),
        ("dedup_ttl", "1h30m", 5400),
        ("dedup_ttl", 90, 90),
        ("retention", "30d", 2592000),
        ("send_timeout", "500ms", 0.5),
    ],
)
def test_durations_in_config(tmp_path: Path, field: str, raw: Any, seconds: float) -> None:
    cfg = load(tmp_path, {field: raw})
    assert getattr(cfg, field) == pytest.approx(seconds)


def test_platform_durations(tmp_path: Path) -> None:
    cfg = load(tmp_path, {"platform": {"jwt_duration": "1h", "cache_ttl": "5m", "timeout": "2s"}})
    assert (cfg.platform.jwt_duration, cfg.platform.cache_ttl, cfg.platform.timeout) == (3600, 300, 2)


# --- retry --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("backoff", "attempt", "delay"),
    [
        (["10s", "1m", "5m", "30m", "2h"], 1, 10),
        (["10s", "1m", "5m", "30m", "2h"], 2, 60),
        (["10s", "1m", "5m", "30m", "2h"], 3, 300),
        (["10s", "1m", "5m", "30m", "2h"], 5, 7200),
        # The last step repeats.
        (["10s", "1m", "5m", "30m", "2h"], 6, 7200),
        (["10s", "1m", "5m", "30m", "2h"], 50, 7200),
        (["1m"], 1, 60),
        (["1m"], 9, 60),
        ([], 1, 0),
        ([], 7, 0),
    ],
)
def test_retry_delay_after(tmp_path: Path, backoff: list[str], attempt: int, delay: float) -> None:
    cfg = load(tmp_path, {"retry": {"attempts": 10, "backoff": backoff}})
    assert backoff_delay(cfg.retry.backoff, attempt) == delay


def test_retry_defaults() -> None:
    retry = RetryConfig()
    assert [backoff_delay(retry.backoff, n) for n in range(1, 8)] == [10, 60, 300, 1800, 7200, 7200, 7200]


@pytest.mark.parametrize(
    ("name", "value", "read"),
    [
        ("RELAY_SERVER_PORT", "9001", lambda c: c.server.port == 9001),
        ("RELAY_REDIS_URL", "redis://h:6379/1", lambda c: c.redis.url == "redis://h:6379/1"),
        ("RELAY_DATA_DIR", "/tmp/relay-data", lambda c: c.data_dir == "/tmp/relay-data"),
        ("RELAY_SERVER_MAX_BODY_BYTES", "2048", lambda c: c.server.max_body_bytes == 2048),
        ("RELAY_SERVER_AUTH_TOKENS", '["t1", "t2"]', lambda c: c.server.auth.tokens == ["t1", "t2"]),
        ("RELAY_RETRY_ATTEMPTS", "2", lambda c: c.retry.attempts == 2),
        ("RELAY_DEDUP_TTL", "1h", lambda c: c.dedup_ttl == 3600.0),
    ],
)
def test_single_underscore_overrides_are_matched_against_the_keys(name: str, value: str, read: Any) -> None:
    assert read(load_config(None, environ={name: value}))


def test_names_that_are_no_key_are_left_alone() -> None:
    config = load_config(None, environ={"RELAY_WEBHOOK_TOKEN": "x", "RELAY_SERVER_NOPE": "1", "RELAY_CONFIG": "y"})
    assert config.server.port == 8080


def test_every_problem_is_reported_with_its_key_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RELAY_UNIT_MISSING", raising=False)
    data = {
        "server": {"port": "many"},
        "platform": {"access_token": "${RELAY_UNIT_MISSING}"},
        "channels": CHANNELS,
        "routes": [{"channels": ["slack"]}, {"channels": ["slack"], "fallback": ["mail", "ghost"]}],
        "default": {"channels": ["nowhere"]},
    }
    with pytest.raises(ConfigError) as err:
        load(tmp_path, data)
    problems = err.value.problems
    assert problems[0] == "platform.access_token: environment variable RELAY_UNIT_MISSING is not set"
    assert problems[1].startswith("server.port: ")
    assert problems[1] == "server.port: must be a whole number"
    assert problems[2:] == [
        "routes[1].fallback[1]: unknown channel 'ghost'; the channels defined are: mail, slack",
        "default.channels[0]: unknown channel 'nowhere'; the channels defined are: mail, slack",
    ]


def test_a_model_built_directly_still_refuses_unknown_channels() -> None:
    with pytest.raises(ValueError, match=r"routes\[0\]\.channels\[0\]: unknown channel 'ghost'"):
        Config.model_validate({"routes": [{"channels": ["ghost"]}]})
