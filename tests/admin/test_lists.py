"""The lists of deliveries from their index (issue 38): filters, pages and cursors, state moves, pruning and
the compact records (issue 36), on a real Redis with a few records."""

from __future__ import annotations

import math
import time
from typing import Any
from urllib.parse import quote

import pytest
from redis import Redis
from starlette.testclient import TestClient

from relay.admin.selection import Filters
from relay.core.clock import system_clock
from relay.core.model import Delivery, State
from relay.runtime.bootstrap import Runtime
from relay.storage.lists import LISTS, Cursor, list_key
from relay.storage.records import STORED, delivery_from_hash, delivery_key, delivery_to_hash, event_key
from relay.storage.store import Store
from tests.conftest import admin, post, run_worker, sample_notification

T0 = time.time() - 600


def _record(n: int, state: State, channel: str, kind: str, at: float) -> Delivery:
    return Delivery(f"d{n:04d}", f"e{n}", kind, 0, channel, "auto", 3, at, at, state=state)


@pytest.fixture
def store(redis: Redis) -> Store:
    return Store(redis, 3600, system_clock)  # the records below are timed by the wall clock


def _fill(store: Store) -> list[Delivery]:
    """Twelve deliveries over three states, two channels and two kinds, one a second apart (two at once)."""
    states = [State.DELIVERED, State.FAILED, State.HELD]
    records = []
    for n in range(12):
        at = T0 + n if n != 11 else T0 + 10  # d0010 and d0011 at the same time: ordered by id
        kind = "notification:a" if n % 2 else "notification:b"
        records.append(_record(n, states[n % 3], "chat" if n < 6 else "mail", kind, at))
    for r in records:
        store.create_deliveries(r.eventId, [r])
    return records


def _ids(found: list[Delivery]) -> list[str]:
    return [r.id for r in found]


def _newest(records: list[Delivery]) -> list[str]:
    return [r.id for r in sorted(records, key=lambda r: (r.updatedAt, r.id), reverse=True)]


def test_every_filter_and_combination_lists_the_matching_deliveries_newest_first(store: Store) -> None:
    records = _fill(store)
    cases: list[dict[str, Any]] = [
        {},
        {"state": State.FAILED},
        {"channel": "mail"},
        {"kind": "notification:a"},
        {"kind": "notification:*"},
        {"kind": "*:b", "channel": "chat"},
        {"state": State.DELIVERED, "channel": "mail", "kind": "notification:a"},
        {"since": T0 + 7.5},
        {"state": State.HELD, "since": T0 + 4},
        {"channel": "nowhere"},
    ]
    for case in cases:
        wanted = [r for r in records if Filters(**case).matches(r)]
        assert _ids(Filters(**case).page(store, 50)[0]) == _newest(wanted), case
    assert _ids(Filters().page(store, 3)[0]) == ["d0011", "d0010", "d0009"]  # equal times: by id, highest first


def test_pages_follow_the_cursor_without_a_gap_or_a_repeat(store: Store) -> None:
    records = _fill(store)
    for filters, size in ((Filters(), 5), (Filters(channel="mail"), 2), (Filters(kind="*:a"), 1)):
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            page, cursor = filters.page(store, size, cursor)
            assert len(page) <= size
            seen += _ids(page)
            pages += 1
            if cursor is None:
                break
        assert seen == _newest([r for r in records if filters.matches(r)])
        assert pages == -(-len(seen) // size)  # no empty last page


def test_a_notification_s_deliveries_page_with_the_same_cursor(store: Store) -> None:
    records = [_record(n, State.DELIVERED, "chat", "k", T0 + n % 2) for n in range(5)]
    for r in records:
        r.eventId = "e-one"
    # The event's record lists its deliveries (none is added to an event not stored).
    store.redis.hset(event_key("e-one"), mapping={"receivedAt": repr(T0), "payload": "{}"})
    store.create_deliveries("e-one", records)
    first, cursor = Filters(event_id="e-one").page(store, 3)
    rest, last = Filters(event_id="e-one").page(store, 3, cursor)
    assert _ids(first) + _ids(rest) == _newest(records) and last is None


def test_a_state_change_moves_the_delivery_to_its_new_list_only(store: Store, redis: Redis) -> None:
    records = _fill(store)
    moved = store.delivery("d0001")  # failed
    assert moved is not None
    moved.state = State.QUEUED
    store.update(moved, State.FAILED)
    assert "d0001" not in _ids(Filters(state=State.FAILED).page(store, 50)[0])
    assert _ids(Filters(state=State.QUEUED).page(store, 50)[0]) == ["d0001"]
    assert _ids(Filters().page(store, 50)[0]) == _newest(records)  # in its place: by creation
    listed = [k for k in redis.smembers(LISTS) if redis.zscore(k, "d0001") is not None]
    assert listed == [list_key("queued", "chat", "notification:a").encode()]


def test_pruning_drops_entries_past_the_retention_and_empty_lists_leave_their_registry(
    store: Store, redis: Redis
) -> None:
    old = _record(1, State.DELIVERED, "chat", "old", time.time() - 7200)
    new = _record(2, State.DELIVERED, "chat", "new", time.time())
    store.create_deliveries("e", [old, new])
    redis.delete(delivery_key(old.id))  # expired, as Redis does after the retention
    assert _ids(Filters().page(store, 50)[0]) == ["d0002"]  # an entry whose record is gone is left out
    store.prune()
    assert redis.zcard(list_key("delivered", "chat", "old")) == 0
    assert redis.smembers(LISTS) == {list_key("delivered", "chat", "new").encode()}


def test_records_keep_no_empty_field_and_a_cleared_one_is_deleted(store: Store, redis: Redis) -> None:
    record = _record(1, State.FAILED, "chat", "k", T0)
    record.lastError, record.attempts = "HTTP 500", 3
    store.create_deliveries("e1", [record])
    stored = {k.decode() for k in redis.hkeys(delivery_key("d0001"))}
    names = ["eventId", "kind", "channel", "state", "attempts", "maxAttempts", "lastError", "createdAt", "updatedAt"]
    assert stored == {STORED[n] for n in names}  # under their short names
    record.state, record.lastError = State.QUEUED, None
    store.update(record, State.FAILED)
    assert redis.hget(delivery_key("d0001"), STORED["lastError"]) is None
    again = store.delivery("d0001")
    assert again is not None and again.lastError is None and again.template == "auto" and again.fallback == []


def test_a_cursor_that_is_none_a_listing_gave_is_refused() -> None:
    with pytest.raises(ValueError):
        Cursor.parse("12; DROP")
    assert Cursor.parse("1795692446.2775326~d01").id == "d01"


@pytest.mark.parametrize("cursor", ["45e~5e", "12; DROP"])  # the first fits the pattern; its score is no number
def test_the_api_answers_a_cursor_no_listing_gave_422_naming_it(client: TestClient, cursor: str) -> None:
    answer = admin(client, f"/api/v1/deliveries?cursor={quote(cursor)}")
    assert answer.status_code == 422 and answer.json()["inputErrorField"] == "cursor"


def test_the_api_pages_with_a_link_header(client: TestClient, rt: Runtime) -> None:
    post(client, sample_notification())
    run_worker(rt)
    everything = admin(client, "/api/v1/deliveries").json()
    assert len(everything) == 3
    first = admin(client, "/api/v1/deliveries?limit=2")
    link = first.headers["link"]
    assert link.endswith('>; rel="next"') and "cursor=" in link
    rest = admin(client, link[1 : link.index(">")].removeprefix("http://testserver"))
    assert [d["id"] for d in first.json() + rest.json()] == [d["id"] for d in everything]
    assert "link" not in rest.headers
    assert admin(client, "/api/v1/deliveries?cursor=nonsense").status_code == 422


def test_an_attempt_log_is_stored_without_its_nulls_and_read_whole() -> None:
    record = _record(1, State.DELIVERED, "chat", "k", T0)
    at = math.floor((T0 + 1) * 1000) / 1000  # times are stored to the millisecond
    entry = {"at": at, "outcome": "delivered", "status": None, "said": None, "error": None, "seconds": 0.01}
    record.attemptLog, record.attemptTimes = [entry], [at]
    stored = delivery_to_hash(record)
    log = stored[STORED["attemptLog"]]
    assert STORED["attemptTimes"] not in stored and "null" not in log and ", " not in log
    again = delivery_from_hash(stored, record.id)
    assert again.attemptLog == [entry] and list(again.attemptLog[0]) == list(entry)
    assert again.attemptTimes == [at]
    record.attemptLog[0]["at"] = T0 + 1.0004567  # kept to the millisecond
    cut = delivery_from_hash(delivery_to_hash(record), record.id).attemptLog[0]["at"]
    assert cut == math.floor((T0 + 1.0004567) * 1000) / 1000 and cut <= T0 + 1.0004567
    record.attemptLog[0]["at"] = at
    record.attemptTimes = [T0, T0 + 1]  # more tries than the log keeps: stored as they are
    assert delivery_from_hash(delivery_to_hash(record), record.id).attemptTimes == [T0, T0 + 1]


def test_a_replay_since_a_time_chooses_what_failed_since_and_a_listing_what_was_created_since(store: Store) -> None:
    record = _record(1, State.QUEUED, "chat", "k", T0)  # created ten minutes ago
    store.create_deliveries("e1", [record])
    record.state = State.FAILED
    store.update(record, State.QUEUED)  # failed now
    recently = time.time() - 60
    chosen, _ = Filters(State.FAILED, since=recently).chosen(store)
    assert _ids(chosen) == ["d0001"]
    assert Filters(State.FAILED, since=recently).page(store, 50)[0] == []
    assert _ids(Filters(State.FAILED, since=T0 - 1).page(store, 50)[0]) == ["d0001"]
