"""A notification with many deliveries: the admin API answers it a page at a time (`limit`, `cursor`,
`next`), `relay status` still lists them all, and the admin page says how many it does not show."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from relay.cli import main
from relay.core.model import Delivery, State
from relay.runtime.bootstrap import Runtime
from tests.conftest import ADMIN_TOKEN, admin, post, sample_notification

MANY = 1_200


def many_deliveries(rt: Runtime, client: TestClient, count: int) -> tuple[str, list[str]]:
    """A notification received, with `count` delivered deliveries written straight through the store (no
    planning): its eventId and the ids in the order they were stored."""
    payload = sample_notification()
    event_id = payload["metadata"]["eventId"]
    assert post(client, payload).status_code == 202
    now = time.time()
    ids = [f"{event_id}:{i:05d}" for i in range(count)]
    records = [
        Delivery(i, event_id, payload["kind"], 0, "audit-hook", "auto", 3, now, now, state=State.DELIVERED) for i in ids
    ]
    for start in range(0, count, 400):
        rt.store.create_deliveries(event_id, records[start : start + 400])
    return event_id, ids


def test_the_events_api_pages_through_many_deliveries(rt: Runtime, client: TestClient) -> None:
    event_id, ids = many_deliveries(rt, client, MANY)
    seen: list[str] = []
    pages: list[dict[str, Any]] = []
    url = f"/api/v1/events/{event_id}"
    while True:
        answer = admin(client, url)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        pages.append(page)
        seen += [d["id"] for d in page["deliveries"]]
        if "next" not in page:
            break
        url = f"/api/v1/events/{event_id}?cursor={page['next']}"

    assert seen == ids  # each once, in the order they were planned
    assert [len(p["deliveries"]) for p in pages] == [500, 500, 200]  # the default page: 500
    assert all(p["eventId"] == event_id and p["kind"] for p in pages)

    small = admin(client, f"/api/v1/events/{event_id}?limit=7&cursor=1190").json()
    assert [d["id"] for d in small["deliveries"]] == ids[1190:1197] and small["next"] == "1197"
    capped = admin(client, f"/api/v1/events/{event_id}?limit=5000").json()
    assert len(capped["deliveries"]) == 1000 and capped["next"] == "1000"  # at most 1,000 an answer
    assert admin(client, f"/api/v1/events/{event_id}?cursor=5000").json()["deliveries"] == []


@pytest.mark.parametrize(("query", "field"), [("limit=0", "limit"), ("cursor=abc", "cursor"), ("cursor=-1", "cursor")])
def test_a_bad_limit_or_cursor_is_422_naming_it(rt: Runtime, client: TestClient, query: str, field: str) -> None:
    event_id, _ = many_deliveries(rt, client, 2)
    answer = admin(client, f"/api/v1/events/{event_id}?{query}")
    assert answer.status_code == 422 and answer.json()["inputErrorField"] == field


def test_a_notification_that_fits_one_page_keeps_its_shape(rt: Runtime, client: TestClient) -> None:
    event_id, ids = many_deliveries(rt, client, 3)
    shown = admin(client, f"/api/v1/events/{event_id}").json()
    assert set(shown) == {"eventId", "kind", "receivedAt", "deliveries"}
    assert [d["id"] for d in shown["deliveries"]] == ids


def test_relay_status_lists_them_all(
    rt: Runtime, client: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    event_id, ids = many_deliveries(rt, client, MANY)
    path = tmp_path / "cli-config.json"
    path.write_text(json.dumps(rt.config.model_dump(mode="json", by_alias=True, exclude={"base_dir"})))
    capsys.readouterr()
    assert main(["status", event_id, "--json", "--config", str(path)]) == 0
    assert [d["id"] for d in json.loads(capsys.readouterr().out)["deliveries"]] == ids


def test_the_admin_page_says_how_many_it_does_not_show(rt: Runtime, client: TestClient) -> None:
    event_id, ids = many_deliveries(rt, client, MANY)
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    alone = client.get(f"/ui?event={event_id}", headers=headers).text
    assert ids[499] in alone and ids[500] not in alone
    assert "700 more deliveries not shown" in alone and f"relay status {event_id}" in alone
    listed = client.get("/ui", headers=headers).text
    assert ids[49] in listed and ids[50] not in listed
    assert "1150 more deliveries not shown" in listed and "this notification alone</a> shows 500" in listed
