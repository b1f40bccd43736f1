"""The notifications received, as the accept script lists them (issue 36, P6): one stream entry each in
`relay:received`, its ID the receivedAt in ms (relay's clock), always above the last one given; pruned with the
retention."""

from __future__ import annotations

import json

import pytest
from redis import Redis

from relay.runtime.bootstrap import Runtime
from relay.storage.records import RECEIVED, event_key
from relay.storage.work_queue import QueueUnavailable
from tests.conftest import accept, sample_notification


def _accept(rt: Runtime, event_id: str) -> str:
    payload = sample_notification()
    payload["metadata"]["eventId"] = event_id
    return accept(rt, event_id, payload["kind"], json.dumps(payload))


def _listed(redis: Redis) -> list[tuple[str, str]]:
    return [(i.decode(), f[b"eventId"].decode()) for i, f in redis.xrange(RECEIVED)]


def test_an_accept_lists_the_notification_at_its_receivedat_in_ms(rt: Runtime, redis: Redis) -> None:
    rt.clock.set(1_800_000_000.1234)
    assert _accept(rt, "ev-1") != "duplicate"
    assert _listed(redis) == [("1800000000123-0", "ev-1")]
    assert redis.hget(event_key("ev-1"), "receivedAt") == b"1800000000.123"  # the same time as its ID


def test_two_in_one_ms_and_a_clock_moved_back_are_listed_in_order(rt: Runtime, redis: Redis) -> None:
    rt.clock.set(1_800_000_000.5)
    _accept(rt, "first")
    _accept(rt, "same-ms")
    rt.clock.set(1_799_999_000.0)  # back, by a quarter of an hour: another replica's clock, or a test's
    _accept(rt, "moved-back")
    rt.clock.set(1_800_000_000.501)
    _accept(rt, "next-ms")
    assert _listed(redis) == [
        ("1800000000500-0", "first"),
        ("1800000000500-1", "same-ms"),
        ("1800000000500-2", "moved-back"),
        ("1800000000501-0", "next-ms"),
    ]


def test_a_duplicate_is_not_listed_again(rt: Runtime, redis: Redis) -> None:
    assert _accept(rt, "ev-dup") != "duplicate"
    rt.clock.advance(1)
    assert _accept(rt, "ev-dup") == "duplicate"
    assert [event_id for _, event_id in _listed(redis)] == ["ev-dup"]


def test_prune_drops_the_entries_older_than_the_retention(rt: Runtime, redis: Redis) -> None:
    start = 1_800_000_000.0
    rt.clock.set(start)
    _accept(rt, "old")
    rt.clock.set(start + 1)
    _accept(rt, "kept")
    rt.clock.set(start + rt.store.retention + 0.5)  # "old" is half a second past the retention, "kept" within
    rt.store.prune()
    assert [event_id for _, event_id in _listed(redis)] == ["kept"]
    # Every entry gone, the stream still knows the last ID it gave: one received earlier than it goes after it.
    rt.clock.set(start + 2 * rt.store.retention)
    rt.store.prune()
    assert redis.exists(RECEIVED) and redis.xlen(RECEIVED) == 0
    rt.clock.set(start - 10)
    _accept(rt, "late")
    assert _listed(redis) == [(f"{round((start + 1) * 1000)}-1", "late")]


def test_a_stream_key_of_another_type_fails_the_accept_with_nothing_written(rt: Runtime, redis: Redis) -> None:
    redis.zadd(RECEIVED, {"x": 1.0})
    payload = sample_notification()
    event_id = payload["metadata"]["eventId"]
    with pytest.raises(QueueUnavailable, match="holds a zset: nothing accepted"):
        accept(rt, event_id, payload["kind"], json.dumps(payload))
    assert not redis.exists(event_key(event_id)) and redis.type(RECEIVED) == b"zset"
