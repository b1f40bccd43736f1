"""The keeper of the embedded Redis, in-process against a real redis-server: SIGKILL it and watch it come back
on its append-only file; failed starts and restarts that did not hold, counted in one row by the policy of
every child (`relay.runtime.restarts`, whose rule tests/runtime/test_restarts.py checks), until it gives up."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis
from redis.exceptions import RedisError

from relay.runtime.embedded import EmbeddedRedis, EmbeddedRedisError
from relay.runtime.redis_keeper import RedisKeeper
from relay.runtime.restarts import Policy
from tests.processes import kill
from tests.servers import wait_for

FAST = Policy(first_delay=0.01, max_delay=0.04)  # the tests' back-off; they poll every 10 ms


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
    # Long after its start (a start window of 0): each death is a fresh series of tries, counted on.
    policy = Policy(first_delay=0.01, max_delay=0.04, start_window=0.0)
    keeper = RedisKeeper(server, on_give_up=gave_up.set, on_restart=counted.append, policy=policy, poll=0.01).start()
    try:
        with caplog.at_level(logging.WARNING, logger="relay.serve"):
            first = server.proc
            kill(server)  # SIGKILL
            wait_for(lambda: counted == [1], timeout=20)
            assert server.proc is not first and server.returncode is None
            assert Redis.from_url(server.url).get("acknowledged") == b"1"
            kill(server)
            wait_for(lambda: counted == [1, 2], timeout=20)
    finally:
        keeper.stop()
    assert keeper.restarts == 2 and keeper.failure is None and not gave_up.is_set()
    lines = [r.getMessage() for r in caplog.records]
    assert "embedded Redis killed by SIGKILL; starting it again in 0.01 s" in lines
    assert any(line.startswith(f"embedded Redis is back on {server.url}") and "(restart 2 " in line for line in lines)


def test_failed_starts_are_tried_again_until_one_holds(server: EmbeddedRedis) -> None:
    tries: list[str] = []

    def flaky_start() -> object:
        tries.append("try")
        if len(tries) <= 1:
            raise EmbeddedRedisError("embedded Redis exited at start (code 1)")
        return server.start()

    counted: list[int] = []
    keeper = RedisKeeper(
        server, on_give_up=lambda: None, on_restart=counted.append, start=flaky_start, policy=FAST, poll=0.01
    )
    keeper.start()
    try:
        kill(server)
        wait_for(lambda: counted == [1], timeout=20)
    finally:
        keeper.stop()
    assert len(tries) == 2 and keeper.failure is None
    wait_for(lambda: _answers(server.url), timeout=10)  # up (a loaded machine may take a moment to accept)


def _answers(url: str) -> bool:
    try:
        return bool(Redis.from_url(url, socket_timeout=2).ping())
    except RedisError:
        return False


def test_failed_starts_and_restarts_that_did_not_hold_count_in_one_row_until_it_gives_up(
    server: EmbeddedRedis, caplog: pytest.LogCaptureFixture
) -> None:
    tries: list[str] = []

    def fail_then_start_and_die_then_fail() -> object:
        tries.append("try")
        if len(tries) == 2:  # starts, then dies at once: a crash loop, no better than a failed start
            server.start()
            kill(server)
            return server
        raise EmbeddedRedisError("embedded Redis exited at start (code 1): Bad file format reading the AOF")

    gave_up = threading.Event()
    policy = Policy(first_delay=0.01, max_delay=0.04, give_up_after=4, start_window=60.0)
    keeper = RedisKeeper(
        server, on_give_up=gave_up.set, start=fail_then_start_and_die_then_fail, policy=policy, poll=0.01
    ).start()
    try:
        with caplog.at_level(logging.WARNING, logger="relay.serve"):
            kill(server)  # within 60 s of its start: the first failed start of the row
            assert gave_up.wait(30)
            keeper.thread.join(5)
    finally:
        keeper.stop()
    # Its death, a failed try, a restart that died at once, a failed try: four in a row.
    assert len(tries) == 3 and keeper.restarts == 1
    assert not keeper.thread.is_alive()  # gave up once, tries no more
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].startswith("the embedded Redis failed to start 4 times in a row")
    assert "Bad file format" in errors[0] and errors[0].endswith("relay serve stops with exit code 3")


def test_stop_ends_the_keeper_while_it_waits_between_tries(server: EmbeddedRedis) -> None:
    policy = Policy(first_delay=30.0)
    keeper = RedisKeeper(server, on_give_up=lambda: None, start=lambda: None, policy=policy, poll=0.01).start()
    kill(server)
    wait_for(lambda: server.returncode is not None)
    keeper.stop()
    assert not keeper.thread.is_alive() and keeper.failure is None
