"""The keeper of the embedded Redis, in-process against a real redis-server: SIGKILL it and watch it come back
on its append-only file; starts that fail (an injected starter) until it gives up; a crash loop."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis

from relay.runtime.embedded import EmbeddedRedis, EmbeddedRedisError
from relay.runtime.redis_keeper import RedisKeeper, describe_exit
from tests.servers import wait_for

FAST = (0.01, 0.02, 0.04)  # back-off of the tests; they poll every 10 ms


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    started = EmbeddedRedis(tmp_path / "data", "always").start()
    yield started
    started.stop()


def test_a_killed_redis_is_started_again_on_its_append_only_file(
    server: EmbeddedRedis, caplog: pytest.LogCaptureFixture
) -> None:
    Redis.from_url(server.url).set("acknowledged", "1")
    counted: list[int] = []
    gave_up = threading.Event()
    keeper = RedisKeeper(server, on_give_up=gave_up.set, on_restart=counted.append, backoff=FAST, poll=0.01).start()
    try:
        with caplog.at_level(logging.WARNING, logger="relay.serve"):
            first = server.proc
            server.kill()  # SIGKILL
            wait_for(lambda: counted == [1], timeout=20)
            assert server.proc is not first and server.returncode is None
            assert Redis.from_url(server.url).get("acknowledged") == b"1"
            server.kill()  # again, long after: a fresh series of tries, counted on
            wait_for(lambda: counted == [1, 2], timeout=20)
    finally:
        keeper.stop()
    assert keeper.restarts == 2 and not keeper.gave_up and not gave_up.is_set()
    lines = [r.getMessage() for r in caplog.records]
    assert "embedded Redis killed by SIGKILL: starting it again on its append-only file" in lines
    assert any(line.startswith(f"embedded Redis is back on {server.url}") and "(restart 2 " in line for line in lines)


def test_failed_starts_are_tried_again_with_back_off(server: EmbeddedRedis) -> None:
    tries: list[str] = []

    def flaky_start() -> object:
        tries.append("try")
        if len(tries) <= 2:
            raise EmbeddedRedisError("embedded Redis exited at start (code 1)")
        return server.start()

    counted: list[int] = []
    keeper = RedisKeeper(
        server, on_give_up=lambda: None, on_restart=counted.append, start=flaky_start, backoff=FAST, poll=0.01
    )
    keeper.start()
    try:
        server.kill()
        wait_for(lambda: counted == [1], timeout=20)
    finally:
        keeper.stop()
    assert len(tries) == 3 and not keeper.gave_up
    assert Redis.from_url(server.url).ping()


def test_it_gives_up_after_max_failures_in_a_row(server: EmbeddedRedis, caplog: pytest.LogCaptureFixture) -> None:
    tries: list[str] = []

    def broken_start() -> object:
        tries.append("try")
        raise EmbeddedRedisError("embedded Redis exited at start (code 1): Bad file format reading the AOF")

    gave_up = threading.Event()
    keeper = RedisKeeper(server, on_give_up=gave_up.set, start=broken_start, max_failures=4, backoff=FAST, poll=0.01)
    keeper.start()
    try:
        with caplog.at_level(logging.WARNING, logger="relay.serve"):
            server.kill()
            assert gave_up.wait(20)
            keeper.thread.join(5)
    finally:
        keeper.stop()
    assert len(tries) == 4 and keeper.gave_up and keeper.restarts == 0
    assert not keeper.thread.is_alive()  # gave up once, tries no more
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "4 tries in a row failed" in errors[0] and "exit code 3" in errors[0]


def test_a_redis_that_dies_again_at_once_is_a_failed_start(server: EmbeddedRedis) -> None:
    """A crash loop (Redis starts, then dies within stable_seconds) ends in giving up, not in restarts forever."""

    def start_then_die() -> object:
        server.start()
        server.kill()
        return server

    gave_up = threading.Event()
    keeper = RedisKeeper(
        server,
        on_give_up=gave_up.set,
        start=start_then_die,
        max_failures=3,
        stable_seconds=60.0,
        backoff=FAST,
        poll=0.01,
    ).start()
    try:
        server.kill()
        assert gave_up.wait(30)
    finally:
        keeper.stop()
    assert keeper.gave_up and keeper.restarts == 3  # three restarts in a row that died at once


def test_failed_tries_before_a_restart_that_did_not_hold_count_in_the_same_row(server: EmbeddedRedis) -> None:
    tries: list[str] = []

    def fail_fail_start_then_die_then_fail() -> object:
        tries.append("try")
        if len(tries) == 3:
            server.start()
            server.kill()
            return server
        raise EmbeddedRedisError("embedded Redis exited at start (code 1)")

    gave_up = threading.Event()
    keeper = RedisKeeper(
        server,
        on_give_up=gave_up.set,
        start=fail_fail_start_then_die_then_fail,
        max_failures=4,
        stable_seconds=60.0,
        backoff=FAST,
        poll=0.01,
    ).start()
    try:
        server.kill()
        assert gave_up.wait(30)
    finally:
        keeper.stop()
    # Two failed tries, a restart that died at once (the third failure), one more failed try: four in a row.
    assert len(tries) == 4 and keeper.restarts == 1


def test_stop_ends_the_keeper_while_it_waits_between_tries(server: EmbeddedRedis) -> None:
    keeper = RedisKeeper(server, on_give_up=lambda: None, start=lambda: None, backoff=(30.0,), poll=0.01).start()
    server.kill()
    wait_for(lambda: server.returncode is not None)
    keeper.stop()
    assert not keeper.thread.is_alive() and not keeper.gave_up


def test_describe_exit() -> None:
    assert describe_exit(-9) == "killed by SIGKILL"
    assert describe_exit(1) == "exited with code 1"
