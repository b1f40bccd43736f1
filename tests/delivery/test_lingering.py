"""A wake-up job that lingers: once its due work ran out it listens for more a moment, and an arrival (or any
wake-up) nudges it instead of queueing an RQ job (`relay.storage.leases`, `relay.delivery.jobs.work`).

A nudge is only a hint: what it names waits in its set, so nothing is lost when a nudge is."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from redis import Redis
from rq import Queue
from rq.registry import FinishedJobRegistry
from starlette.testclient import TestClient

from relay.delivery import jobs
from relay.delivery.sender import Sender
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.runtime.embedded import EmbeddedRedis
from relay.runtime.stopping import StopWatch
from relay.storage.leases import LISTENING, NUDGES, UNPLANNED, WAKE, event_unit
from relay.storage.queue import QUEUE_NAME
from relay.storage.records import now
from tests.conftest import post, sample_notification, worker_config_file
from tests.servers import HttpSink, wait_for

RELAY = str(Path(sys.executable).parent / "relay")
LISTENER = "relay-listener-a"


@pytest.fixture
def hook(make_runtime: Callable[..., Runtime], sink: HttpSink) -> Runtime:
    """Every notification of one message makes one delivery, to the sink's /hook."""
    return make_runtime(
        channels={"hook": {"url": sink.url("/hook")}}, routes=[{"channels": ["hook"]}], default={"channels": []}
    )


def _accept(rt: Runtime) -> str:
    payload = sample_notification(messages=[sample_notification()["messages"][0]])
    event_id: str = payload["metadata"]["eventId"]
    assert rt.intake.accept(event_id, payload["kind"], json.dumps(payload)) == "accepted"
    return event_id


def _queued(redis: Redis) -> int:
    return Queue(QUEUE_NAME, connection=redis).count


class Listening:
    """`Leases.listen` in a thread, as a lingering job calls it."""

    def __init__(self, rt: Runtime, owner: str, seconds: float = 5.0) -> None:
        self.heard: list[str | None] = []
        self.thread = threading.Thread(
            target=lambda: self.heard.append(rt.store.leases.listen(owner, seconds, now())), daemon=True
        )
        self.thread.start()
        wait_for(lambda: rt.redis.zscore(LISTENING, owner) is not None, timeout=5)

    def result(self) -> str | None:
        self.thread.join(10)
        assert not self.thread.is_alive()
        return self.heard[0]


def test_an_arrival_nudges_a_listening_worker_and_queues_no_job(hook: Runtime, redis: Redis) -> None:
    listener = Listening(hook, LISTENER)
    event_id = _accept(hook)
    assert listener.result() == event_id
    assert _queued(redis) == 0 and not redis.exists(WAKE)
    # Nudged once: out of the listeners, so the next arrival wakes somebody else.
    assert redis.zscore(LISTENING, LISTENER) is None
    # The nudge is a hint: the notification still waits among those to plan.
    assert redis.zscore(UNPLANNED, event_id) is not None
    _accept(hook)
    assert _queued(redis) == 1 and redis.exists(WAKE)


def test_a_listener_past_its_time_is_not_nudged(hook: Runtime, redis: Redis) -> None:
    redis.zadd(LISTENING, {LISTENER: now() - 1})  # a worker that died while it listened
    _accept(hook)
    assert _queued(redis) == 1
    assert redis.zcard(LISTENING) == 0 and not redis.exists(NUDGES + LISTENER)


def test_request_wake_nudges_a_listener_to_take_what_is_due(hook: Runtime, redis: Redis) -> None:
    listener = Listening(hook, LISTENER)
    assert hook.intake.request_wake(force=True)
    assert listener.result() == ""  # '': take what is due
    assert _queued(redis) == 0
    # Nobody listens now: a job, and the flag says one is queued.
    assert hook.intake.request_wake()
    assert not hook.intake.request_wake()
    assert _queued(redis) == 1


def test_of_two_listeners_one_is_nudged_and_the_other_keeps_listening(hook: Runtime, redis: Redis) -> None:
    first = Listening(hook, "relay-listener-1")
    time.sleep(0.01)
    second = Listening(hook, "relay-listener-2")
    _accept(hook)
    # The one with the longest left to wait (here the one registered last) is nudged.
    assert second.result() is not None
    assert redis.zscore(LISTENING, "relay-listener-1") is not None
    _accept(hook)
    assert first.result() is not None
    assert redis.zcard(LISTENING) == 0 and _queued(redis) == 0


def test_a_listener_stays_registered_between_spells_and_leaves_with_stop_listening(hook: Runtime, redis: Redis) -> None:
    leases = hook.store.leases
    assert leases.listen(LISTENER, 0.1, now()) is None
    # Still a listener for a moment (its next spell refreshes it): an arrival in between nudges it, no job.
    assert redis.zscore(LISTENING, LISTENER) is not None
    event_id = _accept(hook)
    assert _queued(redis) == 0
    # Leaving hands back what was nudged meanwhile, for the job to plan.
    assert leases.stop_listening(LISTENER) == [event_id]
    assert redis.zscore(LISTENING, LISTENER) is None and not redis.exists(NUDGES + LISTENER)
    _accept(hook)
    assert _queued(redis) == 1


def test_work_already_due_ends_a_spell_at_once(hook: Runtime, redis: Redis) -> None:
    _accept(hook)
    Queue(QUEUE_NAME, connection=redis).empty()
    began = time.monotonic()
    assert hook.store.leases.listen(LISTENER, 5.0, now()) == ""
    assert time.monotonic() - began < 1
    assert redis.zscore(LISTENING, LISTENER) is None  # about to work: no longer a listener


def test_an_error_while_listening_leaves_no_registration(
    hook: Runtime, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    from redis.exceptions import ConnectionError as RedisConnectionError

    def gone(*args: object, **kwargs: object) -> None:
        raise RedisConnectionError("failover")

    monkeypatch.setattr(hook.redis, "blpop", gone)
    with pytest.raises(RedisConnectionError):
        hook.store.leases.listen(LISTENER, 5.0, now())
    monkeypatch.undo()
    assert redis.zscore(LISTENING, LISTENER) is None
    _accept(hook)
    assert _queued(redis) == 1  # nobody was nudged in vain


def test_a_nudge_sent_as_a_listener_stops_is_handed_back(hook: Runtime, redis: Redis) -> None:
    """The nudge and the listener's leaving cross: the nudge comes back from `stop_listening`, and the
    notification still waits to be planned."""
    redis.zadd(LISTENING, {LISTENER: now() + 5})  # listening, about to stop
    event_id = _accept(hook)
    assert redis.lrange(NUDGES + LISTENER, 0, -1) == [event_id.encode()]
    assert hook.store.leases.stop_listening(LISTENER) == [event_id]
    assert not redis.exists(NUDGES + LISTENER) and redis.zcard(LISTENING) == 0
    claimed, _ = hook.store.leases.claim(LISTENER, 10, now())
    assert [c.unit for c in claimed] == [event_unit(event_id)]


def _lingering(rt: Runtime, linger: float) -> tuple[threading.Thread, list[int], list[float]]:
    """`jobs.work()` in a thread with `linger`; what it returned, and how long it ran."""
    rt.linger = linger
    taken: list[int] = []
    took: list[float] = []

    def job() -> None:
        began = time.monotonic()
        taken.append(jobs.work(rt))
        took.append(time.monotonic() - began)

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    return thread, taken, took


def test_a_lingering_job_sends_what_arrives_while_it_listens_with_no_rq_job(
    hook: Runtime, redis: Redis, sink: HttpSink
) -> None:
    thread, taken, _ = _lingering(hook, linger=30.0)
    events = []
    for _ in range(3):
        wait_for(lambda: redis.zscore(LISTENING, hook.name) is not None, timeout=10)
        events.append(_accept(hook))
        wait_for(lambda: len(sink.at("/hook")) == len(events), timeout=10)
    hook.stops.request()
    thread.join(10)
    assert not thread.is_alive() and taken == [3]
    assert _queued(redis) == 0 and not redis.exists(WAKE)  # no wake-up job was needed
    hook.sender.drain(10)
    for event_id in events:
        states = [r.state for r in hook.store.deliveries(hook.store.event_delivery_ids(event_id)) if r]
        assert states == ["delivered"]
    assert redis.zcard(LISTENING) == 0 and redis.zcard(UNPLANNED) == 0


def test_a_lingering_job_ends_once_idle_for_its_linger(hook: Runtime, redis: Redis) -> None:
    thread, taken, took = _lingering(hook, linger=0.3)
    thread.join(10)
    assert taken == [0]
    assert 0.3 <= took[0] < 3
    assert redis.zcard(LISTENING) == 0


def test_a_job_whose_senders_are_full_does_not_listen(hook: Runtime, redis: Redis) -> None:
    """A worker with no room to send must not take nudges that an idle worker would serve."""
    hook.sender = Sender(1)
    release = threading.Event()
    for n in range(2):
        hook.sender.submit(release.wait, f"busy-{n}")
    try:
        thread, taken, took = _lingering(hook, linger=30.0)
        thread.join(10)
        assert taken == [0] and took[0] < 3
        assert redis.zcard(LISTENING) == 0
    finally:
        release.set()
        hook.sender.drain(10)


def test_a_lingering_job_takes_work_that_comes_due_while_it_listens(
    hook: Runtime, redis: Redis, sink: HttpSink
) -> None:
    """Nobody nudges for work due later (a retry's time, a held delivery's): the job wakes at its time."""
    event_id = _accept(hook)
    Queue(QUEUE_NAME, connection=redis).empty()
    redis.delete(WAKE)
    redis.zadd(UNPLANNED, {event_id: now() + 0.6})  # due in a moment
    thread, taken, _ = _lingering(hook, linger=2.0)
    wait_for(lambda: len(sink.at("/hook")) == 1, timeout=5)
    thread.join(10)
    assert taken == [1]
    assert _queued(redis) == 0


def test_a_stop_ends_a_lingering_job_within_a_spell(hook: Runtime, redis: Redis) -> None:
    thread, taken, took = _lingering(hook, linger=30.0)
    wait_for(lambda: redis.zscore(LISTENING, hook.name) is not None, timeout=5)
    hook.stops.request()
    thread.join(jobs.LISTEN_SECONDS + 3)
    assert not thread.is_alive() and taken == [0]
    assert took[0] < jobs.LISTEN_SECONDS + 3
    assert redis.zcard(LISTENING) == 0


def test_a_stop_during_a_jobs_first_work_ends_it_without_listening(
    hook: Runtime, redis: Redis, sink: HttpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job watches for a stop from its start: a SIGTERM while it plans (here to a handler standing in for
    RQ's) is noted, so the job ends after its work instead of lingering."""
    seen: list[int] = []
    before = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda sig, frame: seen.append(sig))
    planning = jobs.plan_event

    def plan_then_stop(rt: Runtime, event_id: str, leased: bool = True) -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        return planning(rt, event_id, leased)

    monkeypatch.setattr(jobs, "plan_event", plan_then_stop)
    try:
        _accept(hook)
        hook.linger = 30.0
        began = time.monotonic()
        assert jobs.work(hook) == 1  # in the main thread, as RQ runs it
        assert time.monotonic() - began < 5
        assert seen == [signal.SIGTERM] and hook.stop_requested()
        assert redis.zcard(LISTENING) == 0
        assert hook.sender.drain(10) and len(sink.at("/hook")) == 1
    finally:
        signal.signal(signal.SIGTERM, before)


def stop_inside_a_job(rt: Runtime) -> list[object]:
    """A job for RQ's own worker: SIGTERM to itself, then what relay and RQ made of it."""
    before = rt.stop_requested()
    os.kill(os.getpid(), signal.SIGTERM)
    handler = signal.getsignal(signal.SIGTERM)  # what RQ installed for a second signal
    return [before, getattr(handler, "__name__", None), rt.stop_requested()]


def test_rqs_own_stop_handlers_are_wrapped_and_still_called(hook: Runtime, redis: Redis) -> None:
    """relay.runtime.stopping stands on how RQ's worker handles SIGTERM: its handler installed by `work`, and a
    first signal during a job answered by a warm stop that installs its cold-stop handler. This breaks when
    RQ changes that."""
    from relay.runtime.worker import make_worker

    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        queue = Queue(QUEUE_NAME, connection=redis)
        job = queue.enqueue(stop_inside_a_job)
        make_worker(hook, redis).work(burst=True, with_scheduler=False)
        job.refresh()
        assert job.return_value() == [False, "request_force_stop", True]
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_burst_workers_and_in_process_jobs_do_not_linger(hook: Runtime, sink: HttpSink) -> None:
    assert hook.linger == 0
    _accept(hook)
    began = time.monotonic()
    assert jobs.work(hook) == 1
    assert time.monotonic() - began < 1
    assert hook.sender.drain(10) and len(sink.at("/hook")) == 1


def test_the_stop_watch_notes_a_signal_and_calls_the_handler_it_wrapped() -> None:
    called: list[int] = []
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, lambda sig, frame: called.append(sig))
    try:
        watch = StopWatch()
        assert not watch.requested()
        os.kill(os.getpid(), signal.SIGINT)
        wait_for(lambda: called == [signal.SIGINT], timeout=5)
        assert watch.requested()
        # A handler installed later (RQ's, after a first signal) is wrapped in turn.
        signal.signal(signal.SIGINT, lambda sig, frame: called.append(-sig))
        assert watch.requested()
        os.kill(os.getpid(), signal.SIGINT)
        wait_for(lambda: called == [signal.SIGINT, -signal.SIGINT], timeout=5)
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_relay_worker_sends_a_trickle_on_one_wake_up_and_stops_promptly_while_it_listens(
    hook: Runtime, redis: Redis, redis_server: EmbeddedRedis, sink: HttpSink, tmp_path: Path
) -> None:
    path = worker_config_file(
        tmp_path,
        redis_server.url,
        channels={"hook": {"url": sink.url("/hook")}},
        routes=[{"channels": ["hook"]}],
        default={"channels": []},
    )
    proc = subprocess.Popen([RELAY, "worker", "--config", str(path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    posted: list[str] = []
    trickling = threading.Event()
    try:
        with TestClient(create_app(hook)) as client:

            def send_one() -> None:
                payload = sample_notification(messages=[sample_notification()["messages"][0]])
                assert post(client, payload).status_code == 202
                posted.append(payload["metadata"]["eventId"])

            for n in range(1, 6):
                send_one()
                wait_for(lambda n=n: len(sink.at("/hook")) == n, timeout=30)  # type: ignore[misc]
                wait_for(lambda: redis.zcard(LISTENING) == 1, timeout=10)  # its job listens for more
            # Five notifications a moment apart: the first woke the worker through RQ, the rest nudged its job
            # (one more job at most, were the worker between two jobs when one came).
            assert len(FinishedJobRegistry(queue=Queue(QUEUE_NAME, connection=redis)).get_job_ids()) <= 2

            def trickle() -> None:
                while not trickling.is_set():
                    send_one()
                    time.sleep(0.2)

            # A stop while a trickle keeps the job from ever going idle: the job ends at the stop, not after
            # JOB_SECONDS, and the worker exits.
            feeder = threading.Thread(target=trickle, daemon=True)
            feeder.start()
            time.sleep(1)
            proc.send_signal(signal.SIGTERM)
            stopped_at = time.monotonic()
            code = proc.wait(30)
            took = time.monotonic() - stopped_at
            trickling.set()
            feeder.join(10)
        output = proc.stdout.read().decode() if proc.stdout else ""
    finally:
        trickling.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, output
    assert took < jobs.JOB_SECONDS - 3, output
    # Nothing accepted is lost: sent, or waiting in Redis for the next worker.
    unplanned = {m.decode() for m in redis.zrange(UNPLANNED, 0, -1)}
    sent = {e for e in posted if hook.store.event_delivery_ids(e)}
    assert set(posted) == sent | unplanned
    assert redis.zcard(LISTENING) == 0
