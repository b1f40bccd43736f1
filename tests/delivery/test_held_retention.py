"""A delivery is never removed while it waits (issue 45): held longer than the retention, its record and its
notification are kept until it is sent, then age out; the held gauge always equals the held listing. Real
Redis, RQ and HTTP sink; the runtime's clock is set by the test (Redis' TTLs are real seconds: read as such)."""

from __future__ import annotations

import time
from collections.abc import Callable

from redis import Redis
from starlette.testclient import TestClient

from relay.core.model import iso
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.storage.records import delivery_key, event_key
from tests.conftest import admin, post, run_scheduled, run_worker, sample_notification
from tests.servers import HttpSink

NOW = float(int(time.time()))
RETENTION = 60


def _gauge(api: TestClient) -> float:
    line = next(v for v in api.get("/metrics").text.splitlines() if v.startswith("relay_deliveries_held "))
    return float(line.split()[1])


def test_a_hold_longer_than_the_retention_keeps_the_delivery_and_sends_it_when_it_ends(
    make_runtime: Callable[..., Runtime], redis: Redis, sink: HttpSink
) -> None:
    rt = make_runtime(retention=f"{RETENTION}s")
    rt.clock.set(NOW)
    with TestClient(create_app(rt)) as api:
        body = {"matchers": ['channel="owners-hook"'], "duration": "90s", "createdBy": "ana", "comment": "move"}
        assert admin(api, "/api/v1/silences", "POST", json=body).status_code == 201
        payload = sample_notification()
        event_id = payload["metadata"]["eventId"]
        assert post(api, payload).status_code == 202
        run_worker(rt)
        found = {d["channel"]: d for d in admin(api, f"/api/v1/events/{event_id}").json()["deliveries"]}
        owners = found["owners-hook"]
        assert owners["state"] == "held" and owners["notBefore"] == iso(NOW + 90)
        # Kept (Redis' TTL, real seconds) until its due time plus the retention: the record and its notification.
        assert redis.ttl(delivery_key(owners["id"])) > 90 + RETENTION - 5
        assert redis.ttl(event_key(event_id)) > 90 + RETENTION - 5
        # Past the retention the prune keeps it listed and counted: the gauge is what the listing shows.
        rt.clock.set(NOW + RETENTION + 1)
        rt.store.prune()
        held = admin(api, "/api/v1/deliveries?state=held").json()
        assert [d["id"] for d in held] == [owners["id"]]
        assert _gauge(api) == len(held) == 1
        assert admin(api, f"/api/v1/deliveries/{owners['id']}").status_code == 200
        # When its silence ends it is sent, once, then ages out as any delivery does.
        rt.clock.set(NOW + 91)
        run_scheduled(rt, due_only=True)
        run_worker(rt)
        assert len(sink.at("/owners")) == 1
        assert admin(api, f"/api/v1/deliveries/{owners['id']}").json()["state"] == "delivered"
        assert 0 < redis.ttl(delivery_key(owners["id"])) <= RETENTION
        assert _gauge(api) == len(admin(api, "/api/v1/deliveries?state=held").json()) == 0
