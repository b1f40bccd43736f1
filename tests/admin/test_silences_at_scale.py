"""Silences at scale (issue 46, item 5): their number is bounded (a 422 past it); a delivery is matched only
against the silences that could match it; the hash is read again only when it changed; and an early end makes
due what that silence holds, found in its index, without reading any other held delivery. Real Redis and RQ;
the runtime's clock."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from redis import Redis
from starlette.testclient import TestClient

from relay.core.model import Delivery
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.silences.model import MAX_SILENCES, Candidates, Silence, delivery_view, silenced
from relay.silences.store import Silences, new_id
from tests.conftest import admin, post, run_worker, sample_notification
from tests.servers import HttpSink

pytestmark = pytest.mark.dated

NOW = float(int(time.time()))


@pytest.fixture
def api(rt: Runtime) -> Iterator[TestClient]:
    rt.clock.set(NOW)
    with TestClient(create_app(rt)) as client:
        yield client


def _silence(*matchers: str, starts: float = NOW, ends: float = NOW + 3600, action: str = "hold") -> Silence:
    return Silence(new_id(), matchers, starts, ends, "ana", "db move", action)  # type: ignore[arg-type]


def _record(kind: str, channel: str) -> Delivery:
    return Delivery("d1", "e1", kind, 0, channel, "auto", 3, NOW, NOW, recipientType="recipient-type:system-owner")


def _create(api: TestClient, matcher: str) -> dict[str, object]:
    body = {"matchers": [matcher], "duration": "1h", "createdBy": "ana", "comment": "db move"}
    answer = admin(api, "/api/v1/silences", "POST", json=body)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def test_active_and_pending_silences_are_bounded(rt: Runtime, api: TestClient) -> None:
    silences = Silences(rt.redis)
    for i in range(MAX_SILENCES - 1):  # active and pending count; the expired ones do not
        silences.put(_silence(f'kind="k{i}"', starts=NOW + (3600 if i % 2 else 0), ends=NOW + 7200))
    silences.put(_silence('kind="old"', starts=NOW - 7200, ends=NOW - 60))
    last = _create(api, 'kind="last"')
    body = {"matchers": ['kind="one-more"'], "duration": "1h", "createdBy": "ana", "comment": "db move"}
    refused = admin(api, "/api/v1/silences", "POST", json=body)
    assert refused.status_code == 422, refused.text
    assert f"{MAX_SILENCES} silences are active or pending already" in refused.text
    assert admin(api, f"/api/v1/silences/{last['id']}", "DELETE").status_code == 200
    assert admin(api, "/api/v1/silences", "POST", json=body).status_code == 201  # room again


def test_a_delivery_is_matched_only_against_the_silences_that_could_match_it() -> None:
    others = [_silence(f'kind="notification:other-{i}"') for i in range(500)]
    on_channel = _silence('channel="owners-hook"', 'recipientType="recipient-type:system-owner"')
    by_regex = _silence('kind=~"notification:access-.*"', action="skip")
    candidates = Candidates([*others, on_channel, by_regex])
    view = delivery_view(None, _record("notification:access-control-request-failed", "owners-hook"))
    assert candidates.of(view) == [on_channel, by_regex]  # none of the 500 on other kinds
    hit = silenced(candidates, view, NOW)
    assert hit is not None and hit.silence == by_regex and hit.skip  # a skip wins, as without the index
    other = delivery_view(None, _record("notification:other-7", "x"))
    assert candidates.of(other) == [others[7], by_regex]


def _reads(redis: Redis) -> int:
    return int(redis.info("commandstats").get("cmdstat_hgetall", {}).get("calls", 0))


def test_the_silences_are_read_again_only_when_they_changed(rt: Runtime) -> None:
    silences = Silences(rt.redis)
    silences.put(_silence('kind="a"'))
    before = _reads(rt.redis)
    first = silences.candidates(NOW)
    assert silences.candidates(NOW + 1) is first and Silences(rt.redis).all() == silences.all()
    assert _reads(rt.redis) == before + 1
    silences.put(first.by[("kind", "a")][0].ended(NOW + 2))  # an expiry keeps the count: the token moves
    assert silences.candidates(NOW + 3).by == {} and _reads(rt.redis) == before + 2
    silences.put(_silence('kind="b"', ends=NOW + 10))
    assert [s.id for s in silences.candidates(NOW + 4).by[("kind", "b")]]
    assert silences.candidates(NOW + 11).by == {}  # past the first end, read again: it is no candidate


def test_an_early_end_makes_due_what_it_holds_and_reads_no_other(rt: Runtime, api: TestClient, sink: HttpSink) -> None:
    owners = _create(api, 'channel="owners-hook"')
    unrelated = _create(api, 'kind="notification:nothing-like-it"')
    for _ in range(3):
        assert post(api, sample_notification()).status_code == 202
    run_worker(rt)
    held = admin(api, "/api/v1/deliveries?state=held").json()
    assert len(held) == 3 and sink.at("/owners") == []
    assert sorted(Silences(rt.redis).held(str(owners["id"]))) == sorted(d["id"] for d in held)

    before = _reads(rt.redis)  # records are hashes: a held delivery read is an HGETALL
    assert admin(api, f"/api/v1/silences/{unrelated['id']}", "DELETE").json()["released"] == 0
    answer = admin(api, f"/api/v1/silences/{owners['id']}", "DELETE")
    assert answer.status_code == 200 and answer.json()["released"] == 3
    assert _reads(rt.redis) == before  # neither expiry read a held delivery
    run_worker(rt)
    assert len(sink.at("/owners")) == 3
    assert Silences(rt.redis).held(str(owners["id"])) == []  # each left the index when asked again
    assert admin(api, f"/api/v1/silences/{owners['id']}", "DELETE").json()["released"] == 0
