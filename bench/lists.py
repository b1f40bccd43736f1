"""Lists of deliveries after many are retained (issue 38): how long the newest 50 take to list.

Not a test. Starts a Redis of its own (no persistence), stores N deliveries through the store's own write path
(`Store.create_deliveries`: one script per notification of 50) over 6 states, 4 channels and 20 kinds, moves
some through `Store.update_many` as workers do, then times the listing the API and the CLI
use (`Filters.page`, records read included) for several filters and a deep page, and prints the figures.

    .venv/bin/python bench/lists.py              # 500,000 deliveries (issue 38's count)
    .venv/bin/python bench/lists.py -n 50000
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from redis import Redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from run import free_port, wait_until  # noqa: E402

from relay.admin.selection import Filters  # noqa: E402
from relay.core.clock import system_clock  # noqa: E402
from relay.core.model import Delivery, State  # noqa: E402
from relay.storage.store import StateChange, Store  # noqa: E402

CHANNELS = ["chat", "mail", "pager", "audit"]
KINDS = [f"notification:kind-{k:02d}" for k in range(20)]
PER_EVENT = 50
STATES = [State.DELIVERED] * 14 + [State.FAILED, State.HELD, State.SKIPPED, State.RETRYING, State.QUEUED]


def fill(store: Store, n: int) -> None:
    """N deliveries, PER_EVENT per notification, each stored in its final state by the planning's script; one
    notification in ten then has its failed deliveries replayed and delivered (moved by `update_many`)."""
    rng = random.Random(7)
    start = time.time() - 3600
    done = 0
    while done < n:
        event = f"ev-{done // PER_EVENT:07d}"
        kind = rng.choice(KINDS)
        at = start + 3000 * done / n
        records = []
        for m in range(min(PER_EVENT, n - done)):
            state = rng.choice(STATES)
            r = Delivery(f"d{done + m:024x}", event, kind, m, CHANNELS[m % len(CHANNELS)], "auto", 6, at, at)
            r.state, r.attempts = state, int(state is not State.QUEUED)
            r.lastError = "HTTP 500 from the service" if state is State.FAILED else None
            records.append(r)
        store.create_deliveries(event, records)
        if rng.random() < 0.1:
            moved = [r for r in records if r.state is State.FAILED]
            for r in moved:
                r.state, r.lastError = State.DELIVERED, None
            store.update_many([StateChange(r, State.FAILED) for r in moved])
        done += len(records)
        if done % 100_000 < PER_EVENT:
            print(f"  stored {done}", flush=True)


def timed(what: str, call: Any, rounds: int = 20) -> tuple[str, float, int]:
    call()  # once first: scripts loaded, connection open
    times = []
    found = 0
    for _ in range(rounds):
        t = time.perf_counter()
        found = len(call())
        times.append((time.perf_counter() - t) * 1000)
    return what, statistics.median(times), found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=500_000, help="deliveries (default 500,000)")
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        redis = Redis(port=port)
        wait_until(lambda: _pings(redis), 15, "redis")
        store = Store(redis, 7 * 86400, system_clock)
        started = time.time()
        fill(store, args.n)
        print(f"stored {args.n} deliveries in {time.time() - started:.0f}s; used_memory {_mb(redis)} MB")
        since = time.time() - 1800
        deep: list[str | None] = [None]

        def deep_page() -> list[Delivery]:
            return Filters().page(store, 50, deep[0])[0]

        cursor = None
        for _ in range(200):  # the 201st page of everything: 10,000 deep
            cursor = Filters().page(store, 50, cursor)[1]
        deep[0] = cursor
        rows = [
            timed("newest 50, no filter", lambda: Filters().page(store, 50)[0]),
            timed("state=delivered", lambda: Filters(state=State.DELIVERED).page(store, 50)[0]),
            timed("state=failed", lambda: Filters(state=State.FAILED).page(store, 50)[0]),
            timed("channel=mail", lambda: Filters(channel="mail").page(store, 50)[0]),
            timed("kind=notification:kind-07", lambda: Filters(kind=KINDS[7]).page(store, 50)[0]),
            timed("kind=notification:kind-1*", lambda: Filters(kind="notification:kind-1*").page(store, 50)[0]),
            timed(
                "state=failed channel=pager kind=...-03",
                lambda: Filters(State.FAILED, KINDS[3], "pager").page(store, 50)[0],
            ),
            timed("since=30m", lambda: Filters(since=since).page(store, 50)[0]),
            timed("state=held since=30m", lambda: Filters(State.HELD, since=since).page(store, 50)[0]),
            timed("page 201 (10,000 deep), no filter", deep_page),
            timed("newest 500, no filter", lambda: Filters().page(store, 500)[0], rounds=5),
        ]
        lists = redis.scard("relay:lists")
        print(f"\n{args.n} deliveries in {lists} lists; median of 20 (records read included):")
        for what, ms, found in rows:
            print(f"  {ms:7.1f} ms  {what}  ({found} listed)")
    finally:
        server.terminate()
        server.wait(30)
    return 0


def _mb(redis: Redis) -> str:
    return f"{int(redis.info('memory')['used_memory']) / 1e6:.0f}"


def _pings(redis: Redis) -> bool:
    try:
        return bool(redis.ping())
    except Exception:  # redis-py's ConnectionError while it starts
        return False


if __name__ == "__main__":
    raise SystemExit(main())
