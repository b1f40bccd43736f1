"""The CLI's exit codes: one table in docs/http-api.md ("Exit codes"), and each code what a command exits
with in that case: a misused command line, an invalid config, an unreachable Redis each their own."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from relay.cli import main
from relay.cli.main import INVALID_CONFIG, REDIS_UNREACHABLE, USAGE
from relay.runtime.restarts import GIVE_UP_EXIT_CODE
from tests.servers import free_port

DOC = (Path(__file__).resolve().parents[2] / "docs" / "http-api.md").read_text()


def _table() -> dict[int, str]:
    section = DOC[DOC.index("### Exit codes") :]
    return {int(code): what for code, what in re.findall(r"^\| (\d+) \| (.+) \|$", section, re.MULTILINE)}


def test_one_table_names_every_code_once() -> None:
    table = _table()
    assert sorted(table) == [0, 1, USAGE, GIVE_UP_EXIT_CODE, INVALID_CONFIG, REDIS_UNREACHABLE, 130]
    assert len({USAGE, GIVE_UP_EXIT_CODE, INVALID_CONFIG, REDIS_UNREACHABLE}) == 4
    assert "misused command line" in table[USAGE] and "relay serve` gave up" in table[GIVE_UP_EXIT_CODE]
    assert "invalid configuration" in table[INVALID_CONFIG] and "Redis unreachable" in table[REDIS_UNREACHABLE]
    assert DOC.count("### Exit codes") == 1


def test_a_misused_command_line_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["statuss"], ["status"], ["check", "--format", "yaml"]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == USAGE, argv
        assert "usage: relay" in capsys.readouterr().err


def test_an_invalid_config_and_an_unreachable_redis_have_their_own_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text("routes:\n  - channels: [missing]\n")
    assert main(["status", "some-event", "--config", str(invalid)]) == INVALID_CONFIG
    assert "routes[0].channels[0]: unknown channel 'missing'" in capsys.readouterr().err
    # `relay check` answers the same question, as its verdict: 1.
    assert main(["check", "--config", str(invalid)]) == 1

    closed = tmp_path / "closed.yaml"  # a port nothing listens on
    closed.write_text(json.dumps({"redis": {"url": f"redis://127.0.0.1:{free_port()}/0"}}))
    assert main(["status", "some-event", "--config", str(closed)]) == REDIS_UNREACHABLE
    assert "cannot reach Redis" in capsys.readouterr().err


def test_check_as_json_is_one_document_with_the_texts_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text("routes:\n  - channels: [missing]\n")
    assert main(["check", "--format", "json", "--config", str(invalid)]) == 1
    out, err = capsys.readouterr()
    found = json.loads(out)
    assert found["valid"] is False and err == ""
    assert found["problems"] == [
        "routes[0].channels[0]: unknown channel 'missing'; no channels are defined: add it under `channels:`"
    ]
    assert found["notes"] == [f"config file {invalid}"]

    not_yaml = tmp_path / "not.yaml"
    not_yaml.write_text("routes: [\n")
    assert main(["check", "--format", "json", "--config", str(not_yaml)]) == 1
    assert json.loads(capsys.readouterr().out)["valid"] is False

    empty = tmp_path / "empty.yaml"
    empty.write_text("{}\n")
    assert main(["check", "--format", "json", "--config", str(empty)]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["valid"] is True and found["problems"] == [] and found["warnings"]  # nothing would be sent
    assert main(["check", "--format", "json", "--strict", "--config", str(empty)]) == 1


def test_check_of_a_file_with_problems_says_no_ok_of_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text("routes:\n  - channels: [missing]\n")
    assert main(["check", "--config", str(invalid)]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == f"read  config file {invalid}" and "ok" not in out
    assert "unknown channel 'missing'" in err and "1 problem(s) found" in err


def test_a_reader_gone_away_ends_it_quietly() -> None:
    """`relay ... | head`: the pipe closed before relay wrote is no error of relay's (it said
    "relay: [Errno 32] Broken pipe" and exited 2)."""
    import subprocess
    import sys

    example = Path(__file__).resolve().parents[2] / "config.example.yaml"
    relay = Path(sys.executable).parent / "relay"
    proc = subprocess.Popen([relay, "check", "--config", example], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(30) == 0 and err == b""
