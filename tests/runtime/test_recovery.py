"""After SIGKILL of workers (the one holding RQ's scheduler, or all of them during work), with the sink
failing and then recovering, every accepted notification is delivered within two minutes, each once.

Real processes, a real Redis, a real HTTP sink; these tests wait for RQ's and relay's own clocks (a live
worker takes a dead one's scheduler over at its next maintenance pass, every 15 s; an abandoned job is found
20 + 60 s after its start), so each takes up to 1-2 min.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from redis import Redis
from starlette.testclient import TestClient

from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime, build
from relay.runtime.embedded import EmbeddedRedis
from relay.runtime.worker import MAINTENANCE_INTERVAL
from relay.storage.leases import LEASES
from tests.conftest import base_config, post, sample_notification, worker_config_file
from tests.processes import children
from tests.servers import HttpSink, SmtpSink, wait_for

RELAY = str(Path(sys.executable).parent / "relay")
TARGET = 90.0  # seconds: every accepted notification delivered within this of a SIGKILL of every worker
# A worker not heard from for 6 s is taken for dead here (45 s by default): the same sweep, sooner.
DEAD_AFTER = 6.0
SETTINGS: dict[str, Any] = {
    "channels": {"flaky": {"url": ""}},
    "routes": [{"channels": ["flaky"]}],
    "default": {"channels": []},
    "retry": {"attempts": 6, "backoff": ["2s"]},
    "send_timeout": "5s",
    "worker_threads": 4,
    "dead_worker_after": f"{DEAD_AFTER:g}s",
}


def _start(path: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [RELAY, "worker", "--config", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _states(rt: Runtime, events: list[str]) -> list[str]:
    states = []
    for event_id in events:
        states += [r.state for r in rt.store.deliveries(rt.store.event_delivery_ids(event_id)) if r]
    return states


def _holder(procs: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes] | None:
    """The worker that forked RQ's scheduler (the one that holds RQ's scheduler lock)."""
    holders = [p for p in procs if children(p.pid)]
    return holders[0] if len(holders) == 1 else None


def _setup(redis: Redis, redis_server: EmbeddedRedis, sink: HttpSink, smtp: SmtpSink, tmp_path: Path) -> Any:
    # These measure retries and lost workers: a channel down for a while waits apart (tests/delivery/test_outages.py).
    settings = {**SETTINGS, "channels": {"flaky": {"url": sink.url("/flaky"), "outage": "off"}}}
    rt = build(base_config(sink, smtp, tmp_path, redis_server.url, **settings), redis)
    return rt, worker_config_file(tmp_path, redis_server.url, **settings)


def _post(rt: Runtime, count: int) -> list[str]:
    events = []
    with TestClient(create_app(rt)) as client:
        for _ in range(count):
            payload = sample_notification(messages=[sample_notification()["messages"][0]])
            assert post(client, payload).status_code == 202
            events.append(payload["metadata"]["eventId"])
    return events


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.slow  # started first: its waiting on the real clock overlaps the run
def test_killing_the_worker_that_holds_the_scheduler_delays_retries_by_a_maintenance_pass_at_most(
    redis: Redis, redis_server: EmbeddedRedis, sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    rt, path = _setup(redis, redis_server, sink, smtp, tmp_path)
    sink.script["/flaky"] = [503] * 10_000  # down
    procs = [_start(path), _start(path)]
    try:
        holder = wait_for(lambda: _holder(procs), timeout=30, interval=0.2)
        events = _post(rt, 20)
        wait_for(lambda: _states(rt, events).count("retrying") == 20, timeout=30, interval=0.2)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        killed = time.monotonic()
        with sink.lock:
            sink.script["/flaky"].clear()  # the sink recovers
        wait_for(lambda: _states(rt, events) == ["delivered"] * 20, timeout=TARGET, interval=0.5)
        took = time.monotonic() - killed
    finally:
        _stop(procs)
    print(f"delivered {took:.0f} s after the scheduler's worker was killed")
    # Its scheduler, SIGTERMed by the kernel, let go of RQ's lock; the other worker took it at its next
    # maintenance pass (every MAINTENANCE_INTERVAL), then came a retry's 2 s backoff: 15-16 s measured.
    assert took < MAINTENANCE_INTERVAL + 15
    assert len(sink.at("/flaky")) == 20  # each once


def _kill(sink: HttpSink, procs: list[subprocess.Popen[bytes]]) -> tuple[float, int]:
    """SIGKILL the workers: when, and how many sends the sink may see again (those it had not answered
    before the kill, including a request written just before it, which reaches the sink a moment later)."""
    with sink.lock:
        answered = len(sink.hits)
    for proc in procs:
        os.kill(proc.pid, signal.SIGKILL)
    killed = time.monotonic()
    time.sleep(0.2)
    with sink.lock:
        return killed, len(sink.started) - answered


@pytest.mark.slow  # started first: its waiting on the real clock overlaps the run
def test_killing_every_worker_during_intake_loses_nothing_and_sends_each_once(
    redis: Redis, redis_server: EmbeddedRedis, sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    rt, path = _setup(redis, redis_server, sink, smtp, tmp_path)
    sink.delays["/flaky"] = 0.3  # sends in flight when the kill comes
    first = [_start(path), _start(path)]
    try:
        wait_for(lambda: _holder(first), timeout=30, interval=0.2)
        events = _post(rt, 10)
        wait_for(lambda: len(sink.started) >= 3, timeout=30, interval=0.05)
        killed, in_flight = _kill(sink, first)
        events += _post(rt, 10)  # accepted while no worker runs
    finally:
        for proc in first:
            proc.wait(10)
    sink.delays.clear()
    second = [_start(path), _start(path)]
    try:
        wait_for(lambda: _states(rt, events) == ["delivered"] * 20, timeout=TARGET, interval=0.5)
        took = time.monotonic() - killed
    finally:
        _stop(second)
    print(f"every notification delivered {took:.0f} s after all workers were killed")
    assert took < TARGET
    # A send the sink had in hand when its worker died is answered after the death, so it may be sent
    # again (at-least-once); every other one goes out once.
    assert 20 <= len(sink.at("/flaky")) <= 20 + in_flight


def test_killing_a_worker_in_the_middle_of_a_planning_batch_plans_and_sends_each_once(
    redis: Redis, redis_server: EmbeddedRedis, sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    """The notifications a wake-up had taken when its worker was killed are planned by another worker once it
    sees the dead one stop beating (`dead_worker_after`), well before RQ finds the job abandoned."""
    from relay.storage.leases import UNPLANNED

    def claimed() -> int:
        return sum(1 for unit in redis.hkeys(LEASES) if unit.startswith(b"e:"))

    settings = {**SETTINGS, "channels": {"flaky": {"url": sink.url("/flaky")}}, "worker_threads": 1}
    rt = build(base_config(sink, smtp, tmp_path, redis_server.url, **settings), redis)
    path = worker_config_file(tmp_path, redis_server.url, **settings)
    sink.delays["/flaky"] = 0.5  # one sender thread: planning waits for room, a batch takes seconds
    events = _post(rt, 30)
    first = _start(path)
    try:
        wait_for(lambda: claimed() > 0 and len(sink.started) >= 2, timeout=30, interval=0.02)
        killed, in_flight = _kill(sink, [first])
        held = claimed()
    finally:
        first.wait(10)
    assert held > 0 and redis.zcard(UNPLANNED) > 0
    sink.delays.clear()
    second = _start(path)
    try:
        wait_for(lambda: _states(rt, events) == ["delivered"] * 30, timeout=TARGET, interval=0.5)
        took = time.monotonic() - killed
    finally:
        _stop([second])
    print(f"{held} notifications taken by the killed worker; all delivered {took:.0f} s after the kill")
    assert took < DEAD_AFTER + 3 * (DEAD_AFTER / 4) + 10  # the sweep, not RQ's abandoned job (80 s)
    assert redis.hlen(LEASES) == 0 and redis.zcard(UNPLANNED) == 0
    assert 30 <= len(sink.at("/flaky")) <= 30 + in_flight  # at-least-once: only a send in flight again


def test_a_worker_frozen_for_less_than_dead_worker_after_sends_nothing_twice(
    redis: Redis, redis_server: EmbeddedRedis, sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    """A VM pause or a swap storm (SIGSTOP) in the middle of its sends: a stall shorter than
    `dead_worker_after` is waited out by the other worker, so each delivery goes out once."""
    rt, path = _setup(redis, redis_server, sink, smtp, tmp_path)
    sink.delays["/flaky"] = 0.5  # sends in flight when the freeze comes
    workers = [_start(path), _start(path)]
    try:
        wait_for(lambda: _holder(workers), timeout=30, interval=0.2)
        events = _post(rt, 12)
        wait_for(lambda: len(sink.started) >= 3, timeout=30, interval=0.05)
        frozen = workers[0]
        os.kill(frozen.pid, signal.SIGSTOP)
        time.sleep(DEAD_AFTER * 0.6)  # well past the beats it misses, short of a death
        os.kill(frozen.pid, signal.SIGCONT)
        wait_for(lambda: _states(rt, events) == ["delivered"] * 12, timeout=60, interval=0.2)
    finally:
        for proc in workers:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
        _stop(workers)
    assert len(sink.at("/flaky")) == 12  # none twice: the live worker never took the frozen one's over
