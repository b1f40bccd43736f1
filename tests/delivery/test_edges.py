"""The edges of a delivery, through the real worker: a template that breaks a render limit still sends the
platform's text; a title too long for its channel is cut to what it takes and still sent (a real SMTP server,
Slack intercepted)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import responses
from starlette.testclient import TestClient

from relay.core import rendering
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from tests.conftest import post, run_worker, sample_notification
from tests.servers import HttpSink, SmtpSink

KIND = "notification:access-control-request-failed"
SLACK_URL = "slack://T1234ABCD/B1234ABCD/abcdefghijklmnopqrstuvwx"
SLACK_HOOK = "https://hooks.slack.com/services/T1234ABCD/B1234ABCD/abcdefghijklmnopqrstuvwx"


def _deliver(rt: Runtime, payload: dict[str, Any]) -> float:
    """Accept the payload and run the worker until it is done; the seconds it took."""
    started = time.monotonic()
    with TestClient(create_app(rt)) as client:
        assert post(client, payload).status_code == 202
    run_worker(rt)
    return time.monotonic() - started


@pytest.mark.parametrize(
    "attack",
    [
        "{{ 'x'|center(300000000) }}",
        "{% set x %}{% for i in range(20000) %}{% for j in range(20000) %}{% endfor %}{% endfor %}{% endset %}",
    ],
)
def test_a_template_breaking_a_limit_sends_the_platform_text(
    make_runtime: Callable[..., Runtime],
    sink: HttpSink,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    attack: str,
) -> None:
    monkeypatch.setattr(rendering, "RENDER_SECONDS", 0.3)
    folder = tmp_path / "templates" / "access-control-request-failed"
    folder.mkdir(parents=True)
    (folder / "system-owner.txt.j2").write_text("{% block title %}T{% endblock %}" + attack)
    rt = make_runtime()
    payload = sample_notification()
    payload["messages"] = payload["messages"][:1]  # to the system owners, through the owners' hook (txt)
    with caplog.at_level(logging.WARNING, logger="relay.delivery.jobs"):
        elapsed = _deliver(rt, payload)
    (hit,) = sink.at("/owners")
    message = payload["messages"][0]
    assert (hit.json()["title"], hit.json()["message"]) == (message["title"], message["message"])
    assert rt.store.counters().get(f"relay_template_fallbacks_total|kind={KIND}", 0) == 1
    assert any("LimitExceeded" in r.getMessage() for r in caplog.records)
    assert elapsed < 5


@pytest.mark.parametrize(
    ("title", "sent"),
    [
        # 20 KB of words: the old subject took seconds of header folding and was one 20,000-octet line,
        # which the SMTP server refused.
        ("Access request failed. " * 870, ("Access request failed. " * 10) + "Access request..."),
        ("x" * 1000, "x" * 247 + "..."),
    ],
)
def test_a_long_email_title_is_cut_and_delivered_at_once(
    make_runtime: Callable[..., Runtime],
    smtp: SmtpSink,
    sink: HttpSink,
    caplog: pytest.LogCaptureFixture,
    title: str,
    sent: str,
) -> None:
    rt = make_runtime()
    payload = sample_notification()
    payload["messages"] = payload["messages"][1:2]  # to the requester, by e-mail
    payload["messages"][0]["title"] = title
    with caplog.at_level(logging.INFO, logger="relay.delivery.jobs"):
        elapsed = _deliver(rt, payload)
    (mail,) = smtp.mails
    assert mail.subject == sent
    assert len(mail.subject) <= 250
    assert elapsed < 5
    cuts = [r.getMessage() for r in caplog.records if "title cut" in r.getMessage()]
    assert cuts == [f"title cut from {len(title.strip())} to {len(sent)} characters, as a mailto channel takes it"]


@pytest.fixture
def slack() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock() as mock:
        mock.add(responses.POST, SLACK_HOOK, body="ok")
        yield mock


def test_a_long_chat_title_is_cut_to_what_slack_takes(
    make_runtime: Callable[..., Runtime], slack: responses.RequestsMock
) -> None:
    rt = make_runtime(channels={"team": {"url": SLACK_URL}}, routes=[{"channels": ["team"]}], default={})
    payload = sample_notification()
    payload["messages"] = payload["messages"][:1]
    payload["messages"][0]["title"] = "Access & request <failed> " * 100
    _deliver(rt, payload)
    (call,) = slack.calls
    body = call.request.body
    assert isinstance(body, str | bytes)
    (attachment,) = json.loads(body)["attachments"]  # the platform's text: a plain Slack attachment
    assert len(attachment["title"]) <= 150  # as Slack receives it, escaped
    assert attachment["title"].startswith("Access &amp; request &lt;failed&gt; Access")
    assert attachment["title"].endswith("failed&gt;…")
