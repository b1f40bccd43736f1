"""What a route's `thread` costs (issue 49): `relay serve` with its defaults and one e-mail channel to a local
SMTP sink (smtp_sink.py, aiosmtpd), one route, three arms taking turns within each round:

- `none`: the route has no `thread`;
- `many`: `thread: "{{ metadata.eventId }}"`, a conversation per notification (every message starts one: its
  key rendered, the line joined, the `in_order` gate's turn, the line moved on; nobody waits);
- `few`: `thread: "{{ body.thing }}"` over 4 values, so the messages of a key wait their turn (replies).

For each arm, a fresh `relay serve` (its own embedded Redis) and, after a warm-up: P2-like latency, POST to
the mail's arrival at the SMTP sink, p50/p99 of 200 notifications at 20/s (`--rate`; open loop, as run.py's
P2); P4-like throughput, N one-message notifications posted at once (16 connections), deliveries per second
from the first POST to the last mail. The bench's webhook sinks are not used: `thread` does nothing on a
webhook channel.

    .venv/bin/python bench/threads.py                  # 1 round, 1,000 notifications for throughput
    .venv/bin/python bench/threads.py --rounds 3 -n 2000
    .venv/bin/python bench/threads.py --arms none,few --rate 5

Prints each figure as it is measured, then a table of medians with ratios to `none`, and the load average before
and after. Every process started here is stopped here.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # bench/run.py, beside this file

ARMS = {"none": None, "many": "{{ metadata.eventId }}", "few": "{{ body.thing }}"}
FEW_KEYS = 4


class MailSink(run.Sink):
    """smtp_sink.py: run.Sink's readers on its HTTP side; `smtp_port` is where relay sends."""

    def __init__(self, procs: run.Procs) -> None:
        self.port, self.smtp_port = run.free_port(), run.free_port()
        args = [run.PY, str(run.HERE / "smtp_sink.py"), str(self.smtp_port), str(self.port)]
        self.proc = procs.start(args, cwd=run.HERE)
        run.wait_until(lambda: run.http("GET", self.url("/count"))[0] == 200, 15, "the SMTP sink")

    def replies(self) -> int:
        return int(json.loads(run.http("GET", self.url("/count"))[1])["replies"])


def config(tmp: Path, port: int, sink: MailSink, thread: str | None) -> Path:
    """run.py's relay config with one e-mail channel and one route to it (with `thread` when given)."""
    path = run.relay_config(tmp, port, sink, None)
    data = json.loads(path.read_text())
    url = f"mailto://127.0.0.1:{sink.smtp_port}?from=relay@example.com&to=ops@example.com&mode=insecure"
    data["channels"] = {"mail": {"url": url}}
    data["routes"] = [{"channels": ["mail"], **({"thread": thread} if thread else {})}]
    path.write_text(json.dumps(data))
    return path


def bodies(n: int) -> list[tuple[str, bytes]]:
    """run.py's one-message notifications, each with `body.thing` one of FEW_KEYS values (every arm the same)."""
    out: list[tuple[str, bytes]] = []
    for token, raw in run.bodies(n, run.FAST_KIND, 1):
        data = json.loads(raw)
        data["body"]["thing"] = f"thing-{len(out) % FEW_KEYS}"
        out.append((token, json.dumps(data).encode()))
    return out


def throughput(port: int, sink: MailSink, n: int) -> tuple[float, int, int]:
    """Deliveries/s from the first POST to the last mail; the replies among them; non-2xx answers."""
    sink.reset()
    load = bodies(n)
    start = time.time()
    _, statuses = run.post_all(port, load, connections=16)
    end = sink.wait_count(n, 600)
    return n / (end - start), sink.replies(), sum(c for s, c in statuses.items() if not 200 <= s < 300)


def measure(procs: run.Procs, tmp: Path, sink: MailSink, thread: str | None, n: int, rate: float) -> dict[str, float]:
    port = run.free_port()
    path = config(tmp, port, sink, thread)
    proc = procs.start([str(run.BIN / "relay"), "serve", "--config", str(path)], cwd=tmp)
    try:
        run.wait_until(lambda: run.http("GET", f"http://127.0.0.1:{port}/readyz")[0] == 200, 60, "relay serve")
        run._latency(port, sink, bodies(50), 50)  # warm-up
        p50, p99, bad = run._latency(port, sink, bodies(200), rate)
        light_replies = sink.replies()
        per_s, replies, bad2 = throughput(port, sink, n)
    finally:
        procs.stop(proc, 60)
    if bad or bad2:
        raise RuntimeError(f"relay answered non-2xx: {bad + bad2}")
    return {"p50_ms": p50, "p99_ms": p99, "light_replies": light_replies, "per_s": per_s, "replies": replies}


def table(found: dict[str, dict[str, float]], n: int) -> str:
    base = found.get("none", next(iter(found.values())))
    rows = [
        "| arm | P2-like p50 (ms) | p99 (ms) | P4-like deliveries/s | replies (light; load) |",
        "|---|---|---|---|---|",
    ]
    for arm, f in found.items():
        ratio = "" if arm == "none" else " ({:.2f} x)"
        rows.append(
            f"| {arm} | {f['p50_ms']:.1f}{ratio.format(f['p50_ms'] / base['p50_ms'])} "
            f"| {f['p99_ms']:.1f}{ratio.format(f['p99_ms'] / base['p99_ms'])} "
            f"| {f['per_s']:.0f}{ratio.format(f['per_s'] / base['per_s'])} "
            f"| {f['light_replies']:.0f} of 200; {f['replies']:.0f} of {n} |"
        )
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("-n", type=int, default=1000, help="notifications for the throughput (default 1,000)")
    parser.add_argument("--rate", type=float, default=20, help="the light load's rate (default 20/s, as P2)")
    parser.add_argument("--arms", default=",".join(ARMS), help="which arms, comma-separated (default: all)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(f"load average before: {os.getloadavg()}", flush=True)
    procs = run.Procs()
    tmp = Path(tempfile.mkdtemp(prefix="relay-threads-"))
    arms = {arm: ARMS[arm] for arm in args.arms.split(",")}
    runs: dict[str, dict[str, list[float]]] = {arm: {} for arm in arms}
    try:
        sink = MailSink(procs)
        for r in range(args.rounds):
            print(f"round {r + 1}", flush=True)
            for arm, thread in arms.items():
                found = measure(procs, tmp / f"{arm}-{r}", sink, thread, args.n, args.rate)
                print(f"   {arm}: {json.dumps({k: round(v, 1) for k, v in found.items()})}", flush=True)
                for key, value in found.items():
                    runs[arm].setdefault(key, []).append(value)
    finally:
        procs.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
    medians = {arm: {k: statistics.median(v) for k, v in figures.items()} for arm, figures in runs.items()}
    print(json.dumps({"median": medians, "runs": runs}, indent=1))
    print(table(medians, args.n))
    print(f"load average after: {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
