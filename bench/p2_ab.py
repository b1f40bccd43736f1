"""P2 of two relays and the durable peer in one run (issue 36: the listener weighed): relay as another venv has
it (`--before`, e.g. the main worktree's, with its wake-up jobs listening for more), relay as this venv has it,
and the peer, taking turns within each round. For each: p50 and p99 at 20/s (`run.light_load`) and the
capacity (the highest rate of `run.LADDER` whose p99 stays under 1 s). `--before` may be given more than once
(arms `before`, `before2`, ...); `--throughput` also measures each relay's P3 and P4 as `bench/run.py` does.

    .venv/bin/python bench/p2_ab.py --before /work/main/.venv --quick      # one round, 3 s ladder steps
    .venv/bin/python bench/p2_ab.py --before /path/to/old/.venv --rounds 3
    .venv/bin/python bench/p2_ab.py --before /old/.venv --before /older/.venv --throughput --rounds 3

Prints each figure as it is measured, then the medians as JSON and issue 36's P2 limits for each relay
(p99 at 20/s <= 50 ms, p50 <= the peer's, capacity >= 2 x the peer's), with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # bench/run.py, beside this file

P99_LIMIT_MS = 50.0


def limits(found: dict[str, float], arm: str) -> dict[str, bool]:
    """Issue 36's P2 limits for one relay, against the peer's medians."""
    return {
        "p99 <= 50 ms": found[f"{arm}_p99_ms"] <= P99_LIMIT_MS,
        "p50 <= peer": found[f"{arm}_p50_ms"] <= found["peer_p50_ms"],
        "capacity >= 2 x peer": found[f"{arm}_capacity"] >= 2 * found["peer_capacity"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--before", type=Path, action="append", required=True, help="another relay's venv (its bin/relay is run)"
    )
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="capacity steps of 3 s (else 5 s)")
    parser.add_argument("--throughput", action="store_true", help="also P3 and P4 of each relay (run.py's counts)")
    args = parser.parse_args()
    arms = {f"before{i + 1 if i else ''}": venv.resolve() / "bin" for i, venv in enumerate(args.before)}
    arms["after"] = run.BIN
    seconds = 3 if args.quick else 5
    print(f"load average before: {os.getloadavg()}", flush=True)
    procs = run.Procs()
    tmp = Path(tempfile.mkdtemp(prefix="relay-p2-ab-"))
    runs: dict[str, list[float]] = {}

    def note(key: str, value: float) -> None:
        runs.setdefault(key, []).append(value)
        print(f"   {key}: {value:.1f}", flush=True)

    try:
        sink = run.Sink(procs)
        for r in range(args.rounds):
            print(f"round {r + 1}", flush=True)
            for arm, bin_dir in arms.items():
                with run.relay_serve(procs, tmp / f"{arm}-{r}", sink, bin_dir=bin_dir) as (port, _):
                    p50, p99, _ = run.light_load(run.latency, port, sink)
                    note(f"{arm}_p50_ms", p50)
                    note(f"{arm}_p99_ms", p99)
                    best, steps = run.capacity(port, sink, seconds)
                    note(f"{arm}_capacity", best)
                    print(f"   {arm} p99 by rate: {steps}", flush=True)
                    if args.throughput:
                        note(f"{arm}_p3", run.throughput(port, sink, 400, run.SLOW_KIND, 3, 16)[0])
                        note(f"{arm}_p4", run.throughput(port, sink, 2000, run.FAST_KIND, 3, 16)[0])
            with run.durable_peer(procs, tmp / f"peer-{r}", sink) as peer:
                p50, p99, _ = run.light_load(run.latency, peer.port, sink, peer.settle)
                note("peer_p50_ms", p50)
                note("peer_p99_ms", p99)
                best, steps = run.capacity(peer.port, sink, seconds, peer.settle)
                note("peer_capacity", best)
                print(f"   peer p99 by rate: {steps}", flush=True)
    finally:
        procs.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
    found = {k: statistics.median(v) for k, v in runs.items()}
    print(json.dumps({"median": found, "runs": runs}, indent=1))
    for arm in arms:
        print(arm, json.dumps(limits(found, arm)))
    print(f"load average after: {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
