"""Routes on what the notification says, end to end: webhook -> Redis -> real worker -> HTTP sinks, and
the route each delivery came from in the events API, the deliveries list and the admin page."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from starlette.testclient import TestClient

from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.storage.records import STORED
from tests.conftest import ADMIN_TOKEN, admin, post, run_worker, sample_notification
from tests.servers import HttpSink

ROUTES = {
    "channels": {
        "oncall-hook": {"url": "set below"},
        "finance-hook": {"url": "set below"},
        "audit-hook": {"url": "set below"},
    },
    "routes": [
        {
            "name": "oncall",
            "kinds": ["notification:access-control-*"],
            "matchers": ['body.requestedResource.environment="production"'],
            "channels": ["oncall-hook"],
        },
        {"matchers": ['body.requestedResource.parentSystem.domain=~"finance|sales"'], "channels": ["finance-hook"]},
    ],
    "default": {"channels": ["audit-hook"]},
}


def settings(sink: HttpSink) -> dict[str, Any]:
    data = copy.deepcopy(ROUTES)
    for name in data["channels"]:
        data["channels"][name]["url"] = sink.url("/" + name.removesuffix("-hook"))
    return data


def notification(environment: str, domain: str) -> dict[str, Any]:
    payload = sample_notification()
    payload["messages"] = payload["messages"][:1]  # the owners' message only: one delivery each
    resource = payload["body"]["requestedResource"]
    resource["environment"] = environment
    resource["parentSystem"]["domain"] = domain
    payload["messages"][0]["title"] = f"{environment}/{domain}"
    return payload


def test_routes_with_matchers_through_the_pipeline(make_runtime: Callable[..., Runtime], sink: HttpSink) -> None:
    rt = make_runtime(**settings(sink))
    payloads = {
        "production": notification("production", "finance"),  # both match: the first route wins
        "sales": notification("staging", "sales"),
        "finance": notification("staging", "finance"),
        "other": notification("staging", "marketing"),
        "near-miss": notification("production-eu", "salesforce"),  # regexes and values match whole
    }
    with TestClient(create_app(rt)) as client:
        for payload in payloads.values():
            assert post(client, payload).status_code == 202
        run_worker(rt)

        assert [h.json()["title"] for h in sink.at("/oncall")] == ["production/finance"]
        assert sorted(h.json()["title"] for h in sink.at("/finance")) == ["staging/finance", "staging/sales"]
        assert sorted(h.json()["title"] for h in sink.at("/audit")) == [
            "production-eu/salesforce",
            "staging/marketing",
        ]

        expected = {
            "production": ("oncall-hook", "oncall"),
            "sales": ("finance-hook", "routes[1]"),
            "finance": ("finance-hook", "routes[1]"),
            "other": ("audit-hook", "default"),
            "near-miss": ("audit-hook", "default"),
        }
        for key, payload in payloads.items():
            event = admin(client, f"/api/v1/events/{payload['metadata']['eventId']}").json()
            assert [(d["channel"], d["route"], d["state"]) for d in event["deliveries"]] == [
                (*expected[key], "delivered")
            ]

        listed = admin(client, "/api/v1/deliveries?channel=oncall-hook").json()
        [only] = listed
        assert only["route"] == "oncall" and only["eventId"] == payloads["production"]["metadata"]["eventId"]

        assert client.post("/ui/login", data={"token": ADMIN_TOKEN}, follow_redirects=False).status_code == 303
        page = client.get(f"/ui?event={payloads['production']['metadata']['eventId']}").text
        assert "via oncall" in page
        page = client.get(f"/ui?event={payloads['sales']['metadata']['eventId']}").text
        assert "via routes[1]" in page


def test_a_record_stored_before_routes_were_recorded_still_loads(
    make_runtime: Callable[..., Runtime], sink: HttpSink
) -> None:
    rt = make_runtime(**settings(sink))
    payload = notification("production", "finance")
    with TestClient(create_app(rt)) as client:
        post(client, payload)
        run_worker(rt)
        [delivery_id] = rt.store.event_delivery_ids(payload["metadata"]["eventId"])
        rt.redis.hdel(f"relay:delivery:{delivery_id}", STORED["route"])  # as an older relay stored it
        event = admin(client, f"/api/v1/events/{payload['metadata']['eventId']}").json()
    [delivery] = event["deliveries"]
    assert delivery["route"] is None and delivery["state"] == "delivered"
