"""Which config each worker runs with: a reload (POST /api/v1/reload, SIGHUP) counts a new config generation,
every worker reads its own file again at its next heartbeat and says the generation it then runs with, and
the reload's answer waits for them (relay.admin.api, relay.runtime.worker)."""

from __future__ import annotations

from relay.config import Config

# Counter: the config generation, one more at each reload.
CONFIG_GENERATION = "relay:config:generation"
# Hash: worker name -> the config generation it runs with (written by each worker when it starts and when it
# has read its file again; POST /api/v1/reload waits on it).
CONFIG_APPLIED = "relay:config:applied"
HEARTBEAT_SECONDS = 5.0


def heartbeat_seconds(config: Config) -> float:
    """Between two beats of a worker (each looks for a new config generation): at most HEARTBEAT_SECONDS,
    and several beats within `dead_worker_after`."""
    return max(0.2, min(HEARTBEAT_SECONDS, config.dead_worker_after / 4))
