"""Brings the embedded Redis of `relay serve` back when it dies, on the same data_dir, by the policy of every child
(`relay.runtime.restarts`); the workers and the API reconnect by themselves. The keeper's thread lives until `relay
serve` stops Redis: a restarted Redis gets SIGTERM when it ends (PR_SET_PDEATHSIG)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from relay.runtime.embedded import EmbeddedRedis
from relay.runtime.restarts import DEFAULT_POLICY, POLL_SECONDS, Backoff, Keeper, Policy, Slot, describe_exit

log = logging.getLogger("relay.serve")
RESTARTS_METRIC = "relay_embedded_redis_restarts_total"


class RedisKeeper(Keeper[EmbeddedRedis]):
    def __init__(
        self,
        server: EmbeddedRedis,
        on_give_up: Callable[[], None],
        on_restart: Callable[[int], None] = lambda restarts: None,
        start: Callable[[], object] | None = None,
        policy: Policy = DEFAULT_POLICY,
        poll: float = POLL_SECONDS,
    ) -> None:
        slot = Slot(Backoff("the embedded Redis", policy), child=server)  # relay serve started it just now
        super().__init__("relay-redis-keeper", [slot], on_give_up, poll)
        self.server = server
        self.on_restart = on_restart
        # What starts Redis again; a test hands in one that fails.
        self.start_server = start if start is not None else server.start
        self.restarts = 0
        self.down_since = 0.0

    def _ended(self, child: EmbeddedRedis) -> tuple[str, str, bool] | None:
        code = child.returncode
        if code is None:
            return None
        self.down_since = self.slots[0].backoff.clock()
        return "embedded Redis", describe_exit(code), False

    def _not_started(self, exc: Exception) -> tuple[str, str]:
        return "embedded Redis", f"did not start ({exc}; see {self.server.data_dir / 'redis.log'})"

    def _spawn(self) -> EmbeddedRedis:
        self.start_server()
        self.restarts += 1
        log.warning(
            "embedded Redis is back on %s, %.1f s after it went down (restart %d since relay serve started)",
            self.server.url,
            self.slots[0].backoff.clock() - self.down_since,
            self.restarts,
        )
        self.on_restart(self.restarts)
        return self.server
