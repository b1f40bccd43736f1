"""Brings the embedded Redis of `relay serve` back when it dies (the OOM killer's SIGKILL, a crash).

A thread polls the Redis child. When it has exited, the keeper starts it again on the same data_dir, so
on the same append-only file and socket, by the policy every child of relay serve follows
(`relay.runtime.restarts`: its back-off, its give-up, its log lines); the workers and the API reconnect by
themselves. Each restart is logged and counted (`on_restart`); given up, `on_give_up` stops relay serve,
which exits with `GIVE_UP_EXIT_CODE`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from relay.runtime.embedded import EmbeddedRedis
from relay.runtime.restarts import DEFAULT_POLICY, POLL_SECONDS, Backoff, Policy, describe_exit

log = logging.getLogger("relay.serve")
RESTARTS_METRIC = "relay_embedded_redis_restarts_total"


class RedisKeeper:
    def __init__(
        self,
        server: EmbeddedRedis,
        on_give_up: Callable[[], None],
        on_restart: Callable[[int], None] = lambda restarts: None,
        start: Callable[[], object] | None = None,
        policy: Policy = DEFAULT_POLICY,
        poll: float = POLL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.server = server
        self.on_give_up = on_give_up
        self.on_restart = on_restart
        # What starts Redis again; a test hands in one that fails.
        self.start_server = start if start is not None else server.start
        self.backoff = Backoff("the embedded Redis", policy, clock)  # relay serve started it just now
        self.poll = poll
        self.clock = clock
        self.restarts = 0
        self.stopping = threading.Event()
        # A restarted Redis gets SIGTERM when the thread that started it ends (PR_SET_PDEATHSIG is per
        # thread): this thread lives until stop(), which `relay serve` calls just before stopping Redis.
        self.thread = threading.Thread(target=self._run, name="relay-redis-keeper", daemon=True)

    @property
    def failure(self) -> str | None:
        """Why the keeper gave up (None: it did not)."""
        return self.backoff.failure

    def start(self) -> RedisKeeper:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(30)

    def _run(self) -> None:
        while not self.stopping.wait(self.poll):
            code = self.server.returncode
            if code is not None and not self._bring_back(describe_exit(code)):
                return

    def _bring_back(self, how: str) -> bool:
        """Tries, backed off, until Redis answers (True), or until the policy gives up or the keeper is stopped."""
        down_since, failed = self.clock(), False
        while True:
            wait = self.backoff.ended("embedded Redis", how, failed=failed)
            if wait is None:
                self.on_give_up()
                return False
            if self.stopping.wait(wait):
                return False
            self.backoff.started()
            try:
                self.start_server()
            except Exception as exc:  # whatever stops Redis from starting, it counts as a failed start
                how, failed = f"did not start ({exc}; see {self.server.data_dir / 'redis.log'})", True
                continue
            self.restarts += 1
            log.warning(
                "embedded Redis is back on %s, %.1f s after it went down (restart %d since relay serve started)",
                self.server.url,
                self.clock() - down_since,
                self.restarts,
            )
            self.on_restart(self.restarts)
            return True
