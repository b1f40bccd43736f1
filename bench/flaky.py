"""A flaky channel is not a down channel (issue 48, item 18): `relay serve` with its defaults (outage `after: 5,
probe: 30s`, retries from 10 s) and one webhook channel to sink.py's /flaky, which answers 503 to one send in ten at
random and to a row of six every 400 sends: the rows of failures a 10% channel meets by chance, made frequent
enough to meet in minutes (at 20/s, a row of five comes by chance about once an hour).

Notifications are posted at `--rate` (open loop, as run.py's P2) for `--seconds`. Measured: from each POST's due
time to its first try at the sink (answered 200 or 503), p50, p99 and max; how many first tries came over 5 s
late (a delivery that waited for a probe); and how often `GET /api/v1/channels` (polled every 0.5 s) showed the
channel down. `--checkout DIR` runs the relay of another checkout (PYTHONPATH), for a before and after:

    .venv/bin/python bench/flaky.py                      # 120 s at 20/s
    git worktree add /tmp/before HEAD~1 && .venv/bin/python bench/flaky.py --checkout /tmp/before
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # bench/run.py, beside this file

ADMIN = "bench-admin-token-0001"


def watch_channel(port: int, stop: threading.Event, seen: list[str]) -> None:
    """The channel's state every 0.5 s, into `seen`."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/v1/channels", headers={"Authorization": f"Bearer {ADMIN}"}
    )
    while not stop.wait(0.5):
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                seen.extend(c["state"] for c in json.loads(answer.read())["channels"] if c["name"] == "flaky")
        except OSError:
            pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=20.0, help="notifications per second (default 20)")
    parser.add_argument("--seconds", type=int, default=120, help="how long to post (default 120)")
    parser.add_argument("--checkout", type=Path, help="run the relay of this checkout instead of this one")
    args = parser.parse_args()
    procs = run.Procs()
    try:
        sink = run.Sink(procs)
        with tempfile.TemporaryDirectory() as tmp:
            port = run.free_port()
            path = run.relay_config(Path(tmp), port, sink, None)
            config = json.loads(path.read_text())
            config["channels"] = {"flaky": {"url": sink.channel("/flaky")}}
            config["routes"] = [{"channels": ["flaky"]}]
            path.write_text(json.dumps(config))
            env = {"PYTHONPATH": str(args.checkout.resolve())} if args.checkout else None
            proc = procs.start([str(run.BIN / "relay"), "serve", "--config", str(path)], env, cwd=tmp)
            ready = f"http://127.0.0.1:{port}/readyz"
            run.wait_until(lambda: run.http("GET", ready)[0] == 200, 60, "relay serve ready")
            stop, seen = threading.Event(), []
            watcher = threading.Thread(target=watch_channel, args=(port, stop, seen), daemon=True)
            watcher.start()
            run_id = uuid.uuid4().hex[:10]
            n = int(args.rate * args.seconds)
            load = [(f"{run_id}-{i}", run.payload(f"{run_id}-{i}", run.FAST_KIND, 1)) for i in range(n)]
            sent, statuses = run.post_all(port, load, connections=32, rate=args.rate)
            deadline = time.time() + 120  # the last ones' first tries (a probe is 30 s at the most)
            while time.time() < deadline and len(sink.arrivals()) < n:
                time.sleep(1)
            stop.set()
            watcher.join()
            arrivals = sink.arrivals()
            lat = sorted(arrivals[f"{t}-0"] - sent[t] for t, _ in load if f"{t}-0" in arrivals)
            procs.stop(proc, 60)
        if not lat:
            print(f"no first try reached the sink of {n} notifications", file=sys.stderr)
            return 1
        print(f"relay: {args.checkout or 'this checkout'}; {n} notifications at {args.rate:g}/s")
        print(f"non-2xx answers: {sum(c for s, c in statuses.items() if not 200 <= s < 300)}")
        print(f"first tries seen: {len(lat)} of {n}")
        p50, p99 = run.percentile(lat, 50) * 1000, run.percentile(lat, 99) * 1000
        late = sum(1 for x in lat if x > 5)
        print(f"POST to first try: p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {lat[-1]:.2f} s; over 5 s late: {late}")
        print(f"channel seen down: {seen.count('down')} of {len(seen)} polls")
    finally:
        procs.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
