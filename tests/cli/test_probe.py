"""`relay test CHANNEL [--to ADDRESS]`: one test message through the real send, against real local servers
(Slack's Web API intercepted), with no Redis."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses

from relay.cli import main
from tests.servers import HttpSink, SmtpSink

SLACK_TOKEN = "xoxb-1234-5678-abcdefghijkl"


@pytest.fixture
def config_file(tmp_path: Path, sink: HttpSink, smtp: SmtpSink) -> Path:
    config: dict[str, Any] = {
        # Never reached: `relay test` needs no Redis (port 1 refuses at once, were it tried).
        "redis": {"url": "redis://127.0.0.1:1/0"},
        "channels": {
            "hook": {"url": sink.url("/probe-ok")},
            "broken": {"url": sink.url("/probe-500")},
            "refused": {"url": sink.url("/probe-400")},
            "gone": {"url": sink.url("/probe-404")},
            "mail": {"url": smtp.url(), "per_recipient": True},
            "slack": {"url": f"slack://{SLACK_TOKEN}/#alerts"},
        },
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def slack() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock() as mock:
        yield mock


def relay_test(config: Path, *args: str) -> int:
    return main(["test", *args, "--config", str(config)])


def test_a_webhook_channel_gets_the_test_message(
    config_file: Path, sink: HttpSink, capsys: pytest.CaptureFixture[str]
) -> None:
    assert relay_test(config_file, "hook") == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "delivered"
    [hit] = sink.at("/probe-ok")
    posted = hit.json()
    assert posted["title"] == "relay test message"
    assert "through channel hook" in posted["message"] and "relay test" in posted["message"]


def test_a_server_error_is_transient_and_exits_1(
    config_file: Path, sink: HttpSink, capsys: pytest.CaptureFixture[str]
) -> None:
    sink.script["/probe-500"] = [500] * 3
    assert relay_test(config_file, "broken") == 1
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("not delivered: transient (status 500), a delivery would be retried: ")
    assert sink.at("/probe-500") == []


@pytest.mark.parametrize(("channel", "path", "status"), [("refused", "/probe-400", 400), ("gone", "/probe-404", 404)])
def test_a_client_error_is_permanent_and_exits_1(
    config_file: Path, sink: HttpSink, capsys: pytest.CaptureFixture[str], channel: str, path: str, status: int
) -> None:
    sink.script[path] = [status] * 3
    assert relay_test(config_file, channel) == 1
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith(f"not delivered: permanent (status {status}), a delivery would fail without retrying: ")


def test_an_email_channel_sends_to_the_address_given(
    config_file: Path, smtp: SmtpSink, capsys: pytest.CaptureFixture[str]
) -> None:
    assert relay_test(config_file, "mail", "--to", "bob.probe@example.com") == 0
    assert capsys.readouterr().out.splitlines()[-1] == "delivered"
    [mail] = [m for m in smtp.mails if m.envelope_to == ["bob.probe@example.com"]]
    assert mail.subject == "relay test message"
    assert "channel <b>mail</b>" in (mail.part("text/html") or "")
    assert "through channel mail" in (mail.part("text/plain") or "")


def test_an_email_the_server_refuses_is_not_delivered(
    config_file: Path, smtp: SmtpSink, capsys: pytest.CaptureFixture[str]
) -> None:
    smtp.answers.append("550 no such mailbox")
    assert relay_test(config_file, "mail", "--to", "nobody.probe@example.com") == 1
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("not delivered: ") and "nobody.probe@example.com" in last


def test_a_per_recipient_channel_needs_to(
    config_file: Path, smtp: SmtpSink, capsys: pytest.CaptureFixture[str]
) -> None:
    sent = len(smtp.mails)
    assert relay_test(config_file, "mail") == 2
    err = capsys.readouterr().err
    assert "channel 'mail' sends to each recipient's own address (per_recipient): give one with --to" in err
    assert relay_test(config_file, "mail", "--to", "not an address") == 2
    assert "--to 'not an address': not a valid e-mail address" in capsys.readouterr().err
    assert len(smtp.mails) == sent


def test_an_unknown_channel_lists_the_defined_ones(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert relay_test(config_file, "nope") == 2
    err = capsys.readouterr().err
    assert "no channel 'nope' in the config; defined: broken, gone, hook, mail, refused, slack" in err
    assert relay_test(config_file, "slak") == 2  # a slip: the closest name is offered
    assert "no channel 'slak' in the config (did you mean 'slack'?); defined: broken," in capsys.readouterr().err


def test_slack_invalid_auth_is_permanent_with_slacks_reason_and_no_token(
    config_file: Path, slack: responses.RequestsMock, capsys: pytest.CaptureFixture[str]
) -> None:
    slack.add(responses.POST, "https://slack.com/api/chat.postMessage", json={"ok": False, "error": "invalid_auth"})
    assert relay_test(config_file, "slack") == 1
    captured = capsys.readouterr()
    last = captured.out.splitlines()[-1]
    assert last.startswith("not delivered: permanent, a delivery would fail without retrying: ")
    assert "invalid_auth" in last
    assert SLACK_TOKEN not in captured.out + captured.err
    assert "1234-5678" not in captured.out + captured.err
