"""Brings the embedded Redis of `relay serve` back when it dies (the OOM killer's SIGKILL, a crash).

A thread polls the Redis child. When it has exited, the keeper starts it again on the same data_dir, so
on the same append-only file and socket, after a back-off (0.5 s, 1 s, 2 s, 4 s, 8 s by default); the
workers and the API reconnect by themselves. Each restart is logged and counted. After `max_failures`
failed starts in a row (a Redis that dies within `stable_seconds` of a restart counts as one: a crash
loop) it gives up: `on_give_up` stops `relay serve`, which exits non-zero for its service manager to
restart it.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence

from relay.runtime.embedded import EmbeddedRedis

log = logging.getLogger("relay.serve")
BACKOFF = (0.5, 1.0, 2.0, 4.0, 8.0)  # seconds before each try in a row; the last one repeats
MAX_FAILURES = 5
STABLE_SECONDS = 30.0
POLL_SECONDS = 0.2
GIVE_UP_EXIT_CODE = 3
RESTARTS_METRIC = "relay_embedded_redis_restarts_total"


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


class RedisKeeper:
    def __init__(
        self,
        server: EmbeddedRedis,
        on_give_up: Callable[[], None],
        on_restart: Callable[[int], None] = lambda restarts: None,
        start: Callable[[], object] | None = None,
        backoff: Sequence[float] = BACKOFF,
        max_failures: int = MAX_FAILURES,
        stable_seconds: float = STABLE_SECONDS,
        poll: float = POLL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.server = server
        self.on_give_up = on_give_up
        self.on_restart = on_restart
        # What starts Redis again; a test hands in one that fails.
        self.start_server = start if start is not None else server.start
        self.backoff = list(backoff) or [0.0]
        self.max_failures = max_failures
        self.stable_seconds = stable_seconds
        self.poll = poll
        self.clock = clock
        self.restarts = 0
        self.gave_up = False
        self.stopping = threading.Event()
        # A restarted Redis gets SIGTERM when the thread that started it ends (PR_SET_PDEATHSIG is per
        # thread): this thread lives until stop(), which `relay serve` calls just before stopping Redis.
        self.thread = threading.Thread(target=self._run, name="relay-redis-keeper", daemon=True)

    def start(self) -> RedisKeeper:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(30)

    def _run(self) -> None:
        failures = 0  # failed starts in a row
        restarted_at: float | None = None  # when the keeper last started Redis (None: relay serve did)
        while not self.stopping.wait(self.poll):
            code = self.server.returncode
            if code is None:
                continue
            if restarted_at is not None and self.clock() - restarted_at < self.stable_seconds:
                failures += 1  # back up, then down again at once: a restart that did not hold
            else:
                failures = 0
            log.warning("embedded Redis %s: starting it again on its append-only file", describe_exit(code))
            after = self._bring_back(failures, self.clock())
            if after is None:
                return
            failures, restarted_at = after, self.clock()

    def _bring_back(self, failures: int, down_since: float) -> int | None:
        """Tries with back-off until Redis answers (then the failed tries in a row so far), or until
        `max_failures` tries in a row failed or the keeper is stopped (None)."""
        while failures < self.max_failures:
            if self.stopping.wait(self.backoff[min(failures, len(self.backoff) - 1)]):
                return None
            try:
                self.start_server()
            except Exception as exc:  # whatever stops Redis from starting, it counts as a failed try
                failures += 1
                log.warning(
                    "embedded Redis did not start again (try %d of %d in a row): %s", failures, self.max_failures, exc
                )
                continue
            self.restarts += 1
            log.warning(
                "embedded Redis is back on %s, %.1f s after it went down (restart %d since relay serve started)",
                self.server.url,
                self.clock() - down_since,
                self.restarts,
            )
            self.on_restart(self.restarts)
            return failures
        self.gave_up = True
        log.error(
            "embedded Redis could not be started again (%d tries in a row failed; see %s): relay serve stops "
            "with exit code %d for its service manager to restart it",
            failures,
            self.server.data_dir / "redis.log",
            GIVE_UP_EXIT_CODE,
        )
        self.on_give_up()
        return None
