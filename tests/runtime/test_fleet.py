"""A fleet on loopback, as real processes: a Redis primary, two replicas and three sentinels; two `relay api`
and two `relay worker`, with `redis.min_replicas: 1`. Paused replicas give 503s, never a 202 that only the
primary holds; the primary SIGKILLed under load loses no notification answered 202 and nothing is sent twice;
the counters summed over the processes are the fleet's. Run it alone with `pytest -m fleet`."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from redis import Redis

from relay.runtime.bootstrap import open_redis
from relay.storage.records import metric_field
from relay.storage.tally import fleet_totals
from tests.conftest import sample_notification
from tests.processes import Restarted, stop_all
from tests.replicas import SERVICE, RedisGroup
from tests.servers import HttpSink, free_port, http_get, wait_for

pytestmark = [pytest.mark.fleet, pytest.mark.slow]  # slow: started first, its waiting overlaps the run
RELAY = str(Path(sys.executable).parent / "relay")
TOKEN, ADMIN = "fleet-token-1234", "fleet-admin-5678"
RATE = 20.0  # notifications a second, over all the load's threads
HOOK = "/fleet-hook"
KIND = "notification:access-control-request-failed"


@dataclass
class Fleet:
    redis: RedisGroup
    apis: list[str]
    workers: list[Restarted]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)


def _config(tmp_path: Path, name: str, sink: HttpSink, url: str, **extra: Any) -> Path:
    config = {
        "server": {"port": free_port(), "auth": {"tokens": [TOKEN]}, "admin_tokens": [ADMIN]},
        "redis": {"url": url, "min_replicas": 1, "replica_timeout": "500ms"},
        "data_dir": str(tmp_path / "data"),
        "channels": {"hook": {"url": sink.url(HOOK)}},
        "routes": [{"channels": ["hook"]}],
        "retry": {"attempts": 6, "backoff": ["1s"]},
        "logging": {"format": "json"},
        # Heartbeats (and sweeps for work left without a wake-up) every second.
        "dead_worker_after": "4s",
        **extra,
    }
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def fleet(tmp_path: Path, sink: HttpSink) -> Iterator[Fleet]:
    group = RedisGroup(tmp_path / "redis", replicas=2, sentinels=3).start()
    # The workers restarted when one exits, as Kubernetes restarts a container: RQ's loop quits on some
    # Redis errors of a failover. They count in the fleet's hash (relay.storage.tally).
    config = _config(tmp_path, "worker", sink, group.url)
    worker = [RELAY, "worker", "--config", str(config)]
    running = Fleet(group, [], [])
    try:
        for i in range(2):
            path = _config(tmp_path, f"api-{i}", sink, group.url)
            running.apis.append(f"http://127.0.0.1:{json.loads(path.read_text())['server']['port']}")
            running.logs.append(tmp_path / f"api-{i}.log")
            with running.logs[-1].open("wb") as out:
                running.procs.append(subprocess.Popen([RELAY, "api", "--config", str(path)], stdout=out, stderr=out))
        running.logs += [tmp_path / f"worker-{i}.log" for i in range(2)]
        running.workers = [Restarted(worker, log) for log in running.logs[2:]]
        for base in running.apis:
            wait_for(lambda base=base: http_get(base + "/readyz", timeout=5)[0] == 200, timeout=30)
        yield running
    finally:
        stop_all([kept.halt() for kept in running.workers] + running.procs)
        group.stop()


def _post(base: str, payload: dict[str, Any]) -> tuple[int, str | None, str]:
    """The status, Retry-After and `status` of the answer to one POST of `payload`."""
    request = urllib.request.Request(
        base + "/webhook",
        data=json.dumps(payload).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, None, json.loads(answer.read())["status"]
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Retry-After"), ""
    except OSError as exc:  # no answer (refused, reset, timed out): the platform sends it again
        return 0, None, type(getattr(exc, "reason", exc)).__name__


def _notification() -> dict[str, Any]:
    """One message to the sink, its text naming its eventId so that the sink can tell each one apart."""
    payload = sample_notification()
    message = {**payload["messages"][0], "message": f"event {payload['metadata']['eventId']}"}
    return {**payload, "messages": [message]}


def _sent(sink: HttpSink) -> Counter[str]:
    return Counter(hit.json()["message"].removeprefix("event ") for hit in sink.at(HOOK))


def _sum(urls: list[str], name: str, **labels: str) -> float:
    """A counter summed over every scraped process, as `sum(...)` in PromQL."""
    total = 0.0
    for url in urls:
        code, text = http_get(url, timeout=5)
        assert code == 200, url
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                    total += s.value
    return total


@dataclass
class Load:
    """Notifications at RATE a second over both APIs; one answered 503 is sent again (same eventId) every
    0.2 s until answered 202, as the platform does (after Retry-After: shortened here to keep the test short)."""

    apis: list[str]
    answers: dict[str, str] = field(default_factory=dict)  # eventId -> accepted / duplicate (its 202)
    acked_at: list[float] = field(default_factory=list)
    refused: list[str | None] = field(default_factory=list)  # Retry-After of each 503
    refused_at: list[float] = field(default_factory=list)
    others: list[int] = field(default_factory=list)
    unanswered: list[tuple[float, str]] = field(default_factory=list)  # when, and why (a timeout, a reset)
    # eventIds refused or unanswered before their 202: their first write may have survived (a 503 whose undoing
    # of the count died with the primary, or an answer lost), so that a later "duplicate" was received before.
    uncertain: set[str] = field(default_factory=set)
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, base: str, payload: dict[str, Any], deadline: float) -> None:
        while time.monotonic() < deadline:
            status, retry_after, answer = _post(base, payload)
            with self.lock:
                if status == 202:
                    self.answers[payload["metadata"]["eventId"]] = answer
                    self.acked_at.append(time.monotonic())
                    return
                self.uncertain.add(payload["metadata"]["eventId"])
                if status == 503:
                    self.refused.append(retry_after)
                    self.refused_at.append(time.monotonic())
                elif status == 0:
                    self.unanswered.append((time.monotonic(), answer))
                else:
                    self.others.append(status)
            time.sleep(0.2)

    def run(self, index: int, threads: int) -> None:
        n = index
        while not self.stopping.is_set():
            started = time.monotonic()
            self.send(self.apis[n % len(self.apis)], _notification(), started + 20)
            n += threads
            time.sleep(max(0.0, threads / RATE - (time.monotonic() - started)))

    def acked(self) -> int:
        with self.lock:
            return len(self.answers)


LOADED = 90  # seconds: the bound of a wait for an event, on a machine a full suite loads


def _state(fleet: Fleet, load: Load, since: float, threads: list[threading.Thread]) -> str:
    """What a failed wait after the kill reports: the answers since, the servers' replication, the logs' tails."""
    with load.lock:
        answers = (
            f"since the kill: {sum(t > since for t in load.acked_at)} x 202, "
            f"{sum(t > since for t in load.refused_at)} x 503, "
            f"unanswered {[why for t, why in load.unanswered if t > since]}, "
            f"others {load.others}; load threads alive: {sum(t.is_alive() for t in threads)}"
        )
    lines = [answers, fleet.redis.replication(), fleet.redis.sentinel_logs()]
    for log in fleet.logs:
        tail = log.read_text(errors="replace").splitlines()[-8:] if log.exists() else []
        lines.append(f"{log.name}:\n  " + "\n  ".join(line[:300] for line in tail))
    return "\n".join(lines)


def _primary(group: RedisGroup) -> int:
    _, port = Redis(port=group.sentinel_ports[0], socket_timeout=5).sentinel_get_master_addr_by_name(SERVICE)
    return int(port)


def test_failover_under_load_loses_no_202_and_sends_nothing_twice(fleet: Fleet, sink: HttpSink) -> None:
    group = fleet.redis
    # Replicas paused (SIGSTOP): the primary alone holds a write, so nothing is answered 202.
    paused = [_notification(), _notification()]
    for port in group.replica_ports:
        group.pause(port)
    try:
        answers = [_post(fleet.apis[i], payload) for i, payload in enumerate(paused)]
    finally:
        for port in group.replica_ports:
            group.resume(port)
    assert [(status, bool(retry_after)) for status, retry_after, _ in answers] == [(503, True), (503, True)]

    load = Load(fleet.apis)
    for i, payload in enumerate(paused):  # their retries, answered once the replicas hold them
        load.send(fleet.apis[i], payload, time.monotonic() + 10)
    assert [load.answers[p["metadata"]["eventId"]] for p in paused] == ["duplicate", "duplicate"]

    threads = [threading.Thread(target=load.run, args=(i, 4)) for i in range(4)]
    for thread in threads:
        thread.start()
    try:
        # Each wait is for the event it names; its bound is room for a loaded machine (a full suite beside it
        # took over 20 s to the first 40), not a figure asserted: `back_after` below is.
        wait_for(lambda: load.acked() >= 40, timeout=LOADED)
        old = group.primary
        group.kill(old)
        killed_at, before = time.monotonic(), load.acked()
        try:  # the sentinels chose a new primary; if not, their logs say why (a TILT under load, an abort)
            wait_for(lambda: _primary(group) != old, timeout=LOADED, interval=0.1)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: no new primary; the sentinels logged\n{group.sentinel_logs()}") from None
        try:  # and 40 more answered 202 after the kill
            wait_for(lambda: load.acked() >= before + 40, timeout=LOADED)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: not 40 more 202s\n{_state(fleet, load, killed_at, threads)}") from None
    finally:
        load.stopping.set()
        for thread in threads:
            thread.join(30)
    # From the kill to the first 202 after the first 503 it caused (a 202 in flight at the kill does not count).
    first_refused = min(t for t in load.refused_at if t > killed_at)
    back_after = min(t for t in load.acked_at if t > first_refused) - killed_at
    assert load.others == [] and all(load.refused), "only 202, or 503 with Retry-After"
    assert back_after < 15, back_after

    # Every notification answered 202 is delivered, and nothing twice.
    try:
        wait_for(lambda: set(load.answers) <= set(_sent(sink)), timeout=LOADED, interval=0.2)
    except AssertionError as exc:
        missing = sorted(set(load.answers) - set(_sent(sink)))
        found = [http_get(f"{fleet.apis[0]}/api/v1/events/{event}", ADMIN)[1][:400] for event in missing[:5]]
        raise AssertionError(
            f"{exc}: {len(missing)} answered 202 not sent; the first as relay has them:\n"
            + "\n".join(found)
            + f"\n{_state(fleet, load, killed_at, [])}"
        ) from None
    time.sleep(1)  # a second send, were there one, would come within this
    sent = _sent(sink)
    assert [event for event, times in sent.items() if times > 1] == []
    assert set(sent) <= set(load.answers)  # the paused ones among them, answered 202 at their retry

    # Summed over the processes, the counters are the fleet's: each counts only what it did itself.
    # Exact but for the uncertain ones: a "duplicate" of one of them may have been counted received already,
    accepted = sum(1 for answer in load.answers.values() if answer == "accepted")
    duplicate = len(load.answers) - accepted
    uncertain = sum(1 for event in load.uncertain if load.answers.get(event) == "duplicate")
    api_metrics = [base + "/metrics" for base in fleet.apis]
    received = _sum(api_metrics, "relay_notifications_received_total")
    assert accepted <= received <= accepted + uncertain, (received, accepted, uncertain)
    # and a duplicate refused may have been counted too, when its undoing died with the primary.
    assert duplicate <= _sum(api_metrics, "relay_notifications_duplicate_total") <= duplicate + len(load.uncertain)
    delivered = metric_field("relay_deliveries_total", state="delivered", channel="hook", kind=KIND)
    counted = open_redis(fleet.redis.url, socket_timeout=5)
    wait_for(lambda: fleet_totals(counted).get(delivered) == sum(sent.values()), timeout=5)
    assert _sum(api_metrics, "relay_deliveries_total") == 0
    print(
        f"fleet: {len(load.answers)} x 202, {len(load.refused)} x 503, {len(load.unanswered)} unanswered; "
        f"202 again {back_after:.1f} s after the kill"
    )
