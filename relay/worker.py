"""`relay worker`: an RQ SimpleWorker (no fork per job) with the scheduler, plus a heartbeat for /readyz."""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid

from redis import Redis
from redis.exceptions import RedisError
from rq import Queue, SimpleWorker
from rq.registry import StartedJobRegistry

from relay.bootstrap import build, install, redis_url
from relay.config import Config
from relay.queue import QUEUE_NAME

log = logging.getLogger("relay.worker")
HEARTBEAT_SECONDS = 5.0
REAP_EVERY = 3  # heartbeats


def _heartbeat(config: Config, name: str, stop: threading.Event) -> None:
    conn = Redis.from_url(redis_url(config), socket_timeout=5, socket_connect_timeout=5)
    from relay.store import Store

    store = Store(conn, config.retention)
    started = StartedJobRegistry(QUEUE_NAME, connection=conn)
    beats = 0
    while not stop.is_set():
        try:
            store.heartbeat(name)
            if beats % REAP_EVERY == 0:
                # RQ itself looks for jobs of dead workers only every 10 minutes: look more often, so a
                # delivery whose worker was killed is retried within about two minutes.
                started.cleanup()
        except RedisError as exc:
            log.warning("heartbeat failed: %s", type(exc).__name__)
        beats += 1
        parent_gone = os.getppid() == 1
        if parent_gone and os.environ.get("RELAY_SUPERVISED") == "1":
            # `relay serve` died without stopping us: do not linger as an orphan.
            os._exit(0)
        stop.wait(HEARTBEAT_SECONDS)


def run_worker(config: Config, burst: bool = False) -> None:
    install(build(config))
    name = f"relay-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    # RQ blocks on BLPOP for long periods: its connection must not have a short socket timeout.
    conn = Redis.from_url(redis_url(config), socket_connect_timeout=5, health_check_interval=30)
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(config, name, stop), daemon=True)
    beat.start()
    worker = SimpleWorker([Queue(QUEUE_NAME, connection=conn)], connection=conn, name=name, worker_ttl=60)
    log.info("worker %s started", name)
    try:
        worker.work(with_scheduler=True, burst=burst, logging_level=logging.getLevelName(log.getEffectiveLevel()))
    finally:
        stop.set()
