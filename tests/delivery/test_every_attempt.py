"""Every attempt of a delivery sends what the first would have: a retry, a replay, a release, a re-plan and a
digest's retry render with the route's template choice (`auto`, a name, or `platform`), in every format, and
the template a record shows as used never becomes the choice. Real Redis, RQ, SMTP and HTTP sinks."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from relay.core.model import Delivery
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from tests.conftest import admin, post, run_scheduled, run_worker, sample_notification
from tests.servers import HttpSink, SmtpSink

pytestmark = pytest.mark.dated

OWNER = "recipient-type:system-owner"
REQUESTER = "recipient-type:access-control-requester"
FORMATS = ("md", "txt", "html")
FRIDAY_EVENING = datetime(2026, 11, 27, 20, 0, tzinfo=UTC).timestamp()
OFFICE_HOURS = {
    "name": "office-hours",
    "time_intervals": [{"weekdays": ["monday:friday"], "times": [{"start_time": "08:00", "end_time": "18:00"}]}],
}


def _channels(sink: HttpSink, smtp: SmtpSink) -> dict[str, Any]:
    """One sink channel per body format, and e-mail (html with its text part)."""
    hooks = {f"owners-{fmt}": {"url": sink.url(f"/{fmt}"), "format": fmt} for fmt in FORMATS}
    return {**hooks, "requester-email": {"url": smtp.url(), "per_recipient": True}}


def _routes(template: str = "auto", **more: Any) -> list[dict[str, Any]]:
    return [
        {"recipient_types": [OWNER], "channels": [f"owners-{f}" for f in FORMATS], "template": template, **more},
        {"recipient_types": [REQUESTER], "channels": ["requester-email"], "template": template, **more},
    ]


def _runtime(
    make_runtime: Callable[..., Runtime], sink: HttpSink, smtp: SmtpSink, tmp_path: Path, **extra: Any
) -> Runtime:
    """relay's own per-kind templates on (the kind's `auto` files), the operator's in tmp_path/templates."""
    extra.setdefault("routes", _routes())
    templates = {"dir": str(tmp_path / "templates"), "builtin": True}
    return make_runtime(channels=_channels(sink, smtp), default={"channels": []}, templates=templates, **extra)


def _accept(rt: Runtime, event_id: str) -> str:
    with TestClient(create_app(rt)) as client:
        payload = sample_notification()
        payload["metadata"]["eventId"] = event_id
        payload["messages"] = payload["messages"][:2]  # one message to owners, one to the requester
        assert post(client, payload).status_code == 202
    run_worker(rt)
    return event_id


def _sent(sink: HttpSink, smtp: SmtpSink) -> dict[str, tuple[str, str]]:
    """What reached each channel, by format: (title, body); e-mail: (subject, html part + text part)."""
    out = {fmt: (h.json()["title"], h.json()["message"]) for fmt in FORMATS for h in sink.at(f"/{fmt}")}
    for mail in smtp.mails:
        out["email"] = (mail.subject, f"{mail.part('text/html')}\n---\n{mail.part('text/plain')}")
    return out


def _first_attempt(
    make_runtime: Callable[..., Runtime], sink: HttpSink, smtp: SmtpSink, tmp_path: Path, **extra: Any
) -> Any:
    """What a first attempt sends, with the same config: the reference every later attempt must equal."""
    rt = _runtime(make_runtime, sink, smtp, tmp_path, **extra)
    _accept(rt, "first-attempt")
    sent = _sent(sink, smtp)
    assert set(sent) == {*FORMATS, "email"}
    sink.clear()
    smtp.clear()
    return sent


def _fallbacks(rt: Runtime) -> int:
    with TestClient(create_app(rt)) as client:
        lines = client.get("/metrics").text.splitlines()
    return sum(
        int(float(line.rsplit(" ", 1)[1])) for line in lines if line.startswith("relay_template_fallbacks_total")
    )


def _records(rt: Runtime, event_id: str) -> list[Delivery]:
    return [r for r in rt.store.deliveries(rt.store.event_delivery_ids(event_id)) if r is not None]


def _templates(tmp_path: Path) -> None:
    """An operator's named templates, one per format, for the `template: <name>` choice."""
    root = tmp_path / "templates" / "ops"
    root.mkdir(parents=True)
    for fmt in FORMATS:
        (root / f"notice.{fmt}.j2").write_text(
            "{% block title %}ops: {{ message.title }}{% endblock %}" + f"{fmt} body for {{{{ recipient_type }}}}"
        )


@pytest.mark.parametrize("choice", ["auto", "ops/notice", "platform"])
def test_a_retry_sends_what_the_first_attempt_would_have(
    make_runtime: Callable[..., Runtime], sink: HttpSink, smtp: SmtpSink, tmp_path: Path, choice: str
) -> None:
    _templates(tmp_path)
    expected = _first_attempt(make_runtime, sink, smtp, tmp_path, routes=_routes(choice))
    rt = _runtime(make_runtime, sink, smtp, tmp_path, routes=_routes(choice))
    for fmt in FORMATS:
        sink.script[f"/{fmt}"] = [500]
    smtp.answers.append("451 try later")
    event_id = _accept(rt, "retried")
    assert {r.state for r in _records(rt, event_id)} == {"retrying"}
    run_scheduled(rt)
    run_worker(rt)
    assert {(r.state, r.attempts) for r in _records(rt, event_id)} == {("delivered", 2)}
    assert _sent(sink, smtp) == expected
    assert _fallbacks(rt) == 0
    # The record keeps the choice apart from the template it shows as used.
    shown = {r.channel: r.public()["template"] for r in _records(rt, event_id)}
    if choice == "platform":
        assert set(shown.values()) == {"platform"}
    else:
        assert shown["owners-md"].endswith(".md.j2") and shown["owners-txt"].endswith(".txt.j2")
        assert {r.template for r in _records(rt, event_id)} == {choice}


def test_a_replay_sends_what_the_first_attempt_would_have(
    make_runtime: Callable[..., Runtime], sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    expected = _first_attempt(make_runtime, sink, smtp, tmp_path)
    rt = _runtime(make_runtime, sink, smtp, tmp_path, retry={"attempts": 1, "backoff": ["1s"]})
    for fmt in FORMATS:
        sink.script[f"/{fmt}"] = [500]
    smtp.answers.append("554 refused")
    event_id = _accept(rt, "replayed")
    assert {r.state for r in _records(rt, event_id)} == {"failed"}
    with TestClient(create_app(rt)) as client:
        answer = admin(client, "/api/v1/deliveries/replay", "POST", json={"eventId": event_id})
        assert answer.json()["replayed"] == 4
    run_worker(rt)
    assert {r.state for r in _records(rt, event_id)} == {"delivered"}
    assert _sent(sink, smtp) == expected
    assert _fallbacks(rt) == 0


def test_a_release_sends_what_the_first_attempt_would_have(
    make_runtime: Callable[..., Runtime], sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    expected = _first_attempt(make_runtime, sink, smtp, tmp_path)
    held = _routes(active_time_intervals=["office-hours"])
    rt = _runtime(make_runtime, sink, smtp, tmp_path, time_intervals=[OFFICE_HOURS], routes=held)
    rt.clock.set(FRIDAY_EVENING)
    event_id = _accept(rt, "released")
    assert {r.state for r in _records(rt, event_id)} == {"held"}
    with TestClient(create_app(rt)) as client:
        assert admin(client, "/api/v1/deliveries/release", "POST", json={"eventId": event_id}).json()["released"] == 4
    run_worker(rt)
    assert _sent(sink, smtp) == expected
    assert _fallbacks(rt) == 0


def test_a_re_planned_notification_sends_what_the_first_attempt_would_have(
    make_runtime: Callable[..., Runtime], sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    """A notification planned again (a planner that died after storing its deliveries) finds the records
    already made, with the first attempt's template noted: its retry still renders the route's choice."""
    from tests.conftest import plan_job

    expected = _first_attempt(make_runtime, sink, smtp, tmp_path)
    rt = _runtime(make_runtime, sink, smtp, tmp_path)
    for fmt in FORMATS:
        sink.script[f"/{fmt}"] = [500]
    smtp.answers.append("451 try later")
    event_id = _accept(rt, "re-planned")
    plan_job(rt, event_id)  # planning again finds every delivery made and leaves it as it is
    run_worker(rt)
    run_scheduled(rt)
    run_worker(rt)
    assert _sent(sink, smtp) == expected
    assert _fallbacks(rt) == 0


def test_a_digest_of_one_retried_sends_that_message_unchanged(
    make_runtime: Callable[..., Runtime], sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    expected = _first_attempt(make_runtime, sink, smtp, tmp_path)
    rt = _runtime(make_runtime, sink, smtp, tmp_path, routes=_routes(digest="2s"))
    event_id = _accept(rt, "gathered")
    for fmt in FORMATS:
        sink.script[f"/{fmt}"] = [503]
    smtp.answers.append("451 try later")
    run_scheduled(rt)  # the windows end: each digest of one is sent, and refused
    run_worker(rt)
    digests = [r for r in _records(rt, event_id) if r.items]
    assert len(digests) == 4 and {d.state for d in digests} == {"retrying"}
    run_scheduled(rt)  # the retries
    run_worker(rt)
    assert {r.state for r in _records(rt, event_id)} == {"delivered"}
    assert _sent(sink, smtp) == expected
    assert _fallbacks(rt) == 0
