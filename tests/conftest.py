"""Fixtures: a Redis the session starts itself (never one it did not start), sinks, config, app, worker."""

from __future__ import annotations

import asyncio
import compileall
import copy
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from redis import Redis
from rq import Queue
from starlette.testclient import TestClient

from relay.config import Config
from relay.core.clock import Clock, system_clock
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime, build
from relay.runtime.embedded import EmbeddedRedis
from relay.runtime.worker import work_burst
from relay.storage.work_queue import QUEUE_NAME
from tests.clock import ManualClock
from tests.servers import HttpSink, SmtpSink

HERE = Path(__file__).resolve().parent
WEBHOOK_TOKEN = "test-webhook-token-1234"
ADMIN_TOKEN = "test-admin-token-5678"
WAKE_WAIT = 2.0
# The fuzzing budgets (tests/intake/test_fuzz*.py) are sized for a suite run on every change: the cases are
# derandomized, the same in every run; RELAY_FUZZ_SCALE=10 runs ten times as many (docs/development.md).
FUZZ_SCALE = float(os.environ.get("RELAY_FUZZ_SCALE", "1"))


def fuzz(examples: int, **overrides: Any) -> settings:
    """Hypothesis settings for `examples` cases (times RELAY_FUZZ_SCALE), derandomized and unhurried."""
    slow = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]
    options: dict[str, Any] = {"deadline": None, "derandomize": True, "database": None, "suppress_health_check": slow}
    return settings(max_examples=max(1, int(examples * FUZZ_SCALE)), **{**options, **overrides})


def pytest_configure(config: pytest.Config) -> None:
    """relay's bytecode written once, before any test: the suite starts a few hundred `relay` processes, and
    where PYTHONDONTWRITEBYTECODE is set (as on the CI machines) each would compile relay's source again
    (about 0.15 CPU-s a process). Only the xdist controller (or a run without xdist) writes it."""
    if not hasattr(config, "workerinput"):
        compileall.compile_dir(str(HERE.parent / "relay"), quiet=1)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--wall-clock-shift",
        type=int,
        default=0,
        metavar="DAYS",
        help="run with Python's wall clock this many days ahead (or behind, negative): `-m dated` with 365 and -365 "
        "shows that no test passes or fails by the date it runs on (docs/development.md)",
    )


@pytest.fixture(scope="session", autouse=True)
def _wall_clock_shift(request: pytest.FixtureRequest) -> Iterator[None]:
    """The wall clock moved for this test process only (time-machine: `time.time`, `datetime.now`; not the
    monotonic clock that timed waits use, nor the servers the tests start), ticking from there."""
    days = int(request.config.getoption("--wall-clock-shift"))
    if not days:
        yield
        return
    import time_machine

    with time_machine.travel(datetime.now(UTC) + timedelta(days=days), tick=True):
        yield


SLOW_STRIDE = 4  # one `slow` test among the first items every this many


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that wait on the real clock (`slow`) early and spread out: one in every SLOW_STRIDE of the first
    items. xdist hands tests out one at a time (`--maxschedchunk=1` in pyproject.toml), so while some workers
    wait in a slow test the others run the rest, and no slow test starts late enough to lengthen the tail."""
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    rest = [item for item in items if item.get_closest_marker("slow") is None]
    spread: list[pytest.Item] = []
    for item in slow:
        spread.append(item)
        spread.extend(rest[: SLOW_STRIDE - 1])
        del rest[: SLOW_STRIDE - 1]
    items[:] = spread + rest


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Commands under test call setup_logging, which points the root logger at the test's stderr."""
    import logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def redis(redis_server: EmbeddedRedis) -> Iterator[Redis]:
    conn = Redis.from_url(redis_server.url)
    conn.flushdb()
    yield conn
    conn.flushdb()
    conn.close()


@pytest.fixture(scope="session")
def smtp() -> Iterator[SmtpSink]:
    sink = SmtpSink().start()
    yield sink
    sink.stop()


@pytest.fixture(scope="session")
def http_sink_server() -> Iterator[HttpSink]:
    sink = HttpSink().start()
    yield sink
    sink.stop()


@pytest.fixture
def sink(http_sink_server: HttpSink, smtp: SmtpSink) -> Iterator[HttpSink]:
    http_sink_server.clear()
    smtp.clear()
    yield http_sink_server
    http_sink_server.delay = 0.0


def sample_notification(**overrides: Any) -> dict[str, Any]:
    """The platform's sample, with a fresh eventId unless given."""
    data: dict[str, Any] = json.loads((HERE / "data" / "access-control-request-failed.json").read_text())
    data = copy.deepcopy(data)
    data["metadata"]["eventId"] = str(uuid.uuid4())
    for key, value in overrides.items():
        data[key] = value
    return data


def base_config(sink: HttpSink, smtp: SmtpSink, tmp_path: Path, redis_url: str, **extra: Any) -> Config:
    data: dict[str, Any] = {
        "server": {"auth": {"tokens": [WEBHOOK_TOKEN]}, "admin_tokens": [ADMIN_TOKEN]},
        "redis": {"url": redis_url},
        "data_dir": str(tmp_path / "data"),
        "templates": {"dir": str(tmp_path / "templates")},
        "retry": {"attempts": 3, "backoff": ["1s"]},
        "channels": {
            "owners-hook": {"url": sink.url("/owners")},
            "managers-hook": {"url": sink.url("/managers")},
            "requester-email": {"url": smtp.url(), "per_recipient": True},
            "audit-hook": {"url": sink.url("/audit")},
        },
        "routes": [
            {
                "kinds": ["notification:access-control-*"],
                "recipient_types": ["recipient-type:system-owner"],
                "channels": ["owners-hook"],
            },
            {"recipient_types": ["recipient-type:project-data-access-manager"], "channels": ["managers-hook"]},
            {"recipient_types": ["recipient-type:access-control-requester"], "channels": ["requester-email"]},
        ],
        "default": {"channels": ["audit-hook"]},
    }
    for key, value in extra.items():
        data[key] = value
    return Config.model_validate(data)


@pytest.fixture
def make_runtime(
    redis: Redis, redis_server: EmbeddedRedis, sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> Callable[..., Runtime]:
    def make(clock: Clock | None = None, **extra: Any) -> Runtime:
        """A runtime on `clock`: by default a `ManualClock` standing at the time it was made, which the test
        moves (`rt.clock.set`, `rt.clock.advance`, `run_scheduled`)."""
        config = base_config(sink, smtp, tmp_path, redis_server.url, **extra)
        return build(config, redis, clock=clock if clock is not None else ManualClock(system_clock()))

    return make


@pytest.fixture
def rt(make_runtime: Callable[..., Runtime]) -> Runtime:
    return make_runtime()


@pytest.fixture
def client(rt: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(rt)) as c:
        yield c


def worker_config_file(tmp_path: Path, redis_url: str, **settings: Any) -> Path:
    """A config file for a `relay worker` subprocess on the test's Redis."""
    path = tmp_path / "worker-config.json"
    path.write_text(json.dumps({"redis": {"url": redis_url}, **settings}))
    return path


def slow_channel(sink: HttpSink) -> dict[str, Any]:
    """Settings routing every message to one channel at the sink's /slow."""
    return {"channels": {"slow": {"url": sink.url("/slow")}}, "routes": [{"channels": ["slow"]}]}


def run_worker(rt: Runtime) -> None:
    """relay's own RQ worker and senders, in this process, until the queue is empty and every delivery handed
    to the senders is done (scheduled retries not included). An API serving in a thread (a real HTTP server)
    queues an arrival's wake-up just after its answer: with the wake-up flag set and no job queued yet, this
    waits a moment for it (at most WAKE_WAIT seconds: a wake-up lost for good is the sweep's)."""
    from relay.storage.leases import WAKE

    queue = Queue(QUEUE_NAME, connection=rt.redis)
    deadline = time.monotonic() + WAKE_WAIT
    while rt.redis.exists(WAKE) and queue.count == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    work_burst(rt)


def accept(rt: Runtime, event_id: str, kind: str, payload: str) -> str:
    """A notification accepted as the webhook accepts it (`WorkQueue.accept_async`, then the wake-up it asks
    for): 'accepted' or 'duplicate'."""
    from relay.runtime.bootstrap import open_async_redis, redis_url
    from relay.storage.work_queue import Acceptance

    async def once() -> Acceptance:
        client = open_async_redis(redis_url(rt.config))
        try:
            return await rt.work.accept_async(client, event_id, kind, payload)
        finally:
            await client.aclose()

    acceptance = asyncio.run(once())
    if acceptance.wake_job is not None:
        rt.work.queue_wake(acceptance.wake_job, event_id)
    return acceptance.status


def plan_job(rt: Runtime, event_id: str) -> int:
    """Plan one stored notification again, under a lease as a worker's planning is (0 when one has it in hand)."""
    from relay.delivery.jobs import plan_event
    from relay.storage.leases import LEASES, UNPLANNED, event_unit

    unit = event_unit(event_id)
    if not rt.redis.hsetnx(LEASES, unit, rt.name):
        return 0
    rt.redis.zrem(UNPLANNED, event_id)
    try:
        return plan_event(rt, event_id)
    except BaseException:
        rt.store.leases.give_back(rt.name, [unit], rt.clock())
        raise


def run_scheduled(rt: Runtime, due_only: bool = False) -> int:
    """Move RQ's scheduled wake-ups (retries, held deliveries, digests' windows) into the queue, as RQ's
    scheduler does (through RQ's public API): those due on the runtime's clock (`due_only`), or all, the clock
    moved on first to the last time a delivery waits for, as if that time had come. How many were moved."""
    from rq.registry import ScheduledJobRegistry

    from relay.storage.leases import READY

    if not due_only:
        last = rt.redis.zrange(READY, -1, -1, withscores=True)
        if last and last[0][1] > rt.clock():
            rt.clock.set(last[0][1])
    queue = Queue(QUEUE_NAME, connection=rt.redis)
    registry = ScheduledJobRegistry(queue=queue)
    ids = registry.get_jobs_to_schedule(int(rt.clock())) if due_only else registry.get_job_ids()
    for job_id in ids:
        registry.remove(job_id)
        job = queue.fetch_job(job_id)
        if job is not None:
            queue.enqueue_job(job)
    return len(ids)


def post(client: TestClient, payload: Any, token: str = WEBHOOK_TOKEN, **kwargs: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}", **kwargs.pop("headers", {})}
    return client.post("/webhook", json=payload, headers=headers, **kwargs)


def admin(
    client: TestClient, path: str, method: str = "GET", headers: dict[str, str] | None = None, **kwargs: Any
) -> Any:
    return client.request(method, path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}", **(headers or {})}, **kwargs)
