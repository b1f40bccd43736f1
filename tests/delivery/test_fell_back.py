"""Two messages of one type on one shared channel (issue 48, item 1): the manager's message has the legacy type
`system-owner`; with no route for its v2 type it falls back on the owners' route, beside the owners' own message.
`relay check` warns of it, and each record names the message it came from. Real Redis, RQ and HTTP sink."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.testclient import TestClient

from relay.cli.checks import check_fallbacks
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from tests.conftest import admin, post, run_worker, sample_notification
from tests.servers import HttpSink

OWNER, MANAGER = "recipient-type:system-owner", "recipient-type:project-data-access-manager"
OWNERS_ONLY: list[dict[str, Any]] = [{"name": "owners", "recipient_types": [OWNER], "channels": ["owners-hook"]}]


def test_check_warns_when_an_unrouted_v2_type_falls_back_beside_its_legacy_type(
    make_runtime: Callable[..., Runtime],
) -> None:
    [warning] = check_fallbacks(make_runtime(routes=OWNERS_ONLY).config)
    assert warning.startswith(f"owners sends {OWNER} to owners-hook: no route names {MANAGER}")
    assert "two posts a notification" in warning
    # Routed on its own (anywhere), or every type on a catch-all route as asked: no warning.
    managers = {"recipient_types": [MANAGER], "channels": ["managers-hook"]}
    assert check_fallbacks(make_runtime(routes=[*OWNERS_ONLY, managers]).config) == []
    assert check_fallbacks(make_runtime(routes=[{"channels": ["owners-hook"]}]).config) == []
    # A per-recipient channel sends each message to its own people: no shared post twice.
    assert (
        check_fallbacks(make_runtime(routes=[{"recipient_types": [OWNER], "channels": ["requester-email"]}]).config)
        == []
    )


def test_each_record_names_the_message_it_came_from(make_runtime: Callable[..., Runtime], sink: HttpSink) -> None:
    rt = make_runtime(routes=OWNERS_ONLY)
    payload = sample_notification()
    with TestClient(create_app(rt)) as client:
        assert post(client, payload).status_code == 202
        run_worker(rt)
        found = admin(client, f"/api/v1/events/{payload['metadata']['eventId']}").json()["deliveries"]
    owners = [d for d in found if d["channel"] == "owners-hook"]
    assert len(owners) == 2 and len(sink.at("/owners")) == 2  # the two posts the warning is about
    assert sorted((d["recipientType"], d.get("fellBackFrom", "")) for d in owners) == [(OWNER, ""), (OWNER, MANAGER)]
