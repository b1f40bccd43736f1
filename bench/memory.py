"""P6 (issue 36): Redis memory per retained notification, measured from outside.

Not a test. Starts `relay serve` with its defaults (its own embedded Redis; `--external`: a plain redis-server
with Redis's defaults instead) and the bench's sink, posts N one-message notifications (each delivered once to
the sink), waits until every delivery is recorded as delivered, and prints `used_memory`'s growth per
notification beside the payload's size, then where the bytes are: MEMORY USAGE of the keys of each kind
(sampled) and of the shared indexes.

    .venv/bin/python bench/memory.py              # 50,000 notifications (the issue's count)
    .venv/bin/python bench/memory.py -n 5000      # quicker
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from redis import Redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import FAST_KIND, FSYNC, Procs, Sink, free_port, http, post_all, relay_config, wait_until  # noqa: E402

from relay.runtime.embedded import url_for  # noqa: E402
from relay.storage.tally import fleet_totals  # noqa: E402

BIN = Path(sys.executable).parent
PAYLOAD_BYTES = 446  # the one-message notification


def body(token: str) -> bytes:
    """A one-message notification of PAYLOAD_BYTES, to the channel as its audience (one delivery)."""
    data: dict[str, Any] = {
        "kind": FAST_KIND,
        "sender": "platform",
        "metadata": {"eventId": token},
        "body": {"verb": "grant", "requestStatus": "FAILED", "environment": "production", "padding": ""},
        "messages": [
            {
                "recipientType": "recipient-type:system-owner",
                "recipients": [],
                "title": "Access request failed",
                "message": f"The access request failed. tok-{token}",
            }
        ],
    }
    data["body"]["padding"] = "x" * max(0, PAYLOAD_BYTES - len(json.dumps(data)))
    return json.dumps(data).encode()


def shape(key: str) -> str:
    """The key with its variable part (ids) replaced: keys of one kind count together."""
    return re.sub(r"(bench-[0-9a-f-]+|d[0-9a-f]{24})", "*", key)


def breakdown(redis: Redis, n: int) -> list[tuple[str, int, float, str]]:
    """(key shape, keys, bytes per notification, encoding) of every kind of key, largest first (per-id keys
    sampled)."""
    counts: dict[str, int] = defaultdict(int)
    samples: dict[str, list[int]] = defaultdict(list)
    encodings: dict[str, str] = {}
    for raw in redis.scan_iter(count=1000):
        key = raw.decode()
        kind = shape(key)
        counts[kind] += 1
        if len(samples[kind]) < 200:
            samples[kind].append(int(redis.memory_usage(key, samples=0) or 0))
            found = redis.object("encoding", key)
            encodings[kind] = found.decode() if isinstance(found, bytes) else str(found)
    rows = [(k, counts[k], counts[k] * sum(s) / len(s) / n, encodings[k]) for k, s in samples.items()]
    return sorted(rows, key=lambda row: -row[2])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=50_000, help="notifications (default 50,000)")
    parser.add_argument("--external", action="store_true", help="on a plain redis-server")
    parser.add_argument("--show", action="store_true", help="also print one delivery's and one event's fields")
    args = parser.parse_args()
    procs = Procs()
    try:
        with tempfile.TemporaryDirectory(prefix="relay-p6-") as tmp_name:
            tmp = Path(tmp_name)
            sink = Sink(procs)
            port = free_port()
            if args.external:
                redis_port = free_port()
                procs.start(["redis-server", "--port", str(redis_port), "--save", "", "--appendonly", "no"])
                redis = Redis(port=redis_port)
                wait_until(lambda: _pings(redis), 15, "redis")
                config = relay_config(tmp, port, sink, f"redis://127.0.0.1:{redis_port}/0")
            else:
                FSYNC["policy"] = "everysec"  # memory is measured, not the disk
                config = relay_config(tmp, port, sink, None)
                redis = Redis.from_url(url_for(tmp / "data"))
            relay = procs.start([str(BIN / "relay"), "serve", "--config", str(config)], cwd=tmp)
            wait_until(lambda: http("GET", f"http://127.0.0.1:{port}/readyz")[0] == 200, 60, "relay serve ready")
            time.sleep(1)
            before = int(redis.info("memory")["used_memory"])
            stats_before = _stats(redis)
            bodies = [(t, body(t)) for t in (f"bench-{uuid.uuid4()}" for _ in range(args.n))]
            size = len(bodies[0][1])
            started = time.time()
            for i in range(0, args.n, 5000):
                _, statuses = post_all(port, bodies[i : i + 5000])
                if set(statuses) != {202}:
                    raise RuntimeError(f"relay answered {statuses}")
            sink.wait_count(args.n, 1800)
            field = f"relay_deliveries_total|channel=instant,kind={FAST_KIND},state=delivered"
            wait_until(lambda: fleet_totals(redis).get(field, 0) >= args.n, 120, "every delivery recorded")
            took = time.time() - started
            time.sleep(1)
            after = int(redis.info("memory")["used_memory"])
            per = (after - before) / args.n
            print(f"P6: {args.n} one-message notifications of {size} bytes, delivered in {took:.0f}s")
            print(f"used_memory grew {after - before} bytes: {per:.0f} bytes per notification")
            print(f"limit: payload + 1 KB = {size + 1024} bytes: {'held' if per <= size + 1024 else 'NOT HELD'}")
            print("where (MEMORY USAGE, per notification):")
            for kind, count, each, encoding in breakdown(redis, args.n):
                if each >= 1:
                    print(f"  {each:8.0f}  {kind}  ({count} keys, {encoding})")
            if args.show:
                stats = _stats(redis)
                print("MEMORY STATS growth:", {k: stats[k] - stats_before.get(k, 0) for k in stats})
                for key in (next(redis.scan_iter("relay:delivery:*")), f"relay:event:{bodies[0][0]}"):
                    fields = redis.hgetall(key)
                    print(key, {_str(k): _str(v) for k, v in fields.items()})
            procs.stop(relay, 60)
    finally:
        procs.stop_all()
    return 0


def _str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _stats(redis: Redis) -> dict[str, int]:
    """MEMORY STATS' byte counts (what is not the keys' own: overhead, clients, AOF buffers, ...)."""
    return {_str(k): int(v) for k, v in redis.memory_stats().items() if isinstance(v, int)}


def _pings(redis: Redis) -> bool:
    try:
        return bool(redis.ping())
    except OSError:
        return False
    except Exception:  # redis-py's ConnectionError while it starts
        return False


if __name__ == "__main__":
    raise SystemExit(main())
