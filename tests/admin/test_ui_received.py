"""The admin page's list of notifications, a page at a time (issue 36, P6): read from the stream of those
received (`relay:received`); the next page starts below the last one shown, its stream ID, so that none is lost
or shown twice at a page's end, even among notifications of one millisecond."""

from __future__ import annotations

import json
import re

import pytest
from redis import Redis
from starlette.testclient import TestClient

from relay.runtime.bootstrap import Runtime
from relay.storage.received import parse_before
from relay.storage.records import RECEIVED
from tests.conftest import accept as accept_now
from tests.conftest import sample_notification

T = 1_800_000_000.0


@pytest.fixture
def logged_in(rt: Runtime, client: TestClient) -> TestClient:
    from tests.admin.test_ui import login

    rt.clock.set(T)  # the session's time too: it lasts its hours on relay's clock
    assert login(client).status_code == 303
    return client


def accept(rt: Runtime, event_id: str, at: float) -> None:
    rt.clock.set(at)
    payload = sample_notification()
    payload["metadata"]["eventId"] = event_id
    assert accept_now(rt, event_id, payload["kind"], json.dumps(payload)) == "accepted"


def pages(client: TestClient, limit: int, first: str = "/ui") -> list[list[str]]:
    """The eventIds each page lists, following its "Older notifications" link to the end."""
    found: list[list[str]] = []
    link: str | None = f"{first}{'&' if '?' in first else '?'}limit={limit}"
    while link is not None and len(found) < 10:
        answer = client.get(link)
        assert answer.status_code == 200
        found.append(re.findall(r'data-event-id="([^"]+)"', answer.text))
        older = re.search(r'href="(/ui\?before=[^"]+)">Older notifications', answer.text)
        link = older.group(1).replace("&amp;", "&") if older else None
    return found


def test_notifications_of_one_millisecond_are_cut_at_a_page_end_and_none_is_lost(
    rt: Runtime, redis: Redis, logged_in: TestClient
) -> None:
    accept(rt, "n0", T)
    for i in range(1, 5):  # four in the next millisecond
        accept(rt, f"n{i}", T + 0.001)
    assert [i for i, _ in redis.xrange(RECEIVED)][-1] == b"1800000000001-3"
    assert pages(logged_in, 3) == [["n4", "n3", "n2"], ["n1", "n0"]]
    assert "before=1800000000001-1" in logged_in.get("/ui?limit=3").text  # the last one shown's stream ID
    assert pages(logged_in, 25, "/ui?before=1800000000001-0") == [["n0"]]
    assert pages(logged_in, 25, "/ui?before=0-0") == [[]]


@pytest.mark.parametrize(
    "bad", ["1-", "-1-2", "1-2-3", "1-x", "18446744073709551616-0", "1_000", "nan", "1e300", "-5", "1.5", " 5"]
)
def test_a_cursor_that_is_none_is_a_400(logged_in: TestClient, bad: str) -> None:
    with pytest.raises(ValueError):
        parse_before(bad)
    assert logged_in.get("/ui", params={"before": bad}).status_code == 400


def test_a_cursor_past_every_time_lists_from_the_newest(rt: Runtime, logged_in: TestClient) -> None:
    accept(rt, "only", T)
    assert parse_before("18446744073709551615-18446744073709551615") == (2**64 - 1, 2**64 - 1)
    assert pages(logged_in, 25, "/ui?before=18446744073709551615-0") == [["only"]]
