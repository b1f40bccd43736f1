"""`relay check` and the other commands on a config with a mistake: each problem with its key path and how
to fix it, and no claim that templates were compiled that relay does not use."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay.cli import main
from relay.cli.main import INVALID_CONFIG

ROOT = Path(__file__).resolve().parents[2]
GOOD = "channels:\n  a: {url: 'json://127.0.0.1:9/a'}\ndefault: {channels: [a]}\n"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory of its own, with no RELAY_CONFIG: `relay check` reads ./config.yaml only."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RELAY_CONFIG", raising=False)
    return tmp_path


def test_check_refuses_keys_written_twice_naming_both_lines(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (here / "config.yaml").write_text(
        GOOD + "routes:\n  - channels: [a]\n    channels: [a]\nchannels:\n  b: {url: 'json://127.0.0.1:9/b'}\n"
    )
    assert main(["check"]) == 1
    err = capsys.readouterr().err
    assert "error channels: written twice in config.yaml (lines 1 and 7); YAML would keep only the last" in err
    assert "error routes[0].channels: written twice in config.yaml (lines 5 and 6)" in err
    # What YAML kept is checked too, after: the routes now name a channel that the first block defined.
    assert err.index("written twice") < err.index("error routes[0].channels[0]: unknown channel 'a'")
    assert "4 problem(s) found" in err

    # Every command reads the config through the same loader: it refuses the file too.
    assert main(["status", "some-event"]) == INVALID_CONFIG
    assert "channels: written twice in config.yaml (lines 1 and 7)" in capsys.readouterr().err


def test_a_bad_redis_url_is_named_by_check_and_by_status(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (here / "config.yaml").write_text(GOOD + "redis: {url: 'redis//localhost:6379/0'}\n")
    assert main(["check"]) == 1
    assert "error redis.url: not a Redis URL" in capsys.readouterr().err
    # Before, `relay status` got as far as redis-py and failed with no key path.
    assert main(["status", "some-event"]) == INVALID_CONFIG
    err = capsys.readouterr().err
    assert "redis.url: not a Redis URL" in err and "did you mean `redis://localhost:6379/0`?" in err


def test_a_yaml_error_names_the_file(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (here / "config.yaml").write_text("channels:\n  a: {url: 'json://x'\n")
    assert main(["check"]) == 1  # a problem with the config, as a schema error is (docs/http-api.md)
    err = capsys.readouterr().err
    assert err.startswith("error config.yaml: not valid YAML at line 3, column 1:")
    assert "<unicode string>" not in err


def test_check_says_no_built_in_template_compiled_when_they_are_off(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (here / "config.yaml").write_text(GOOD + "templates: {builtin: false}\n")
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert "builtin_templates" not in out and "built-in template(s) compiled" not in out
    assert "templates.builtin is false: relay's built-in per-kind templates are not used" in out
    assert "messages carry the platform's own text" in out

    (here / "config.yaml").unlink()  # no file at all: builtin is off by default
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert "builtin_templates" not in out and "built-in template(s) compiled" not in out

    (here / "config.yaml").write_text(GOOD + "templates: {builtin: true}\n")
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert "built-in template(s) compiled in" in out and "builtin_templates (templates.builtin: true)" in out
    assert "only built-in templates are used" in out


def test_check_lists_every_problem_in_relays_words(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (here / "config.yaml").write_text(
        GOOD
        + "server: {port: eighty}\n"
        + "routes:\n"
        + "  - channels: [b]\n"
        + "    recipient_type: [x]\n"
        + "    matchers: ['body.env==\"prod\"']\n"
    )
    assert main(["check"]) == 1
    err = capsys.readouterr().err
    assert "error server.port: must be a whole number\n" in err
    assert "error routes[0].recipient_type: unknown key; did you mean `recipient_types`?\n" in err
    assert "error routes[0].channels[0]: unknown channel 'b'; the channels defined are: a\n" in err
    assert "error routes[0].matchers[0]: matcher 'body.env==\"prod\"': == is not an operator;" in err
    assert 'write body.env="prod" (the operators are =, !=, =~, !~)' in err
    assert "Input should" not in err and "Extra inputs" not in err
