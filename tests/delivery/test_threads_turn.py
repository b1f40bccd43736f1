"""A threaded message's turn (relay.threads.store, `_TURN`): it waits for a notification received before its own
that is still to be planned, found by the event's key, which the script builds from the event id as
`relay.storage.records.key_part` does. Real Redis; times are numbers handed in."""

from __future__ import annotations

from redis import Redis

from relay.storage.leases import LEASES, UNPLANNED
from relay.storage.records import event_key
from relay.threads.model import Conversation
from relay.threads.store import Threads, Waits

T0 = 1_800_000_000.0
# `%` and `:` are quoted in an event's key: the script's quoting must be key_part's, or it reads no event.
ODD_ID = "urn:li:dataset:(urn:li:dataPlatform:kafka,a%3Ab,PROD)"


def turn(redis: Redis, ident: str = "d1") -> object:
    return Threads(redis).turn("c1", ident, T0, T0, recheck=T0 + 30, soon=T0 + 1, ttl=3600)


def test_a_message_waits_for_an_earlier_notification_given_back_to_planning_whatever_its_id(redis: Redis) -> None:
    redis.hset(event_key(ODD_ID), "receivedAt", repr(T0 - 5))
    redis.zadd(UNPLANNED, {ODD_ID: T0 + 60})  # given back: due after the message's own time, received before it
    assert turn(redis) == Waits(f"e:{ODD_ID}", T0 + 1)


def test_a_message_waits_for_an_earlier_notification_being_planned_and_not_for_a_later_one(redis: Redis) -> None:
    redis.hset(event_key(ODD_ID), "receivedAt", repr(T0 + 5))
    redis.hset(LEASES, f"e:{ODD_ID}", "worker-1")
    assert isinstance(turn(redis, "d1"), Conversation)  # received after: no wait
    redis.hset(event_key(ODD_ID), "receivedAt", repr(T0 - 5))
    assert turn(redis, "d2") == Waits(f"e:{ODD_ID}", T0 + 1)
