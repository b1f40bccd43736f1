"""`relay worker`: one RQ worker per process (RQ's `SimpleWorker` loop and signal handling, its maintenance pass
every `MAINTENANCE_INTERVAL` seconds, its scheduler forked as `rq worker --with-scheduler` forks it), the process's
senders, and relay's heartbeat thread: it beats, picks up config reloads and sweeps the leases
(`relay.storage.leases`). docs/delivery.md and docs/development.md ("Upgrading dependencies") say why each is so."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socketserver
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from redis import Redis
from redis.exceptions import RedisError
from rq import Queue, SimpleWorker

from relay import tracing
from relay.config import Config, ConfigError, load_config
from relay.delivery.context import job_class
from relay.delivery.jobs import lost
from relay.runtime import beatfile
from relay.runtime.bootstrap import Runtime, build, open_redis, redis_url, reload_runtime
from relay.runtime.children import forks_die_with_this_process, parent_gone
from relay.runtime.logs import follow
from relay.storage.generations import CONFIG_APPLIED, CONFIG_GENERATION, heartbeat_seconds
from relay.storage.leases import delivery_unit, orphaned
from relay.storage.work_queue import QUEUE_NAME

log = logging.getLogger("relay.runtime.worker")
MAINTENANCE_INTERVAL = 15  # seconds between RQ's maintenance passes
# RQ's own record of its workers (`rq info`); relay goes by its own heartbeat alone.
WORKER_TTL = 30
# Work due this long with no wake-up queued (one lost) gets one at the next beat.
STALE_SECONDS = 10.0
DRAIN_SECONDS = 60.0  # at a stop, the longest wait for the senders to finish what they hold


def make_worker(rt: Runtime, connection: Redis) -> SimpleWorker:
    return SimpleWorker(
        [Queue(QUEUE_NAME, connection=connection)],
        connection=connection,
        name=rt.name,
        job_class=job_class(rt),  # hands the jobs this runtime (relay.delivery.context)
        worker_ttl=WORKER_TTL,
        maintenance_interval=MAINTENANCE_INTERVAL,
        log_job_description=False,  # a job's description holds its event id only; relay's own lines say more
    )


def _rq_level() -> str:
    """RQ logs four lines per job at INFO; relay logs each delivery itself: warnings only, unless DEBUG."""
    return "DEBUG" if log.getEffectiveLevel() <= logging.DEBUG else "WARNING"


@dataclass
class Sweep:
    """What one sweep remembers for the next."""

    first_seen: dict[str, float] = field(default_factory=dict)
    suspects: set[str] = field(default_factory=set)


def sweep(rt: Runtime, now: float, seen: Sweep | None = None) -> int:
    """The units of dead workers, and this worker's own that nothing of it holds at two sweeps in a row, go back
    due (a loss counted against each); how many."""
    seen = seen if seen is not None else Sweep()
    held = rt.store.leases.held()
    back = 0
    beats = rt.store.worker_beats()
    for owner, units in orphaned(held, beats, now, rt.store.dead_worker_after, seen.first_seen).items():
        if owner == rt.name:
            continue  # this process is alive, whatever its beat says
        n = lost(rt, units, owner)
        log.warning("worker %s is gone: %d of the units it held are due again", owner, len(units))
        back += n
    mine = {u for u, owner in held.items() if owner == rt.name}
    loose = mine - rt.store.leases.in_hand() - {delivery_unit(i) for i in rt.sender.in_hand()}
    again = sorted(loose & seen.suspects)
    if again:
        back += lost(rt, again)
        log.warning("%d units leased to this worker but not in hand are due again", len(again))
    seen.suspects = loose - set(again)
    oldest = rt.store.leases.oldest_due(now)
    stale = oldest is not None and now - oldest > STALE_SECONDS
    # Work put back, or left due with no wake-up queued: a wake-up, past a flag that names no job waiting.
    if (back or stale) and rt.work.recover_wake() and oldest is not None and stale:
        log.warning("work due for %.0f s with no wake-up queued: one queued", now - oldest)
    return back


_UNTOLD = object()


def _heartbeat(rt: Runtime, stop: threading.Event, reload: threading.Event, generation: bytes | None) -> None:
    seen = Sweep()
    told: object = _UNTOLD  # the generation this worker last said it runs with (CONFIG_APPLIED)
    while not stop.is_set():
        try:
            rt.store.heartbeat(rt.name)
            beatfile.touch()
            now_generation = _generation(rt.redis)
            if reload.is_set() or now_generation != generation:
                # SIGHUP here, or a reload elsewhere (`relay serve`, POST /api/v1/reload): read our file again.
                reload.clear()
                generation = now_generation
                if not _reload(rt):
                    told = generation  # runs on its old config: it never says it runs with this generation
            if generation != told:
                rt.redis.hset(CONFIG_APPLIED, rt.name, generation or b"0")
                told = generation
            sweep(rt, rt.clock(), seen)
        except RedisError as exc:
            log.warning("heartbeat failed: %s", type(exc).__name__)
        except Exception:  # the beat must go on whatever a sweep meets: a silent worker is taken for dead
            log.exception("heartbeat: a sweep failed unexpectedly")
        if parent_gone():
            # `relay serve` died without stopping us: do not linger as an orphan.
            _forget(rt)
            os._exit(0)
        stop.wait(heartbeat_seconds(rt.config))


def _forget(rt: Runtime) -> None:
    """This worker stops: its beat goes at once, so that /readyz counts live workers only."""
    beatfile.remove()
    with contextlib.suppress(RedisError):
        rt.store.forget_worker(rt.name)
        rt.redis.hdel(CONFIG_APPLIED, rt.name)


def _generation(conn: Redis) -> bytes | None:
    value = conn.get(CONFIG_GENERATION)
    return value if isinstance(value, bytes) else None


def _reload(rt: Runtime) -> bool:
    """Read the config file again; False when the running config is kept."""
    name = rt.name
    try:
        for note in reload_runtime(rt):
            log.warning("%s", note)
        log.info("worker %s reloaded its config", name)
        return True
    except ConfigError as exc:
        log.error("worker %s kept its running config; the new one is invalid: %s", name, exc)
    except Exception:  # the heartbeat thread must live on whatever a reload meets
        log.exception("worker %s kept its running config; the reload failed", name)
    return False


def _warm_up(config: Config) -> None:
    """Load Apprise's plugins for every channel once, before sender threads would race to load them."""
    from relay.delivery.channels import check_url

    for channel in config.channels.values():
        with contextlib.suppress(Exception):
            check_url(channel.url)


def _fresh_config(config: Config, config_file: Path | None) -> tuple[Config, bytes | None]:
    """The generation first: a reload announced after it is seen by the heartbeat, one before is in the file."""
    try:
        generation = _generation(open_redis(redis_url(config), socket_timeout=5, socket_connect_timeout=5))
    except RedisError:
        return config, None
    return (load_config(config_file) if config_file is not None else config), generation


def work_burst(rt: Runtime, connection: Redis | None = None) -> None:
    """Until the queued jobs and the senders are empty (scheduled retries not included): `--burst`."""
    conn = connection if connection is not None else rt.redis
    queue = Queue(QUEUE_NAME, connection=conn)
    while True:
        make_worker(rt, conn).work(burst=True, with_scheduler=False, logging_level=_rq_level())
        rt.sender.drain()
        if queue.count == 0 and rt.sender.pending == 0:
            return


class _MetricsServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass  # a scrape every few seconds is no news for the log


def serve_metrics(rt: Runtime) -> WSGIServer | None:
    """prometheus-client's WSGI app in a daemon thread, 404 off /metrics; None when no port is set."""
    from prometheus_client import make_wsgi_app

    from relay.admin.counters import CounterReader
    from relay.admin.metrics import metrics_registry

    port = rt.config.metrics.port
    if port is None:
        return None
    rt.store.counts.serve_as(rt.redis, rt.name)
    metrics = make_wsgi_app(metrics_registry(CounterReader(rt.redis, rt.store).own, fleet=False))

    def only_metrics(environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO") != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"not found: this worker serves /metrics only\n"]
        return metrics(environ, start_response)

    server = make_server(rt.config.metrics.host, port, only_metrics, _MetricsServer, _QuietHandler)
    threading.Thread(target=server.serve_forever, name="relay-metrics", daemon=True).start()
    log.info("worker %s serves /metrics on %s:%d", rt.name, rt.config.metrics.host, port)
    return server


def run_worker(
    config: Config,
    burst: bool = False,
    config_file: Path | None = None,
    counts_of: str | None = None,
    metrics_port: int | None = None,
) -> None:
    """`counts_of`: the process whose counts this worker's join; `metrics_port`: `--metrics-port` (0: none)."""
    config, generation = _fresh_config(config, config_file)
    if metrics_port is not None:
        config.metrics.port = metrics_port or None
    rt = build(config, config_file=config_file)
    rt.tracer = tracing.start(config, "worker", rt.name, redactor=rt.redactor)
    follow(rt.redactor, rt.tracer)  # its log lines: scrubbed of a reload's secrets too, with trace ids
    if counts_of is not None:
        rt.store.counts.join(counts_of)
    serve_metrics(rt)
    _warm_up(config)
    stop = threading.Event()
    reload = threading.Event()
    signal.signal(signal.SIGHUP, lambda *_: reload.set())
    beating = threading.Thread(
        target=_heartbeat, args=(rt, stop, reload, generation), name="relay-heartbeat", daemon=True
    )
    beating.start()
    # RQ blocks on BLPOP: its connection must not have a short socket timeout.
    conn = open_redis(redis_url(config), socket_connect_timeout=5, health_check_interval=30)
    log.info("worker %s started with %d sender thread(s)", rt.name, config.worker_threads)
    try:
        if burst:
            make_worker(rt, conn).work(burst=True, with_scheduler=True, logging_level=_rq_level())  # due retries
            work_burst(rt, conn)
            return
        # RQ forks its scheduler from this (main) thread, here or at a maintenance pass: it must not outlive us.
        forks_die_with_this_process()
        make_worker(rt, conn).work(with_scheduler=True, logging_level=_rq_level())
        log.info("worker %s stopping: finishing the deliveries in hand", rt.name)
        if not rt.sender.drain(DRAIN_SECONDS):
            log.warning("worker %s stopped with deliveries in hand; other workers take them over", rt.name)
    finally:
        stop.set()
        beating.join(2.0)  # a beat under way would bring the worker back into the count
        _forget(rt)
        rt.store.counts.retire(rt.redis)  # its counts, if it served /metrics, join the fleet's
