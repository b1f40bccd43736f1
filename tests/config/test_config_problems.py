"""Every config problem says where it is and how to fix it: a key written twice (both lines), a URL that
cannot work, a misspelt key or name (the nearest known one), pydantic's errors in relay's words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from relay.config import ConfigError, load_config, read_config

ROOT = Path(__file__).resolve().parents[2]


def problems_of(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> list[str]:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    found = read_config(path, environ=environ or {})
    assert found.config is None or not found.problems
    return found.problems


# --- a key written twice -------------------------------------------------------------------------


def test_a_top_level_key_written_twice_is_refused_naming_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "channels:\n"
        "  a: {url: 'json://localhost/a'}\n"
        "routes:\n"
        "  - channels: [a]\n"
        "channels:\n"
        "  b: {url: 'json://localhost/b'}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={})
    assert err.value.problems[0] == (
        f"channels: written twice in {path} (lines 1 and 5); YAML would keep only the last and silently drop the"
        " other: merge them into one `channels:`"
    )


def test_nested_keys_written_twice_are_refused_with_their_key_path(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        "channels:\n"
        "  a: {url: 'json://localhost/a'}\n"
        "  a:\n"
        "    url: 'json://localhost/b'\n"
        "    per_recipient: true\n"
        "    per_recipient: false\n"
        "routes:\n"
        "  - channels: [a]\n"
        "    kinds: ['*']\n"
        "    channels: [a]\n"
        "default: {channels: [a], channels: []}\n",
    )
    path = tmp_path / "config.yaml"
    assert problems == [
        f"channels.a: written twice in {path} (lines 2 and 3); YAML would keep only the last and silently drop the"
        " other: merge them into one `a:`",
        f"channels.a.per_recipient: written twice in {path} (lines 5 and 6); YAML would keep only the last and"
        " silently drop the other: keep one `per_recipient:` and remove the other",
        f"routes[0].channels: written twice in {path} (lines 8 and 10); YAML would keep only the last and silently"
        " drop the other: merge them into one `channels:`",
        f"default.channels: written twice in {path} (line 11 column 11 and line 11 column 26); YAML would keep only"
        " the last and silently drop the other: merge them into one `channels:`",
    ]


def test_a_merge_key_override_and_an_alias_are_no_repeat(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        "channels:\n"
        "  a: &base {url: 'json://localhost/a'}\n"
        "  b:\n"
        "    <<: *base\n"
        "    url: 'json://localhost/b'\n"
        "  c: *base\n"
        "default: {channels: [a, b, c]}\n",
    )
    assert problems == []


def docs_snippet(title: str) -> str:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = text.split(f"## {title}", 1)[1]
    found = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert found is not None
    return found.group(1)


def test_a_readme_snippet_appended_to_the_example_names_both_places(tmp_path: Path) -> None:
    example = (ROOT / "config.example.yaml").read_text(encoding="utf-8")
    snippet = docs_snippet("Two routes worth copying")
    lines = (example + snippet).splitlines()
    at = {key: [n for n, line in enumerate(lines, 1) if line.startswith(f"{key}:")] for key in ("channels", "routes")}
    assert all(len(found) == 2 for found in at.values())
    path = tmp_path / "config.yaml"
    path.write_text(example + snippet, encoding="utf-8")
    environ = {"SLACK_BOT_TOKEN": "xoxb-1-2-abc"}
    with pytest.raises(ConfigError) as err:
        load_config(path, environ=environ)
    problems = err.value.problems
    for key in ("channels", "routes"):
        assert (
            f"{key}: written twice in {path} (lines {at[key][0]} and {at[key][1]}); YAML would keep only the last"
            f" and silently drop the other: merge them into one `{key}:`"
        ) in problems


# --- URLs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        (
            "redis//localhost:6379/0",
            "redis.url: not a Redis URL (no `scheme://` at its start; it must start with redis://, rediss://, unix://"
            " or redis+sentinel://); did you mean `redis://localhost:6379/0`?",
        ),
        ("http://localhost:6379/0", "redis.url: not a Redis URL (the scheme 'http' is not a Redis one"),
        ("redis://localhost:port/0", "redis.url: not a Redis URL (Port could not be cast to integer value"),
        ("redis://localhost:6379/zero", "redis.url: the database (after the host) must be a number"),
        ("redis:///0", "redis.url: the URL names no host"),
        ("unix://", "redis.url: a unix:// URL names the socket file"),
        ("redis://h:6379/0?socket_timeout=soon", "redis.url: not a Redis URL redis-py can use (Invalid value for"),
        ("redis+sentinel://h:26379", "redis.url: a redis+sentinel:// URL names the service"),
    ],
)
def test_a_redis_url_that_cannot_work_is_refused_naming_the_key(tmp_path: Path, url: str, problem: str) -> None:
    problems = problems_of(tmp_path, f"redis: {{url: '{url}'}}\n")
    assert len(problems) == 1 and problems[0].startswith(problem), problems


@pytest.mark.parametrize(
    "url",
    [
        "redis://localhost:6379/0",
        "rediss://user:pw@redis.example.com:6380/2",
        "unix:///run/redis.sock?db=1",
        "redis+sentinel://s1:26379,s2:26379/mymaster/0",
        "",
    ],
)
def test_the_redis_urls_redis_py_takes_are_accepted(tmp_path: Path, url: str) -> None:
    assert problems_of(tmp_path, f"redis: {{url: '{url}'}}\n") == []


def test_a_bad_redis_url_never_shows_its_password(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, "redis: {url: 'redis//:Sup3rSecretPw@localhost:6379/0'}\n")
    assert problems == [
        "redis.url: not a Redis URL (no `scheme://` at its start; it must start with redis://, rediss://, unix:// or"
        " redis+sentinel://); did you mean `redis://:****@localhost:6379/0`?"
    ]


def test_a_redis_url_from_the_environment_is_checked_too(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, "{}\n", environ={"RELAY_REDIS__URL": "localhost:6379"})
    assert problems == [
        "redis.url: not a Redis URL (no `scheme://` at its start; it must start with redis://, rediss://, unix:// or"
        " redis+sentinel://); did you mean `redis://localhost:6379`?"
    ]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        (
            "platform.example.com",
            "platform.url: not an http(s) URL (no `scheme://` at its start); did you mean"
            " `https://platform.example.com`?",
        ),
        ("ftp://platform.example.com", "platform.url: not an http(s) URL (the scheme 'ftp' is not http or https)"),
        ("https://", "platform.url: the URL names no host"),
        ("https://platform.example.com:99999", "platform.url: not an http(s) URL (Port out of range"),
    ],
)
def test_a_platform_url_that_cannot_work_is_refused_naming_the_key(tmp_path: Path, url: str, problem: str) -> None:
    problems = problems_of(tmp_path, f"platform: {{url: '{url}'}}\n")
    assert len(problems) == 1 and problems[0].startswith(problem), problems
    assert problems_of(tmp_path, "platform: {url: 'https://platform.example.com/base'}\n") == []


def test_the_platform_ui_url_and_a_channel_label_are_checked_naming_the_key(tmp_path: Path) -> None:
    good = (
        "platform: {url: 'https://api.example.com', ui_url: 'https://ui.example.com/app'}\n"
        "channels:\n  people-email: {url: 'mailto://localhost', label: 'E-mail', per_recipient: true}\n"
    )
    assert problems_of(tmp_path, good) == []
    [problem] = problems_of(tmp_path, "platform: {ui_url: 'ui.example.com'}\n")
    assert problem.startswith("platform.ui_url: not an http(s) URL"), problem
    [problem] = problems_of(tmp_path, "channels:\n  e: {url: 'json://localhost/e', label: ''}\n")
    assert problem.startswith("channels.e.label:"), problem
    [problem] = problems_of(tmp_path, f"channels:\n  e: {{url: 'json://localhost/e', label: '{'x' * 61}'}}\n")
    assert problem.startswith("channels.e.label:"), problem


# --- names: the nearest known one ----------------------------------------------------------------

CHANNELS = "channels:\n  owners-slack: {url: 'json://localhost/o'}\n  requester-email: {url: 'json://localhost/r'}\n"


def test_an_unknown_key_suggests_the_nearest_known_one(tmp_path: Path) -> None:
    text = CHANNELS + (
        "routes:\n  - channels: [owners-slack]\n  - channels: [owners-slack]\n"
        "  - channels: [requester-email]\n    recipient_type: ['recipient-type:x']\n"
    )
    assert problems_of(tmp_path, text) == ["routes[2].recipient_type: unknown key; did you mean `recipient_types`?"]
    assert problems_of(tmp_path, "redis: {adress: x}\n") == [
        "redis.adress: unknown key; the keys here are: url, appendfsync, min_replicas, replica_timeout"
    ]


def test_an_unknown_channel_lists_the_defined_ones(tmp_path: Path) -> None:
    text = CHANNELS + "routes:\n  - channels: [owners-slak]\ndefault: {fallback: [pager]}\n"
    assert problems_of(tmp_path, text) == [
        "routes[0].channels[0]: unknown channel 'owners-slak'; did you mean 'owners-slack'? The channels defined"
        " are: owners-slack, requester-email",
        "default.fallback[0]: unknown channel 'pager'; the channels defined are: owners-slack, requester-email",
    ]
    assert problems_of(tmp_path, "default: {channels: [pager]}\n") == [
        "default.channels[0]: unknown channel 'pager'; no channels are defined: add it under `channels:`"
    ]


def test_an_unknown_time_interval_lists_the_defined_ones(tmp_path: Path) -> None:
    text = CHANNELS + (
        "time_intervals:\n  - name: office-hours\n  - name: change-freeze\n"
        "routes:\n  - channels: [owners-slack]\n    active_time_intervals: [office]\n"
        "    mute_time_intervals: [holidays]\n"
    )
    assert problems_of(tmp_path, text) == [
        "routes[0].active_time_intervals[0]: unknown time interval 'office'; did you mean 'office-hours'? The time"
        " intervals defined are: office-hours, change-freeze",
        "routes[0].mute_time_intervals[0]: unknown time interval 'holidays'; the time intervals defined are:"
        " office-hours, change-freeze",
    ]


# --- pydantic's errors in relay's words ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("server: {port: many}\n", "server.port: must be a whole number"),
        ("retry: {attempts: 2.5}\n", "retry.attempts: must be a whole number (it is 2.5)"),
        ("retry: {attempts: 0}\n", "retry.attempts: must be at least 1 (it is 0)"),
        ("workers: 65\n", "workers: must be at most 64 (it is 65)"),
        ("server: {max_body_bytes: 0}\n", "server.max_body_bytes: must be more than 0 (it is 0)"),
        ("server: {allow_unauthenticated: maybe}\n", "server.allow_unauthenticated: must be true or false"),
        ("server: {host: 5}\n", "server.host: must be text; put it in quotes"),
        (
            "server:\n  host:\n",
            "server.host: must be text; put it in quotes (it is empty: write a value after the colon)",
        ),
        ("server: {admin_tokens: tok}\n", "server.admin_tokens: must be a list, like [a, b]"),
        ("channels: [a]\n", "channels: must be a mapping of keys, like {key: value}"),
        ("channels: {a: {per_recipient: true}}\n", "channels.a.url: missing; this key is required"),
        ("redis: {appendfsync: never}\n", "redis.appendfsync: must be 'always' or 'everysec'"),
        ("server: {auth: {hmac: {secrets: []}}}\n", "server.auth.hmac.secrets: must have at least 1 item(s)"),
        ("routes: [{name: ''}]\n", "routes[0].name: must be at least 1 character(s) long"),
        ("server: {limits: {max_deliveries: true}}\n", "server.limits.max_deliveries: true is not a number"),
        ("channels: {a: {url: 'json://x', outage: {after: true}}}\n", "channels.a.outage.after: true is not a number"),
        ("logging: {level: LOUD}\n", "logging.level: must be 'DEBUG', 'INFO', 'WARNING', 'ERROR' or 'CRITICAL'"),
        (
            "time_intervals: [{name: x, time_intervals: [{days_of_month: [1.5]}]}]\n",
            "time_intervals[0].time_intervals[0].days_of_month[0]: must be a whole number (it is 1.5) or text",
        ),
    ],
)
def test_pydantic_errors_read_in_relays_words(tmp_path: Path, text: str, problem: str) -> None:
    problems = problems_of(tmp_path, text)
    assert len(problems) == 1 and problems[0].startswith(problem), problems
    assert "Input should" not in problems[0] and "Extra inputs" not in problems[0]


def test_a_double_equals_matcher_is_told_it_is_no_operator(tmp_path: Path) -> None:
    text = CHANNELS + (
        "routes:\n  - name: prod\n    channels: [owners-slack]\n"
        "    matchers: ['kind=\"x\"', 'body.environment==\"production\"']\n"
    )
    assert problems_of(tmp_path, text) == [
        "routes[0].matchers[1]: route 'prod', matcher 'body.environment==\"production\"': == is not an operator;"
        ' write body.environment="production" (the operators are =, !=, =~, !~)'
    ]


def test_a_yaml_syntax_error_names_the_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("server:\n  port: 8080\nroutes: [a, b\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={})
    message = str(err.value)
    assert message.startswith(f"{path}: not valid YAML at line 4, column 1: expected ',' or ']'")
    assert "line 3, column 9" in message and "<unicode string>" not in message
    path.write_text("server:\n\tport: 8080\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="YAML does not allow tabs"):
        load_config(path, environ={})
