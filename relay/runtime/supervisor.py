"""`relay serve`: embedded Redis (when no redis.url), N worker processes and the API, stopped together."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from redis.exceptions import RedisError

from relay import tracing
from relay.config import Config
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime, build, reload_on_sighup
from relay.runtime.children import die_with_parent
from relay.runtime.datalock import lock_data_dir
from relay.runtime.embedded import EmbeddedRedis
from relay.runtime.listening import bind, serve_http
from relay.runtime.redis_keeper import GIVE_UP_EXIT_CODE, RESTARTS_METRIC, RedisKeeper

log = logging.getLogger("relay.serve")
STOP_SECONDS = 20.0


class Workers:
    """Worker processes, restarted if one dies while relay runs."""

    def __init__(self, count: int, config_file: Path | None, env: dict[str, str], tally_dir: Path) -> None:
        self.count = count
        # Their counts go to files in `tally_dir`, for serve's /metrics; none serves a /metrics of its own.
        self.args = [sys.executable, "-m", "relay", "worker", "--metrics-dir", str(tally_dir), "--metrics-port", "0"]
        if config_file is not None:
            self.args += ["--config", str(config_file)]
        self.env = {**env, "RELAY_SUPERVISED": "1"}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def _spawn(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self.args, env=self.env, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent
        )

    def start(self) -> None:
        with self.lock:
            self.procs = [self._spawn() for _ in range(self.count)]
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        while not self.stopping.wait(1.0):
            with self.lock:
                for i, proc in enumerate(self.procs):
                    if proc.poll() is not None and not self.stopping.is_set():
                        log.warning("worker %d exited with %s; starting another", proc.pid, proc.returncode)
                        self.procs[i] = self._spawn()

    def stop(self) -> None:
        """SIGTERM: each worker finishes the delivery in hand, then exits."""
        self.stopping.set()
        with self.lock:
            for proc in self.procs:
                if proc.poll() is None:
                    proc.terminate()
            for proc in self.procs:
                try:
                    proc.wait(STOP_SECONDS)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def keep_redis(embedded: EmbeddedRedis, rt: Runtime) -> RedisKeeper:
    """Restarts the embedded Redis when it dies; counts each restart in the metrics every process reads."""

    def count(restarts: int) -> None:
        try:
            rt.store.incr(RESTARTS_METRIC)
        except RedisError as exc:  # down again already: the log line of the restart still says it
            log.warning("restart %d of the embedded Redis not counted: %s", restarts, type(exc).__name__)

    # Given up: stop as on SIGTERM (uvicorn, then the workers); serve() then exits with GIVE_UP_EXIT_CODE.
    keeper = RedisKeeper(embedded, on_give_up=lambda: os.kill(os.getpid(), signal.SIGTERM), on_restart=count)
    with contextlib.suppress(RedisError):
        rt.store.incr(RESTARTS_METRIC, 0)  # the series exists, at 0, from the start
    return keeper.start()


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
    tally_dir: Path | None = None
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
        tally_dir = Path(tempfile.mkdtemp(prefix="relay-counts-"))
        pool = Workers(workers, config_file, env, tally_dir)
        pool.start()
        rt = build(config, config_file=config_file)
        rt.tally_dir = tally_dir
        tracing.start(config, "api", rt.name)  # the workers start theirs, each its own service instance
        if embedded is not None:
            keeper = keep_redis(embedded, rt)
        # SIGHUP: the API reads the file again and bumps the generation that the workers watch.
        reload_on_sighup(rt)
        app = create_app(rt)
        # uvicorn re-raises the stop signal once it has shut down; these handlers absorb it so that
        # the workers and the embedded Redis are stopped below, in order.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: None)
        serve_http(app, config.server, sockets, f" with {workers} worker(s)")
        return GIVE_UP_EXIT_CODE if keeper is not None and keeper.gave_up else 0
    finally:
        if pool is not None:
            pool.stop()
        if keeper is not None:
            keeper.stop()
        if embedded is not None:
            embedded.stop()
        if tally_dir is not None:
            shutil.rmtree(tally_dir, ignore_errors=True)
        if lock is not None:
            lock.close()  # last: no other relay starts on data_dir before our Redis has stopped
        log.info("relay stopped")
