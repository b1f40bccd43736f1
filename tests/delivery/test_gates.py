"""The gates (relay.delivery.gates), asked in order by one function when a delivery comes due: planning only
plans. End to end through the app, relay's own RQ worker, the SMTP server and the HTTP sink; the runtime's
clock is set by each test."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from starlette.testclient import TestClient

from relay.delivery import gates
from relay.delivery.gates import GATES
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from tests.conftest import admin, run_scheduled, run_worker
from tests.people.test_preferences_e2e import ALICE, FRIDAY_EVENING, KIND, MONDAY_8, OFFICE, _email, _send, _settings
from tests.servers import SmtpSink

SKIPS = re.compile(r'^relay_preference_skips_total\{channel="requester-email",kind="[^"]+"\} 1\.0$', re.M)


def _prefer(client: TestClient, **preference: object) -> None:
    answer = admin(client, f"/api/v1/people/{quote(ALICE, safe='')}/preferences", "PUT", json=preference)
    assert answer.status_code == 200, answer.text


def test_the_order_is_the_documented_one() -> None:
    """The module's docstring and docs/development.md's flow name the gates in the order they are asked."""
    names = [g.__name__ for g in GATES]  # type: ignore[attr-defined]
    assert re.findall(r"^\d\. `(\w+)`", gates.__doc__ or "", re.M) == names
    flow = (Path(__file__).parents[2] / "docs" / "development.md").read_text()
    assert " -> ".join(["due", *names]) in flow


def test_an_opt_out_skips_at_once_though_the_person_s_hours_would_hold_it(
    make_runtime: Callable[..., Runtime], tmp_path: Path, smtp: SmtpSink
) -> None:
    rt = make_runtime(**_settings(tmp_path))
    rt.clock.set(FRIDAY_EVENING)  # outside her hours
    with TestClient(create_app(rt)) as client:
        _prefer(client, optOuts=[{"kind": KIND, "channel": "requester-email"}], activeHours=OFFICE)
        email = _email(rt, _send(rt, client))
        assert (email.state, email.lastError, email.notBefore) == (
            "skipped",
            f"opted out of {KIND} on requester-email",
            None,
        )
        assert SKIPS.search(client.get("/metrics").text)
        assert admin(client, "/api/v1/deliveries?state=held").json() == []
    assert smtp.mails == []


def test_an_opt_out_made_while_a_delivery_is_held_skips_it_when_the_hold_ends(
    make_runtime: Callable[..., Runtime], tmp_path: Path, smtp: SmtpSink
) -> None:
    rt = make_runtime(**_settings(tmp_path))
    rt.clock.set(FRIDAY_EVENING)
    with TestClient(create_app(rt)) as client:
        _prefer(client, activeHours=OFFICE)
        event_id = _send(rt, client)
        email = _email(rt, event_id)
        assert email.state == "held" and email.public()["notBefore"] == MONDAY_8
        assert email.lastError == "held by the person's active hours"
        _prefer(client, optOuts=[{"kind": KIND, "channel": "requester-email"}], activeHours=OFFICE)
        assert run_scheduled(rt) == 1  # Monday 08:00 in Rome: her hours open, and her opt-out is asked then
        run_worker(rt)
        email = _email(rt, event_id)
        assert (email.state, email.lastError) == ("skipped", f"opted out of {KIND} on requester-email")
        assert SKIPS.search(client.get("/metrics").text)
    assert smtp.mails == []
