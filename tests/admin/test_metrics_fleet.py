"""/metrics of a fleet: each process shows what it counted itself (its own hash in Redis), so that the sum over
every scraped process is the truth; workers serve theirs; a process that stops leaves its counts in the fleet's
totals; the kinds given a series of their own are bounded."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from redis import Redis
from starlette.testclient import TestClient

from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.runtime.embedded import EmbeddedRedis
from relay.runtime.worker import serve_metrics
from relay.storage.records import METRICS
from relay.storage.tally import SOURCES
from tests.admin.test_metrics import scrape
from tests.conftest import post, run_worker, sample_notification
from tests.servers import free_port

RECEIVED = "relay_notifications_received_total"


def _total(samples: dict[str, dict[Any, float]], name: str) -> float:
    return sum(samples.get(name, {}).values())


def test_the_sum_over_two_api_processes_is_the_accepted_count(make_runtime: Callable[..., Runtime]) -> None:
    one, two = make_runtime(), make_runtime()  # two API processes on one Redis
    with TestClient(create_app(one)) as first, TestClient(create_app(two)) as second:
        for _ in range(3):
            assert post(first, sample_notification()).status_code == 202
        assert post(second, sample_notification()).status_code == 202
        counts = [_total(scrape(first), RECEIVED), _total(scrape(second), RECEIVED)]
    assert counts == [3.0, 1.0]
    # The fleet's totals stay in Redis for the admin page.
    assert one.store.counters()[f"{RECEIVED}|kind=notification:access-control-request-failed"] == 4.0


def test_a_worker_serves_what_it_counted_and_no_fleet_gauge(make_runtime: Callable[..., Runtime]) -> None:
    api = make_runtime()
    port = free_port()
    worker = make_runtime(metrics={"port": port})
    with TestClient(create_app(api)) as client:
        post(client, sample_notification())
        server = serve_metrics(worker)
        assert server is not None
        run_worker(worker)
        scraped = scrape(client)
    assert _total(scraped, "relay_deliveries_total") == 0.0  # the API delivered nothing itself
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        server.shutdown()
        server.server_close()
    delivered = [
        line for line in text.splitlines() if line.startswith("relay_deliveries_total{") and "delivered" in line
    ]
    assert sum(float(line.rsplit(" ", 1)[1]) for line in delivered) == 3.0
    assert RECEIVED not in text.replace(f"# HELP {RECEIVED}", "").replace(f"# TYPE {RECEIVED}", "")
    assert "relay_queue_depth" not in text and "relay_up" not in text


def test_kinds_past_the_limit_are_counted_as_other_in_metrics_and_redis(
    make_runtime: Callable[..., Runtime], redis: Redis
) -> None:
    rt = make_runtime(metrics={"max_kinds": 2})
    with TestClient(create_app(rt)) as client:
        for i in range(5):
            assert post(client, sample_notification(kind=f"notification:made-up-{i}")).status_code == 202
        received = scrape(client)[RECEIVED]
    assert received == {
        (("kind", "notification:made-up-0"),): 1.0,
        (("kind", "notification:made-up-1"),): 1.0,
        (("kind", "other"),): 3.0,
    }
    fields = {k for k in rt.store.counters() if k.startswith(RECEIVED)}
    assert fields == {f"{RECEIVED}|kind=notification:made-up-{i}" for i in (0, 1)} | {f"{RECEIVED}|kind=other"}
    # Stored events keep their own kind: only the counting is folded.
    run_worker(rt)
    kinds = {k for k in rt.store.counters() if k.startswith("relay_deliveries_total")}
    assert not any("made-up-4" in k for k in kinds) and any("kind=other" in k for k in kinds)


def test_a_process_that_stops_leaves_its_counts_in_the_fleets_totals(
    make_runtime: Callable[..., Runtime], redis: Redis
) -> None:
    one, two = make_runtime(), make_runtime()
    field = f"{RECEIVED}|kind=notification:access-control-request-failed"
    with TestClient(create_app(one)) as first, TestClient(create_app(two)) as second:
        post(first, sample_notification())
        post(second, sample_notification())
        one.store.counts.retire(one.redis)  # `relay api` stopping
        assert _total(scrape(second), RECEIVED) == 1.0
    assert {s.decode() for s in redis.smembers(SOURCES)} == {two.name}
    assert float(redis.hget(METRICS, field) or 0) == 1.0  # the stopped one's, in the fleet's hash
    assert one.store.counters()[field] == 2.0  # the admin page's totals: nothing lost


def test_a_notification_answered_503_for_want_of_replicas_is_counted_neither_received_nor_duplicate(
    make_runtime: Callable[..., Runtime], redis_server: Any
) -> None:
    """The accept script counts it; the 503 takes the count back: the counts say what was answered 202."""
    rt = make_runtime(redis={"url": redis_server.url, "min_replicas": 1, "replica_timeout": "100ms"})
    payload = sample_notification()
    with TestClient(create_app(rt)) as client:
        assert [post(client, payload).status_code for _ in range(2)] == [503, 503]  # no replica at all
        samples = scrape(client)
    assert _total(samples, RECEIVED) == 0.0 and _total(samples, "relay_notifications_duplicate_total") == 0.0
    assert rt.store.counters().get(f"{RECEIVED}|kind={payload['kind']}", 0) == 0


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0  # nothing listens


def test_a_workers_metrics_port_flag_beats_the_environment_and_the_file(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    """`relay worker --config F --metrics-port P`: the flag wins over the file (read again at the worker's
    start) and the environment; `--metrics-port 0` turns off a port the environment sets; only /metrics."""
    import os
    import subprocess
    import sys

    from tests.conftest import worker_config_file
    from tests.processes import stop
    from tests.servers import wait_for

    file_port, flag_port, env_port = free_port(), free_port(), free_port()
    config = worker_config_file(tmp_path, redis_server.url, metrics={"port": file_port})
    relay = str(Path(sys.executable).parent / "relay")
    environ = {**os.environ, "RELAY_METRICS__PORT": str(env_port)}
    worker = subprocess.Popen([relay, "worker", "--config", str(config), "--metrics-port", str(flag_port)], env=environ)
    try:
        wait_for(lambda: _get(f"http://127.0.0.1:{flag_port}/metrics") == 200, timeout=30)
        assert _get(f"http://127.0.0.1:{flag_port}/") == 404
        assert _get(f"http://127.0.0.1:{flag_port}/anything") == 404
        assert _get(f"http://127.0.0.1:{file_port}/metrics") == 0 and _get(f"http://127.0.0.1:{env_port}/metrics") == 0
    finally:
        stop(worker)
    off = subprocess.Popen([relay, "worker", "--config", str(config), "--metrics-port", "0"], env=environ)
    try:
        wait_for(lambda: redis_server_has_beat(redis_server), timeout=30)
        assert _get(f"http://127.0.0.1:{env_port}/metrics") == 0 and _get(f"http://127.0.0.1:{file_port}/metrics") == 0
    finally:
        stop(off)


def redis_server_has_beat(server: EmbeddedRedis) -> bool:
    """A worker is up once it has beaten (relay:workers), by then past the point where it would serve /metrics."""
    from relay.storage.records import WORKERS

    return bool(Redis.from_url(server.url).zcard(WORKERS))
