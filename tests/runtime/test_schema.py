"""The stored layout's version (`relay.storage.schema`), on a real Redis: written once into an empty store by the
first process built on it, and every process (API, worker, CLI) refusing at start, in one line that says what
to do, a store of another version or one holding relay's keys with none."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from redis import Redis

from relay.cli import main
from relay.runtime.bootstrap import Runtime
from relay.runtime.embedded import EmbeddedRedis
from relay.storage.schema import SCHEMA, SCHEMA_KEY, SchemaRefused
from tests.conftest import accept, sample_notification, worker_config_file


def _accept(rt: Runtime) -> str:
    payload = sample_notification()
    event_id = payload["metadata"]["eventId"]
    assert accept(rt, event_id, payload["kind"], json.dumps(payload)) == "accepted"
    return event_id


def test_an_empty_store_is_given_the_version_and_a_store_of_it_is_accepted(
    make_runtime: Callable[..., Runtime], redis: Redis
) -> None:
    assert redis.dbsize() == 0
    first = make_runtime()
    assert redis.get(SCHEMA_KEY) == str(SCHEMA).encode() and redis.ttl(SCHEMA_KEY) == -1  # kept for good
    event_id = _accept(first)
    again = make_runtime()  # relay's keys, with the version the first wrote
    assert redis.get(SCHEMA_KEY) == b"1" and again.store.event(event_id) is not None


def _refused_by_every_command(config: Path, capsys: pytest.CaptureFixture[str], *words: str) -> None:
    capsys.readouterr()
    for argv in (["worker", "--burst"], ["status", "some-event"], ["deliveries"], ["prefs", "show", "a@example.com"]):
        assert main([*argv, "--config", str(config)]) == 5, argv  # Redis unusable, as unreachable
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and all(w in err for w in words), (argv, err)


def test_a_store_of_another_version_is_refused_at_start_saying_what_to_do(
    make_runtime: Callable[..., Runtime],
    redis: Redis,
    redis_server: EmbeddedRedis,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    redis.set(SCHEMA_KEY, "2")
    redis.hset("relay:event:e1", "payload", "{}")  # as relay 2 might store it: left alone
    with pytest.raises(SchemaRefused, match="schema '2', and this relay reads schema 1: run the relay that wrote"):
        make_runtime()
    _refused_by_every_command(worker_config_file(tmp_path, redis_server.url), capsys, "schema '2'", "CHANGELOG.md")
    assert redis.get(SCHEMA_KEY) == b"2" and redis.hgetall("relay:event:e1") == {b"payload": b"{}"}


def test_relays_keys_with_no_version_are_refused(
    make_runtime: Callable[..., Runtime],
    redis: Redis,
    redis_server: EmbeddedRedis,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    redis.zadd("relay:events", {"e1": 1.0})  # a layout from before the version was kept
    with pytest.raises(SchemaRefused, match="no relay:schema"):
        make_runtime()
    _refused_by_every_command(worker_config_file(tmp_path, redis_server.url), capsys, "no relay:schema", "empty")
    assert not redis.exists(SCHEMA_KEY)
    redis.delete("relay:events")  # as the message says: relay's keys gone, the store starts at the version
    make_runtime()
    assert redis.get(SCHEMA_KEY) == b"1"


def test_other_programs_keys_are_no_store_of_relays(make_runtime: Callable[..., Runtime], redis: Redis) -> None:
    redis.set("rq:something", "x")  # RQ's, or another program's, in the same database
    make_runtime()
    assert redis.get(SCHEMA_KEY) == b"1"
