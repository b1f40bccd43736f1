"""The admin page's list of notifications, a page at a time (issue 36, P6): read from the stream of those
received (`relay:received`), merged by time with the zset an earlier relay indexed them in (`relay:events`);
the next page starts below the last one shown, its stream ID, so that none is lost or shown twice at a page's
end, even among notifications of one millisecond. An earlier relay's link (`before=<seconds>`) still works."""

from __future__ import annotations

import json
import re

import pytest
from redis import Redis
from starlette.testclient import TestClient

from relay.runtime.bootstrap import Runtime
from relay.storage.received import parse_before
from relay.storage.records import EVENTS, PREFIX, RECEIVED
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
    assert rt.intake.accept(event_id, payload["kind"], json.dumps(payload)) == "accepted"


def accepted_by_an_earlier_relay(redis: Redis, event_id: str, at: float) -> None:
    """An event as an earlier relay stored it: its record, and its entry in the zset `relay:events`."""
    payload = sample_notification()
    payload["metadata"]["eventId"] = event_id
    fields = {"eventId": event_id, "kind": payload["kind"], "receivedAt": repr(at), "payload": json.dumps(payload)}
    redis.hset(f"{PREFIX}event:{event_id}", mapping=fields)
    redis.zadd(EVENTS, {event_id: at})


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


def test_an_earlier_relays_notifications_are_listed_after_the_streams(
    rt: Runtime, redis: Redis, logged_in: TestClient
) -> None:
    accepted_by_an_earlier_relay(redis, "old-1", T - 100)
    accepted_by_an_earlier_relay(redis, "old-2", T - 50)
    accept(rt, "new-1", T)
    accept(rt, "new-2", T + 1)
    assert pages(logged_in, 3) == [["new-2", "new-1", "old-2"], ["old-1"]]
    assert pages(logged_in, 25) == [["new-2", "new-1", "old-2", "old-1"]]
    # The next page after an earlier relay's entry starts below its time: a float, as an earlier relay's link.
    assert f"before={T - 50!r}" in logged_in.get("/ui?limit=3").text


def test_the_two_are_merged_by_time_when_their_times_cross(rt: Runtime, redis: Redis, logged_in: TestClient) -> None:
    """A fleet mid-upgrade (an earlier API beside a new one), or a downgrade and upgrade again: an earlier relay's
    entries between the stream's. Each page is in time order, and none is lost or repeated."""
    accept(rt, "s-1", T)
    accepted_by_an_earlier_relay(redis, "z-2", T + 1)
    accept(rt, "s-3", T + 2)
    accepted_by_an_earlier_relay(redis, "z-3", T + 2)  # the same time as s-3, to the ms: after it
    accept(rt, "s-4", T + 3)
    assert pages(logged_in, 1) == [["s-4"], ["s-3"], ["z-3"], ["z-2"], ["s-1"]]
    assert pages(logged_in, 2) == [["s-4", "s-3"], ["z-3", "z-2"], ["s-1"]]


def test_an_earlier_relays_link_lists_those_received_before_its_time(
    rt: Runtime, redis: Redis, logged_in: TestClient
) -> None:
    accepted_by_an_earlier_relay(redis, "old", T - 1)
    accept(rt, "at-t", T)
    accept(rt, "a-ms-later", T + 0.001)
    assert pages(logged_in, 25, f"/ui?before={T + 0.001!r}") == [["at-t", "old"]]
    assert pages(logged_in, 25, f"/ui?before={T + 0.0015!r}") == [["a-ms-later", "at-t", "old"]]
    assert pages(logged_in, 25, f"/ui?before={T!r}") == [["old"]]
    assert pages(logged_in, 25, "/ui?before=1800000000001-0") == [["at-t", "old"]]
    assert pages(logged_in, 25, "/ui?before=0-0") == [[]]
    assert pages(logged_in, 25, "/ui?before=-5") == [[]]


@pytest.mark.parametrize(
    "bad", ["1-", "-1-2", "1-2-3", "1-x", "18446744073709551616-0", "1_000", "nan", "inf", "1e999", "0x10", " 5"]
)
def test_a_cursor_that_is_none_is_a_400(logged_in: TestClient, bad: str) -> None:
    with pytest.raises(ValueError):
        parse_before(bad)
    assert logged_in.get("/ui", params={"before": bad}).status_code == 400


def test_a_cursor_past_every_time_lists_from_the_newest(rt: Runtime, logged_in: TestClient) -> None:
    accept(rt, "only", T)
    assert parse_before("18446744073709551615-18446744073709551615") == (2**64 - 1, 2**64 - 1)
    assert pages(logged_in, 25, "/ui?before=18446744073709551615-0") == [["only"]]
    assert pages(logged_in, 25, "/ui?before=1e300") == [["only"]]
