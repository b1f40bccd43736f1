"""`relay serve`: embedded Redis (when no redis.url), N worker processes and the API, stopped together."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Hashable
from pathlib import Path

from redis.exceptions import RedisError

from relay import tracing
from relay.config import Config
from relay.core.redaction import Redactor
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime, build, process_name, reload_on_sighup
from relay.runtime.datalock import lock_data_dir
from relay.runtime.embedded import EmbeddedRedis
from relay.runtime.http_server import bind, serve_http
from relay.runtime.logs import follow
from relay.runtime.pool import Workers
from relay.runtime.redis_keeper import RESTARTS_METRIC, RedisKeeper
from relay.runtime.restarts import GIVE_UP_EXIT_CODE

log = logging.getLogger("relay.serve")
# The embedded Redis's share of the stop, after the workers' (`relay.runtime.pool.STOP_SECONDS`): 20 s in all.
REDIS_STOP_SECONDS = 4.0


def stop_self() -> None:
    """Stop as on SIGTERM (uvicorn, then the workers): the way a part that gives up stops relay serve."""
    os.kill(os.getpid(), signal.SIGTERM)


def redis_context(embedded: EmbeddedRedis | None) -> Callable[[], Hashable]:
    """Which embedded Redis runs (None while none does)."""
    if embedded is None:
        return lambda: 0  # an external Redis: relay serve knows no more of it than a worker does

    def running() -> Hashable:
        proc = embedded.proc
        return proc.pid if proc is not None and proc.poll() is None else None

    return running


def keep_redis(embedded: EmbeddedRedis, rt: Runtime) -> RedisKeeper:
    """Restarts the embedded Redis when it dies; counts each restart in the metrics every process reads."""

    def count(restarts: int) -> None:
        try:
            rt.store.incr(RESTARTS_METRIC)
        except RedisError as exc:  # down again already: the log line of the restart still says it
            log.warning("restart %d of the embedded Redis not counted: %s", restarts, type(exc).__name__)

    # Given up: stop as on SIGTERM (uvicorn, then the workers); serve() then exits with GIVE_UP_EXIT_CODE.
    keeper = RedisKeeper(embedded, on_give_up=stop_self, on_restart=count)
    with contextlib.suppress(RedisError):
        rt.store.incr(RESTARTS_METRIC, 0)  # the series exists, at 0, from the start
    return keeper.start()


def _failure(pool: Workers | None, keeper: RedisKeeper | None) -> str | None:
    return (pool.failure if pool is not None else None) or (keeper.failure if keeper is not None else None)


def serve(config: Config, config_file: Path | None, workers: int) -> int:
    # The embedded Redis's files are this process's alone: a second `relay serve` on them stops here, first
    # (its port is the first one's too). A data_dir not made yet is nobody's: it is made once the port is ours.
    owns_files = not config.redis.url
    lock = lock_data_dir(config.data_path) if owns_files and config.data_path.exists() else None
    # Then the port: in use, it is one clear line, with no Redis or worker started for nothing.
    sockets = bind(config.server, " or `relay serve --port`")
    if owns_files and lock is None:
        lock = lock_data_dir(config.data_path)
    env = dict(os.environ)
    embedded: EmbeddedRedis | None = None
    pool: Workers | None = None
    keeper: RedisKeeper | None = None
    rt: Runtime | None = None
    try:
        if not config.redis.url:
            embedded = EmbeddedRedis(config.data_path, config.redis.appendfsync).start()
            # The API (this process, on a reload too) and the workers all read the config with this set.
            os.environ["RELAY_REDIS__URL"] = env["RELAY_REDIS__URL"] = embedded.url
            config = config.model_copy(update={"redis": config.redis.model_copy(update={"url": embedded.url})})
            # The URL that `rq info -u`, rq-dashboard and `relay status` reach this Redis by.
            log.info(
                "embedded Redis started: %s (append-only file in %s; rq info -u %s)",
                embedded.url,
                config.data_path,
                embedded.url,
            )
        # The workers count where serve does, for serve's /metrics; none serves a /metrics of its own.
        counts = process_name()
        command = [sys.executable, "-m", "relay", "worker", "--counts-of", counts, "--metrics-port", "0"]
        if config_file is not None:
            command += ["--config", str(config_file)]
        redactor = Redactor.of(config)
        pool = Workers(workers, command, env, stop_self, context=redis_context(embedded), redactor=redactor).start()
        rt = build(config, config_file=config_file, redactor=redactor)
        rt.store.counts.serve_as(rt.redis, counts)
        rt.tracer = tracing.start(config, "api", rt.name, redactor=rt.redactor)  # each worker its own
        follow(rt.redactor, rt.tracer)
        if embedded is not None:
            keeper = keep_redis(embedded, rt)
        # SIGHUP: the API reads the file again and bumps the generation that the workers watch.
        reload_on_sighup(rt)
        app = create_app(rt)
        # uvicorn re-raises the stop signal once it has shut down; these handlers absorb it so that
        # the workers and the embedded Redis are stopped below, in order.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: None)
        # The workers get SIGTERM as soon as the stop begins, while uvicorn finishes its requests.
        serve_http(app, config.server, sockets, f" with {workers} worker(s)", on_exit=pool.begin_stop)
        return GIVE_UP_EXIT_CODE if _failure(pool, keeper) else 0
    finally:
        if pool is not None:
            pool.stop()
        if rt is not None:
            rt.store.counts.retire(rt.redis)  # what serve and its workers counted joins the fleet's totals
        if keeper is not None:
            keeper.stop()
        if embedded is not None:
            embedded.stop(REDIS_STOP_SECONDS)
        if lock is not None:
            lock.close()  # last: no other relay starts on data_dir before our Redis has stopped
        log.info("relay stopped")
        if failure := _failure(pool, keeper):
            print(f"relay: {failure}", file=sys.stderr)  # the cause, last, where an operator looks
