"""One slow notification holds up no other (issue 46, item 4): the regex work a delivery's silences may cost is
bounded (text length x RE2 program size); a silence that would cost more is not matched but holds what it may
match until it ends (never skips it), so that nothing is lost and nothing waits on it. Real Redis and RQ."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from starlette.testclient import TestClient

from relay.config.matchers import compile_regex
from relay.core.model import Delivery
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.silences.model import MATCH_BUDGET, Silence, delivery_view, silenced
from relay.silences.store import new_id
from tests.conftest import admin, post, run_worker, sample_notification
from tests.servers import HttpSink

HOSTILE = 'body.blob=~"[ab]*a[ab]{999}"'  # RE2 is linear, but this costs some 7 us a byte here (`!~` as much)
BLOB = "ab" * 250_000  # 500 KB: the ten matchers above would take over 30 s


def _view(blob: str, kind: str = "notification:k") -> dict[str, Any]:
    record = Delivery("d1", "e1", kind, 0, "owners-hook", "auto", 3, 0.0, 0.0)
    return delivery_view({"body": {"blob": blob}}, record)


def _silence(*matchers: str, action: str = "hold") -> Silence:
    return Silence(new_id(), matchers, 0.0, 3600.0, "mallory", "slow", action)  # type: ignore[arg-type]


def test_a_silence_costlier_than_the_budget_holds_without_matching() -> None:
    assert compile_regex("[ab]*a[ab]{999}").programsize * len(BLOB) > MATCH_BUDGET
    hostile = _silence(*[HOSTILE] * 10)
    started = time.monotonic()
    hit = silenced([hostile], _view(BLOB), 60.0)
    assert time.monotonic() - started < 5  # not the 30 s and more its matching would take
    assert hit is not None and hit.silence == hostile and hit.costly and not hit.skip
    assert hit.reason == f"silenced by {hostile.id} (mallory): too costly to match, held until it ends"
    # A costly skip holds too: what it may not match is never dropped.
    skip = silenced([_silence(HOSTILE, action="skip")], _view(BLOB), 60.0)
    assert skip is not None and skip.costly and not skip.skip
    # The same silence on a small text is matched as ever.
    assert silenced([hostile], _view("b" * 1000), 60.0) is None
    small = silenced([hostile], _view("a" * 1000), 60.0)
    assert small is not None and not small.costly
    # An equality matcher that fails first costs no regex work: no hold.
    assert silenced([_silence('recipientType="nobody"', HOSTILE)], _view(BLOB), 60.0) is None


def test_a_slow_notification_holds_up_no_other(make_runtime: Callable[..., Runtime], sink: HttpSink) -> None:
    rt = make_runtime()
    with TestClient(create_app(rt)) as client:
        body = {"matchers": [f"{HOSTILE}, " * 9 + HOSTILE], "duration": "1h", "createdBy": "m", "comment": "slow"}
        assert admin(client, "/api/v1/silences", "POST", json=body).status_code == 201
        slow = sample_notification(body={"blob": BLOB})
        plain = sample_notification()
        started = time.monotonic()
        assert post(client, slow).status_code == 202 and post(client, plain).status_code == 202
        run_worker(rt)
        took = time.monotonic() - started
        events = {p["metadata"]["eventId"]: p for p in (slow, plain)}
        found = {e: admin(client, f"/api/v1/events/{e}").json()["deliveries"] for e in events}
    assert took < 10, took  # both planned and gated without the matching (over 30 s a delivery)
    assert {d["state"] for d in found[plain["metadata"]["eventId"]]} == {"delivered"}  # no blob: no match
    held = found[slow["metadata"]["eventId"]]
    assert {d["state"] for d in held} == {"held"} and all("too costly to match" in d["lastError"] for d in held)


def test_a_regex_past_the_program_bound_is_refused(make_runtime: Callable[..., Runtime]) -> None:
    with TestClient(create_app(make_runtime())) as client:
        big = 'body.x=~"a{1000}b{1000}c{1000}d{1000}e{1000}f{1000}"'
        body = {"matchers": [big], "duration": "1h", "createdBy": "m", "comment": "big"}
        answer = admin(client, "/api/v1/silences", "POST", json=body)
        assert answer.status_code == 422 and "at most 5000" in answer.text, answer.text
        letters = {**body, "matchers": ['body.x=~"\\\\pL+"']}  # a letter in any script: 1,200 steps, taken
        assert admin(client, "/api/v1/silences", "POST", json=letters).status_code == 201
