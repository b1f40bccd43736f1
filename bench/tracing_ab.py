"""What tracing costs (issue 28): two `relay serve`s side by side, one with tracing off (the default) and
one exporting every span over OTLP/HTTP to a local receiver that discards them, taking turns within each
round so that a slow spell of this shared machine falls on both alike.

    .venv/bin/python bench/tracing_ab.py [--rounds 3]

Per round and side: P2 at light load (p50 and p99 from POST to arrival, 200 notifications at 20/s, after a
warm-up), intake (accepts/s: 1,000 POSTs on 32 connections, 202 answered) and P4 (deliveries/s to an instant
sink: 500 notifications of 3 messages on 16 connections). Medians of the rounds are printed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from run import (
    FAST_KIND,
    PY,
    Procs,
    Sink,
    bodies,
    free_port,
    http,
    latency,
    light_load,
    post_all,
    relay_serve,
    throughput,
    wait_until,
)

RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def intake(port: int, n: int) -> float:
    load = bodies(n, FAST_KIND, 1)
    start = time.time()
    post_all(port, load, connections=32)
    return n / (time.time() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for key in [k for k in os.environ if k.startswith("OTEL_")]:
        del os.environ[key]  # the "off" side must be the default
    procs = Procs()
    tmp = Path(tempfile.mkdtemp(prefix="relay-tracing-ab-"))
    runs: dict[str, list[float]] = {}
    try:
        sink = Sink(procs)
        receiver = free_port()
        procs.start([PY, "-c", RECEIVER, str(receiver)])
        wait_until(lambda: http("GET", f"http://127.0.0.1:{receiver}/")[0] == 200, 15, "the OTLP receiver")
        on_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver}"}
        with contextlib.ExitStack() as up:
            sides = {
                "off": up.enter_context(relay_serve(procs, tmp / "off", sink))[0],
                "on": up.enter_context(relay_serve(procs, tmp / "on", sink, on_env))[0],
            }
            for r in range(args.rounds):
                print(f"round {r + 1}", flush=True)
                order = list(sides.items()) if r % 2 == 0 else list(reversed(sides.items()))
                for name, port in order:
                    p50, p99, bad = light_load(latency, port, sink)
                    accepts = intake(port, 1000)
                    sink.wait_count(1000, 120)
                    rate, bad4 = throughput(port, sink, 500, FAST_KIND, 3, 16)
                    for key, value in (
                        ("p2_p50_ms", p50),
                        ("p2_p99_ms", p99),
                        ("intake_per_s", accepts),
                        ("p4_per_s", rate),
                    ):
                        runs.setdefault(f"{key} {name}", []).append(value)
                    print(
                        f"   {name}: p50 {p50:.1f} ms, p99 {p99:.1f} ms, intake {accepts:.0f}/s, P4 {rate:.0f}/s,"
                        f" non-2xx {bad + bad4}",
                        flush=True,
                    )
    finally:
        procs.stop_all()
    print("medians:")
    for key in sorted(runs):
        print(f"   {key}: {statistics.median(runs[key]):.1f}  (rounds: {', '.join(f'{v:.1f}' for v in runs[key])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
